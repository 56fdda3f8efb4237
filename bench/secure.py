"""The SASL_SSL rows of bench/broker.py (issue 21): the same produce and consume as the PLAINTEXT rows,
through a SASL_SSL listener (SCRAM-SHA-512 over TLS) of the same broker process, in the same run, and
SCRAM authentications per second.

- One ``kafkawire broker`` with a PLAINTEXT and a SASL_SSL listener; certificates made with trustme, the
  SCRAM user added with --add-scram.
- Produce and consume each run on both listeners, --repeats times, alternating; the best of each is
  scored: SASL_SSL consume >= 50% of PLAINTEXT consume, produce >= 70%.
- TLS path: the asyncio SSL transport encrypts in user space (Python's ssl module with memory BIOs);
  kernel TLS would need the socket itself to run TLS (ssl.OP_ENABLE_KTLS, Python 3.12+ and a kernel
  with the tls module), which asyncio's transport does not use: the row says which path ran.
- SCRAM authentications per second: fresh connections to the SASL_PLAINTEXT listener, each doing
  SaslHandshake and the two SaslAuthenticate round trips of SCRAM-SHA-512 (4096 iterations, which each
  client exchange pays to salt the password; the broker keeps stored and server keys and salts nothing),
  from four client threads.
"""
from __future__ import annotations

import socket
import ssl
import tempfile
import threading
import time
from pathlib import Path

import trustme

from common import BrokerProcess

from kafkawire import messages as m
from kafkawire.framing import Correlator, FrameBuffer
from kafkawire.sasl.scram import MECHANISMS, ScramClient

USER, PASSWORD = "bench", "bench-secret"


def tls_path() -> str:
    return ("kernel TLS offered by ssl (OP_ENABLE_KTLS) but unused: asyncio encrypts in user space"
            if hasattr(ssl, "OP_ENABLE_KTLS") else
            "user-space TLS (asyncio's SSL transport; no sendfile: kernel TLS needs Python 3.12+)")


class SecureBroker:
    """A broker process with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners and a SCRAM user."""

    def __init__(self, folder: Path):
        ca = trustme.CA()
        certificate = ca.issue_cert("127.0.0.1", "localhost")
        self.ca = folder / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca))
        certificate.private_key_and_cert_chain_pem.write_to_path(str(folder / "server.pem"))
        overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", "ssl.keystore.location": str(folder / "server.pem"),
        }
        extra = [arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}")]
        self.process = BrokerProcess(folder / "data", folder / "broker.log", *extra,
                                     "--add-scram", f"SCRAM-SHA-512=[name={USER},password={PASSWORD}]")
        self.plaintext = self.process.bootstrap
        self.sasl_ssl, self.sasl_plaintext = self.process.listeners["SASL_SSL"], self.process.listeners["SASL_PLAINTEXT"]
        self.client_settings = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                "sasl.username": USER, "sasl.password": PASSWORD, "ssl.ca.location": str(self.ca)}

    def stop(self) -> None:
        self.process.stop()


def scram_authentications_per_second(address: str, seconds: float = 3.0, threads: int = 4) -> float:
    """Full SCRAM-SHA-512 exchanges on fresh connections, as many as ``threads`` clients manage."""
    host, port = address.rsplit(":", 1)
    mechanism = MECHANISMS["SCRAM-SHA-512"]
    done = [0] * threads
    deadline = time.monotonic() + seconds

    def exchange(correlator: Correlator, sock: socket.socket, body, version: int):
        sock.sendall(correlator.request(body, version))
        frames = FrameBuffer()
        while (frame := frames.next_frame()) is None:
            frames.feed(sock.recv(1 << 16))
        return correlator.response(frame)[2]

    def run(index: int) -> None:
        while time.monotonic() < deadline:
            with socket.create_connection((host, int(port))) as sock:
                correlator = Correlator(client_id="scram-bench")
                assert exchange(correlator, sock, m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
                client = ScramClient(mechanism, USER, PASSWORD)
                first = exchange(correlator, sock, m.SaslAuthenticateRequest(auth_bytes=client.first()), 2)
                final = exchange(correlator, sock, m.SaslAuthenticateRequest(
                    auth_bytes=client.final(bytes(first.auth_bytes))), 2)
                assert final.error_code == 0, final.error_message
                client.verify(bytes(final.auth_bytes))
            done[index] += 1

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(done) / (time.perf_counter() - started)


def scratch_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="kafkawire-bench-secure-"))
