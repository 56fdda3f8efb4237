"""Real TLS traffic captured on the loopback, with the key log that decrypts it: one broker with an SSL and
a SASL_SSL listener (trustme certificates, advertised as ``localhost`` for the SNI) and its own plaintext
tap, ``SSLKEYLOGFILE`` set while it starts (its listeners log every connection's secrets, as the
clients' would), tcpdump on its ports, and clients over TLS 1.3 and TLS 1.2:

- confluent-kafka (librdkafka, TLS 1.3: TLS_AES_256_GCM_SHA384) producing and consuming over SSL, and
  producing over SASL_SSL with SCRAM-SHA-512;
- kafkawire's client forced to TLS 1.2 (``ssl.enabled.protocols=TLSv1.2``: ECDHE-ECDSA-AES256-GCM-SHA384: trustme's keys are ECDSA);
- kafka-python over TLS 1.2 with AES-128-GCM and with ChaCha20-Poly1305 (its ``ssl_context``).
"""
from __future__ import annotations

import gc
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from support.broker_harness import BrokerThread
from support.loopback_capture import served_ports, start_tcpdump, stop_tcpdump, wait_for_ends, wait_until

TOPIC = "tls-topic"
PASSWORD = "bob-Pw-5f1e0c27"
TLS12_CIPHERS = {"aes128": "ECDHE-ECDSA-AES128-GCM-SHA256", "chacha": "ECDHE-ECDSA-CHACHA20-POLY1305"}


@dataclass
class TlsCapture:
    wire: Path          # tcpdump on lo
    tap: Path           # the broker's plaintext tap of the same connections
    keys: Path          # the broker's key log
    ports: list[int]    # the broker's TLS ports
    clients: list[int]  # the client ports of the connections the broker served


def _config(folder: Path):
    import trustme

    from kafkawire.broker import BrokerConfig
    ca = trustme.CA()
    ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    properties = {
        "listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "advertised.listeners": "SSL://localhost:0,SASL_SSL://localhost:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(folder / "server.pem"), "ssl.truststore.location": str(folder / "ca.pem"),
    }
    return BrokerConfig.from_properties(properties, data_dir=folder / "data", tap_path=folder / "tap.pcapng",
                                        scram_credentials=[f"SCRAM-SHA-512=[name=bob,password={PASSWORD}]"],
                                        group_initial_rebalance_delay_ms=0, num_partitions=1)


def _confluent(ssl_bootstrap: str, sasl_bootstrap: str, ca: Path) -> None:
    from confluent_kafka import Consumer, Producer
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    producer = Producer({"bootstrap.servers": ssl_bootstrap, "linger.ms": 5, "client.id": "ck-tls13", **tls})
    for i in range(20):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"value %d " % i * 50)
    assert producer.flush(30) == 0
    del producer
    consumer = Consumer({"bootstrap.servers": ssl_bootstrap, "group.id": "tls-group", "auto.offset.reset": "earliest",
                         "client.id": "ck-tls13-consumer", **tls})
    consumer.subscribe([TOPIC])
    got = 0
    while got < 20:
        message = consumer.poll(10)
        assert message is not None, "the consumer read nothing"
        if message.error() is None:
            got += 1
    consumer.close()
    del consumer
    sasl = Producer({"bootstrap.servers": sasl_bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca),
                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": PASSWORD,
                     "client.id": "ck-sasl-ssl"})
    sasl.produce(TOPIC, value=b"over SASL_SSL")
    assert sasl.flush(30) == 0
    del sasl


def _kafkawire(bootstrap: str, ca: Path) -> None:
    from kafkawire.client import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca),
                         "ssl.enabled.protocols": "TLSv1.2", "client.id": "kw-tls12"})
    try:
        for i in range(5):
            producer.send(TOPIC, b"kafkawire over TLS 1.2 %d" % i).result(30)
    finally:
        producer.close()


def _kafka_python(bootstrap: str, ca: Path, cipher: str) -> None:
    from kafka import KafkaProducer
    context = ssl.create_default_context(cafile=str(ca))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS[cipher])
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context,
                             client_id=f"kp-tls12-{cipher}")
    producer.send(TOPIC, b"kafka-python over TLS 1.2 " + cipher.encode()).get(30)
    producer.close()


def tls_capture(folder: Path) -> TlsCapture:
    keys = folder / "keys.log"
    before = os.environ.get("SSLKEYLOGFILE")
    os.environ["SSLKEYLOGFILE"] = str(keys)  # read when the listeners' contexts are made
    try:
        with served_ports() as clients, BrokerThread(config=_config(folder)) as broker:
            os.environ.pop("SSLKEYLOGFILE")  # the clients of this process log nothing: the broker's log suffices
            ssl_bootstrap, sasl_bootstrap = (broker.broker.bootstrap_for(name) for name in ("SSL", "SASL_SSL"))
            ports = [int(b.rsplit(":", 1)[1]) for b in (ssl_bootstrap, sasl_bootstrap)]
            dump = start_tcpdump(folder / "wire.pcap", ports)
            try:
                _confluent(ssl_bootstrap, sasl_bootstrap, folder / "ca.pem")
                _kafkawire(ssl_bootstrap, folder / "ca.pem")
                for cipher in TLS12_CIPHERS:
                    _kafka_python(ssl_bootstrap, folder / "ca.pem", cipher)
                gc.collect()
                wait_until(lambda: not broker.broker._connections, "the clients' connections to close")
                wait_for_ends(folder / "wire.pcap", ports, clients)
            finally:
                stop_tcpdump(dump)
    finally:
        os.environ.pop("SSLKEYLOGFILE", None)
        if before is not None:
            os.environ["SSLKEYLOGFILE"] = before
    return TlsCapture(folder / "wire.pcap", folder / "tap.pcapng", keys, ports, list(clients))
