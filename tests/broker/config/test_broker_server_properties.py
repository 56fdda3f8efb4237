"""Kafka's own server.properties: read as Java reads it, every Kafka 4.3 key accepted (the unknown ones
refused, all in one message; the ones with no effect here named in one start-up line), the shipped
config/server.properties and config/secure.properties serving confluent-kafka from a real process,
the CONTROLLER listener answering as Kafka's controller does, and the socket buffer sizes applied."""
from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import uuid

import pytest
import trustme

from kafkawire import messages as m
from kafkawire.broker import Broker
from kafkawire.broker.config.broker_config import BrokerConfig
from kafkawire.broker.config.kafka_properties import known_kafka_property
from kafkawire.broker.config.properties import parse_properties, read_properties
from kafkawire.error_codes import ErrorCode

from support.broker_harness import BrokerThread, RawClient
from support.broker_process import KAFKAWIRE, BrokerProcess
from support.paths import REPO

STOCK = REPO / "config" / "server.properties"
SECURE = REPO / "config" / "secure.properties"
# What the stock file sets that has no meaning in one process.
STOCK_NO_EFFECT = ["controller.quorum.bootstrap.servers", "inter.broker.listener.name", "num.io.threads",
                   "num.network.threads", "num.recovery.threads.per.data.dir", "offsets.topic.replication.factor",
                   "share.coordinator.state.topic.min.isr", "share.coordinator.state.topic.replication.factor",
                   "transaction.state.log.min.isr", "transaction.state.log.replication.factor"]

# ---- the parser against Java's ---------------------------------------------------------------------------------

_ORACLE = """
import java.io.FileInputStream;
import java.util.Properties;
import java.util.TreeSet;

public class Oracle {
    static String escaped(String text) {
        StringBuilder out = new StringBuilder();
        for (char c : text.toCharArray()) {
            if (c >= 0x20 && c < 0x7f && c != '\\\\') out.append(c);
            else out.append(String.format("\\\\u%04x", (int) c));
        }
        return out.toString();
    }

    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { properties.load(in); }
        for (String key : new TreeSet<>(properties.stringPropertyNames()))
            System.out.println(escaped(key) + "=" + escaped(properties.getProperty(key)));
    }
}
"""
# Each case: escapes, continuations (odd and even backslashes, blank and commented lines after one),
# the three separators and blanks around them, escaped separators in keys, ISO-8859-1 bytes, the
# three line ends, form feeds as blanks, and a NEL byte that is not a line end.
_TRICKY = (b"# comment \\\n"
           b"! bang comment\n"
           b"plain=value\n"
           b"colon : value with spaces  \n"
           b"blank\tseparated value\n"
           b"\f  indented.key   =   v\n"
           b"escaped\\=key\\:and\\ blank=a\\tb\\nc\\u0041\\u00e9\\\\end\n"
           b"latin1=caf\xe9 \x85 na\xefve\n"
           b"continued=first,\\\n   second,\\\n\tthird\n"
           b"even.backslashes=ends\\\\\n"
           b"after.even=yes\n"
           b"odd.backslashes=goes\\\\\\\n  on\n"
           b"blank.after=x\\\n\n"
           b"hash.after=x\\\n#not a comment\n"
           b"crlf=1\r\ncr=2\rlf=3\n"
           b"equals.in.value==a=b\n"
           b"sep.then.blank = = v\n"
           b"other.escapes=\\q\\z\\\"\n"
           b"key.only\n"
           b"empty=\n"
           b"dup=first\n"
           b"dup=second\n"
           b"eof.continuation=last\\")


def _escaped(text: str) -> str:
    return "".join(c if 0x20 <= ord(c) < 0x7F and c != "\\" else f"\\u{ord(c):04x}" for c in text)


@pytest.mark.skipif(shutil.which("java") is None, reason="needs java, as the oracle")
def test_properties_are_read_as_java_reads_them(tmp_path):
    (tmp_path / "Oracle.java").write_text(_ORACLE)
    path = tmp_path / "tricky.properties"
    path.write_bytes(_TRICKY)
    java = subprocess.run(["java", str(tmp_path / "Oracle.java"), str(path)], capture_output=True, text=True,
                          timeout=120, check=True).stdout.splitlines()
    ours = read_properties(path)
    assert [f"{_escaped(key)}={_escaped(value)}" for key, value in sorted(ours.items())] == java
    assert ours["latin1"] == "café \x85 naïve" and ours["escaped=key:and blank"] == "a\tb\ncAé\\end"
    assert ours["odd.backslashes"] == "goes\\on" and ours["after.even"] == "yes"


def test_a_malformed_unicode_escape_is_refused():
    for bad in ("k=\\u12", "k=\\u12g4", "k=\\u+123"):  # Java: "Malformed \\uxxxx encoding."
        with pytest.raises(ValueError, match="uxxxx"):
            parse_properties(bad)


# ---- known, unknown and no-effect keys ---------------------------------------------------------------------------

def test_every_stock_key_is_known_and_unknown_ones_are_named_together(tmp_path):
    stock = read_properties(STOCK)
    assert all(known_kafka_property(key) for key in stock)
    config = BrokerConfig.from_properties({**stock, "log.dirs": str(tmp_path)})
    assert list(config.ignored_properties) == STOCK_NO_EFFECT
    assert (config.node_id, config.socket_send_buffer_bytes, config.socket_receive_buffer_bytes) == (1, 102400, 102400)
    assert [(lis.name, lis.controller) for lis in config.listener_list()] == [("PLAINTEXT", False),
                                                                              ("CONTROLLER", True)]
    mixed = {**stock, "log.dirs": str(tmp_path), "zookeeper.connect": "localhost:2181", "num.io.treads": "8",
             "listener.name.plaintext.bogus": "1"}
    with pytest.raises(ValueError) as refused:
        BrokerConfig.from_properties(mixed)
    assert str(refused.value) == ("unknown broker settings 'listener.name.plaintext.bogus', 'num.io.treads', "
                                  "'zookeeper.connect': not a Kafka 4.3 broker property")


def test_node_identity_and_roles(tmp_path):
    assert BrokerConfig.from_properties({"broker.id": "7"}, data_dir=tmp_path).node_id == 7
    assert BrokerConfig.from_properties({"broker.id": "7", "node.id": "7"}, data_dir=tmp_path).node_id == 7
    with pytest.raises(ValueError, match="broker.id 7 and node.id 8"):
        BrokerConfig.from_properties({"broker.id": "7", "node.id": "8"}, data_dir=tmp_path)
    for roles in ("broker", "broker,controller", "controller, broker"):
        BrokerConfig.from_properties({"process.roles": roles}, data_dir=tmp_path)
    for roles in ("controller", "broker,zookeeper", ""):
        with pytest.raises(ValueError, match="process.roles"):
            BrokerConfig.from_properties({"process.roles": roles}, data_dir=tmp_path)
    with pytest.raises(ValueError, match="socket.send.buffer.bytes"):
        BrokerConfig.from_properties({"socket.send.buffer.bytes": "0"}, data_dir=tmp_path)


def test_controller_listeners(tmp_path):
    def listeners(**properties):
        config = BrokerConfig.from_properties(properties, data_dir=tmp_path)
        return [(lis.name, lis.protocol, lis.controller) for lis in config.listener_list()]

    # the controller's listener comes after the broker's, PLAINTEXT when the protocol map is Kafka's default
    assert listeners(**{"listeners": "CONTROLLER://:0,PLAINTEXT://:0", "controller.listener.names": "CONTROLLER"}) \
        == [("PLAINTEXT", "PLAINTEXT", False), ("CONTROLLER", "PLAINTEXT", True)]
    with pytest.raises(ValueError, match="no security protocol for listener CONTROLLER"):
        listeners(**{"listeners": "PLAINTEXT://:0,CONTROLLER://:0", "controller.listener.names": "CONTROLLER",
                     "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT"})
    with pytest.raises(ValueError, match="controller.listener.names: CTL not in listeners"):
        listeners(**{"listeners": "PLAINTEXT://:0", "controller.listener.names": "CTL"})
    with pytest.raises(ValueError, match="a broker listener is needed"):
        listeners(**{"listeners": "CONTROLLER://:0", "controller.listener.names": "CONTROLLER"})


def test_the_no_effect_keys_are_named_in_one_start_up_line(tmp_path, caplog):
    stock = read_properties(STOCK)
    stock.update({"log.dirs": str(tmp_path), "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                  "advertised.listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"})
    with caplog.at_level(logging.INFO, logger="kafkawire"), BrokerThread(config=BrokerConfig.from_properties(stock)):
        pass
    lines = [record for record in caplog.records if "no effect" in record.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert lines[0].getMessage().endswith(": " + ", ".join(STOCK_NO_EFFECT))


# ---- socket buffers ----------------------------------------------------------------------------------------------

def test_socket_buffer_sizes_apply_to_listening_and_accepted_sockets(tmp_path):
    with socket.socket() as default:
        os_receive = default.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    for send, receive in ((65536, 131072), (-1, -1)):
        config = BrokerConfig.from_properties({"socket.send.buffer.bytes": str(send),
                                               "socket.receive.buffer.bytes": str(receive)},
                                              data_dir=tmp_path / str(send), port=0)
        with BrokerThread(config=config) as thread, RawClient(thread.port) as client:
            client.request(m.ApiVersionsRequest(), 3)  # accepted and served
            broker: Broker = thread.broker
            (connection,) = broker._connections.values()
            accepted = connection.writer.get_extra_info("socket")
            listening = broker._servers[0].sockets[0]
            got_send = accepted.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
            got_receive = listening.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        if send == -1:  # the operating system's own (a send buffer it tunes as it sends)
            assert got_receive == os_receive and got_send not in (65536, 2 * 65536)
        else:  # Linux doubles what it is given, for its bookkeeping
            assert got_send in (send, 2 * send) and got_receive in (receive, 2 * receive)


# ---- the stock file, as a real process, and its CONTROLLER listener ---------------------------------------------

def _stock_overrides(data_dir) -> list[str]:
    return ["--config", str(STOCK), "--override", f"log.dirs={data_dir}",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "--override", "advertised.listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"]


def _listener_port(process: BrokerProcess, name: str) -> int:
    line = next(line for line in process.lines if line.startswith(f"listener {name} "))
    return int(line.split()[-1].rsplit(":", 1)[1])


@pytest.fixture
def stock_broker(tmp_path):
    process = BrokerProcess(tmp_path / "flags", *_stock_overrides(tmp_path / "data"))
    yield process
    process.kill()


def test_kafkas_stock_server_properties_serves_confluent_kafka(stock_broker):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    warnings = [line for line in stock_broker.lines if "no effect" in line]
    assert len(warnings) == 1 and warnings[0].rstrip().endswith(", ".join(STOCK_NO_EFFECT))
    bootstrap = f"127.0.0.1:{stock_broker.port}"
    topic = f"stock-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(10):
        producer.produce(topic, key=b"k", value=f"v{index}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < 10:
            message = consumer.poll(30)
            assert message is not None, "no record within 30 s"
            assert message.error() is None, message.error()
            values.append(message.value())
    finally:
        consumer.close()
    assert values == [f"v{index}".encode() for index in range(10)]


def test_the_controller_listener_answers_as_kafkas_controller(stock_broker):
    port = _listener_port(stock_broker, "CONTROLLER")
    with RawClient(port) as client:
        served = {key.api_key for key in client.request(m.ApiVersionsRequest(), 3).api_keys}
        assert served == {17, 18, 19, 20, 29, 30, 31, 32, 33, 36, 37, 43, 44, 45, 46, 49, 51, 55, 57, 60}
        controllers = client.request(m.DescribeClusterRequest(endpoint_type=2), 1)
        assert (controllers.error_code, controllers.endpoint_type, controllers.controller_id) == (0, 2, 1)
        assert [(node.broker_id, node.port) for node in controllers.brokers] == [(1, port)]
        brokers = client.request(m.DescribeClusterRequest(endpoint_type=1), 1)
        assert brokers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
        client.send(m.MetadataRequest(topics=None), 12)  # not a controller's API: Kafka closes the connection
        with pytest.raises(ConnectionError):
            client.receive()
    with RawClient(stock_broker.port) as client:  # the broker's listener describes the brokers
        described = client.request(m.DescribeClusterRequest(endpoint_type=1), 1)
        assert [(node.broker_id, node.port) for node in described.brokers] == [(1, stock_broker.port)]


def test_cli_names_every_unknown_key_in_one_line(tmp_path):
    config = tmp_path / "server.properties"
    config.write_bytes(STOCK.read_bytes() + b"\nzookeeper.connect=localhost:2181\nlog.message.format.version=3.0\n")
    done = subprocess.run([str(KAFKAWIRE), "broker", "--config", str(config), "--override", f"log.dirs={tmp_path}/d"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ("kafkawire broker: unknown broker settings 'log.message.format.version', "
                           "'zookeeper.connect': not a Kafka 4.3 broker property\n")


# ---- config/secure.properties: SASL_SSL, SCRAM, ACLs -----------------------------------------------------------

def test_secure_properties_serve_confluent_kafka_over_sasl_ssl_with_scram(tmp_path):
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    ca = trustme.CA()
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "key.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    process = BrokerProcess(
        tmp_path / "flags", "--config", str(SECURE), "--override", f"log.dirs={tmp_path / 'data'}",
        "--override", "listeners=SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "--override", "advertised.listeners=SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "--override", f"ssl.keystore.location={tmp_path / 'key.pem'}",
        "--override", f"ssl.truststore.location={tmp_path / 'ca.pem'}",
        "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]",
        "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    try:
        def settings(user: str, mechanism: str) -> dict[str, str]:
            return {"bootstrap.servers": f"127.0.0.1:{process.port}", "security.protocol": "SASL_SSL",
                    "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": f"{user}-secret",
                    "ssl.ca.location": str(tmp_path / "ca.pem")}

        admin_user = settings("admin", "SCRAM-SHA-512")
        topic = "secured"
        admin = AdminClient(admin_user)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        producer = Producer(admin_user)
        producer.produce(topic, value=b"from admin")
        assert producer.flush(30) == 0
        consumer = Consumer({**admin_user, "group.id": "secured-group", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        try:
            message = consumer.poll(30)
            assert message is not None and message.error() is None, message and message.error()
            assert message.value() == b"from admin"
        finally:
            consumer.close()
        errors = []  # alice authenticates, but has no ACL: the authorizer refuses her
        refused = Producer({**settings("alice", "SCRAM-SHA-256"), "message.timeout.ms": "10000"})
        refused.produce(topic, value=b"from alice", on_delivery=lambda error, _: errors.append(error))
        refused.flush(30)
        assert [error.code() for error in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        reported = []  # and a wrong password does not authenticate: librdkafka says so and retries
        wrong = AdminClient({**settings("alice", "SCRAM-SHA-256"), "sasl.password": "wrong",
                             "error_cb": reported.append})
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=2)
        wrong.poll(0)  # (serves the error callback)
        assert KafkaError._AUTHENTICATION in {error.code() for error in reported}, reported
    finally:
        process.kill()
