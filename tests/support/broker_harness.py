"""Running the reference broker for tests: in a thread with its own event loop (for blocking
clients such as kafka-python and confluent-kafka), and a minimal raw client that speaks the wire
protocol through kafkawire.framing, for tests that need exact control over each request."""
from __future__ import annotations

import contextlib
import socket

from kafkawire.broker.background import BrokerThread as _BrokerThread
from kafkawire.framing import Correlator, FrameBuffer


class BrokerThread(_BrokerThread):
    """kafkawire.broker.BrokerThread with groups that rebalance at once (tests need no join delay)."""

    def __init__(self, **settings):
        settings.setdefault("group_initial_rebalance_delay_ms", 0)
        super().__init__(**settings)


class RawClient:
    """One blocking connection that sends requests and reads their responses, in order."""

    def __init__(self, port: int, client_id: str = "raw-test-client"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlator = Correlator(client_id=client_id)
        self.frames = FrameBuffer()

    def send(self, body, version: int, expects_response: bool | None = None) -> None:
        self.sock.sendall(self.correlator.request(body, version, expects_response))

    def receive(self):
        while True:
            frame = self.frames.next_frame()
            if frame is not None:
                _, _header, response = self.correlator.response(frame)
                return response
            data = self.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self.frames.feed(data)

    def request(self, body, version: int):
        self.send(body, version)
        return self.receive()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
