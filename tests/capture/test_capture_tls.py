"""TLS decryption (``capture.tls``) over what the clients of test_capture_spark_tls do not reach: the
cipher suites and handshakes that ``openssl s_client`` can be made to use against the broker's SSL
listener (TLS 1.3 with ChaCha20-Poly1305 and AES-128-GCM, key updates both ways; TLS 1.2 with and
without the extended master secret), each captured by tcpdump and decrypted with s_client's own key log
(``-keylogfile``); and the key log's format.

The client sends ApiVersions requests through s_client's standard input, and its interactive commands
``K`` and ``k`` (a KeyUpdate that asks the broker to update too, then one that does not) between them.
"""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import pytest

pytest.importorskip("cryptography")

from support.broker_harness import BrokerThread  # noqa: E402
from support.loopback_capture import served_ports, start_tcpdump, stop_tcpdump, wait_for_ends, wait_until  # noqa: E402
from support.tls_capture import _config  # noqa: E402
from kafkawire.capture.kafka.kafka_connection import decode_connection  # noqa: E402
from kafkawire.capture.files.packets import iter_packets  # noqa: E402
from kafkawire.capture.model import ConnectionSummary, KafkaFrame, Problem  # noqa: E402
from kafkawire.capture.tls.key_log import KeyLogError, load_key_log, parse_key_log  # noqa: E402

OPENSSL = shutil.which("openssl")
TSHARK = shutil.which("tshark")
REQUESTS = 4
# An OpenSSL configuration that turns the extended master secret (RFC 7627) off for s_client
NO_EMS = """openssl_conf = init
[init]
ssl_conf = ssl
[ssl]
system_default = defaults
[defaults]
Options = -ExtendedMasterSecret
"""


def api_versions(corr: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, corr, 4) + b"ossl"
    return struct.pack(">i", len(body)) + body


class _Reader(threading.Thread):
    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream, self.data = stream, bytearray()
        self.start()

    def run(self):
        while chunk := self.stream.read1(65536):
            self.data += chunk


def _answered(out: bytearray, corr: int) -> bool:
    """Whether an ApiVersions v0 response with this correlation id and no error reached s_client."""
    return re.search(rb"\x00\x00..%b\x00\x00" % struct.pack(">i", corr), bytes(out), re.DOTALL) is not None


def s_client_capture(folder: Path, options: list[str], key_updates: bool, env: dict | None = None) -> tuple[Path, Path]:
    if OPENSSL is None:
        pytest.skip("openssl is not installed")
    keys, wire = folder / "s_client.keys", folder / "wire.pcap"
    with served_ports() as clients, BrokerThread(config=_config(folder)) as broker:
        port = int(broker.broker.bootstrap_for("SSL").rsplit(":", 1)[1])
        dump = start_tcpdump(wire, [port])
        try:
            client = subprocess.Popen([OPENSSL, "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
                                       "-keylogfile", str(keys), *options], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            out, err = _Reader(client.stdout), _Reader(client.stderr)
            try:
                for corr in range(REQUESTS):
                    if key_updates and corr in (1, 2):  # K: update, and ask the broker to; k: update
                        client.stdin.write(b"K\n" if corr == 1 else b"k\n")
                        client.stdin.flush()
                        wait_until(lambda: err.data.count(b"KEYUPDATE") == corr, "s_client's key update")
                    client.stdin.write(api_versions(corr))
                    client.stdin.flush()
                    wait_until(lambda: _answered(out.data, corr), f"the response to request {corr}")
                client.stdin.close()
                client.wait(30)
            finally:
                if client.poll() is None:
                    client.kill()
            wait_until(lambda: clients, "the connection to close")
            wait_for_ends(wire, [port], clients)
        finally:
            stop_tcpdump(dump)
    return wire, keys


def decrypted(wire: Path, keys) -> list:
    return list(decode_connection(iter_packets(str(wire)), keys=keys))


def server_hello_extensions(wire: Path) -> set[int]:
    if TSHARK is None:
        pytest.skip("tshark is not installed")
    fields = subprocess.run([TSHARK, "-r", str(wire), "-Y", "tls.handshake.type == 2", "-T", "fields",
                             "-e", "tls.handshake.extension.type"], capture_output=True, text=True, check=True).stdout
    return {int(value) for value in re.split(r"[,\s]+", fields.strip()) if value}


@pytest.mark.parametrize("name,options,key_updates,ems", [
    ("TLS 1.3 ChaCha20-Poly1305, key updates", ["-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"], True, None),
    ("TLS 1.3 AES-128-GCM", ["-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"], False, None),
    ("TLS 1.2 ChaCha20-Poly1305, extended master secret", ["-tls1_2", "-cipher", "ECDHE-ECDSA-CHACHA20-POLY1305"],
     False, True),
    ("TLS 1.2 AES-256-GCM, no extended master secret", ["-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384"],
     False, False),
])
def test_s_client_traffic_decrypts(tmp_path, name, options, key_updates, ems):
    env = None
    if ems is False:
        (tmp_path / "no-ems.cnf").write_text(NO_EMS)
        env = {**os.environ, "OPENSSL_CONF": str(tmp_path / "no-ems.cnf")}
    wire, keys = s_client_capture(tmp_path, options, key_updates, env)
    if ems is not None:
        assert (23 in server_hello_extensions(wire)) is ems
    items = decrypted(wire, load_key_log(str(keys)))
    frames = [item for item in items if isinstance(item, KafkaFrame)]
    assert [(f.direction, f.api_key, f.correlation_id, f.client_id) for f in frames] == [
        (direction, 18, corr, "ossl" if direction == "request" else None)
        for corr in range(REQUESTS) for direction in ("request", "response")]
    assert [item for item in items if isinstance(item, Problem)] == []
    [summary] = [item for item in items if isinstance(item, ConnectionSummary)]
    assert (summary.tls, summary.tls_decrypted, summary.tls_server_name) == (True, True, "localhost")
    assert (summary.requests, summary.responses) == (REQUESTS, REQUESTS)


def test_key_log_lines_and_errors(tmp_path):
    random = "ab" * 32
    keys = parse_key_log(f"# a comment\n\nCLIENT_RANDOM {random} {'11' * 48}\n"
                         f"SERVER_TRAFFIC_SECRET_0 {random} {'22' * 32}\nCLIENT_RANDOM {random[:-2]} 00\n"
                         f"CLIENT_TRAFFIC_SECRET_0 {random} 2", name="k.log")
    assert keys.of(bytes.fromhex(random)) == {"CLIENT_RANDOM": b"\x11" * 48, "SERVER_TRAFFIC_SECRET_0": b"\x22" * 32}
    assert (keys.malformed, keys.first_malformed) == (2, 5)
    assert keys.of(b"\x00" * 32) is None
    assert keys.missing("CLIENT_TRAFFIC_SECRET_0", bytes.fromhex(random)) == (
        "k.log has no CLIENT_TRAFFIC_SECRET_0 for client random abababababababab... (2 lines of it did not parse, "
        "the first at line 5: it may have been cut short)")
    with pytest.raises(KeyLogError, match="cannot read the key log"):
        load_key_log(str(tmp_path / "missing.log"))
    (tmp_path / "empty.log").write_text("# nothing\n")
    with pytest.raises(KeyLogError, match="no secret in NSS key log format"):
        load_key_log(str(tmp_path / "empty.log"))


def test_a_key_log_that_cannot_be_read_is_a_usage_error(tmp_path, capsys):
    import sys
    from argparse import Namespace

    from kafkawire.capture.terminal import show
    capture = tmp_path / "empty.pcap"
    capture.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))  # a pcap header, no packet
    args = Namespace(captures=[str(capture)], filter=[], json=False, detail=None, ports=None, fs_options=[],
                     keylog=str(tmp_path / "missing.log"))
    assert show.run(args) == 2
    assert "missing.log: cannot read the key log" in capsys.readouterr().err
    decode = subprocess.run([sys.executable, "-m", "kafkawire", "decode", str(capture), "--out", str(tmp_path / "out"),
                             "--keylog", str(tmp_path / "missing.log")], capture_output=True, text=True, timeout=120)
    assert decode.returncode == 2 and "missing.log: cannot read the key log" in decode.stderr, decode.stderr


def test_the_brokers_listeners_and_kafkawires_clients_honour_sslkeylogfile(tmp_path, monkeypatch):
    import trustme

    from kafkawire.broker.security.tls import server_context
    from kafkawire.client.aio.tls import client_context
    from kafkawire.client.core.security_config import SecurityConfig
    ca = trustme.CA()
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    settings = {"ssl.keystore.location": str(tmp_path / "server.pem")}
    client = SecurityConfig(security_protocol="SSL")
    assert server_context(settings).keylog_filename is None and client_context(client).keylog_filename is None
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "keys.log"))
    assert server_context(settings).keylog_filename == client_context(client).keylog_filename == str(
        tmp_path / "keys.log")
