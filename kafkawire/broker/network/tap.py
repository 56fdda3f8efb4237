"""The broker's wire tap: its own connections written as a pcapng file that Wireshark reads.

A capture of port 9092 needs privileges a demo may not have; the broker already sees every byte it
reads and writes, so it can write them itself. Each connection becomes a synthetic TCP conversation
(kafkawire.pcap.writer) between the client's and the broker's real addresses, stamped with
``time.time_ns()`` when the broker read or wrote the bytes.

Blocks are buffered and written once more than ``flush_bytes`` are pending or ``flush_seconds`` have
passed since the last write, when a connection closes, and at ``close``: a broker killed outright
loses little. The tap is meant for the broker's single event-loop thread. If writing the file fails,
the tap logs it and stops capturing rather than breaking the broker's connections.
"""
from __future__ import annotations

import itertools
import logging
import time
from typing import BinaryIO
from pathlib import Path

from ...pcap.writer import TcpConversationWriter, file_header

__all__ = ["WireTap"]

log = logging.getLogger(__name__)

_FLUSH_BYTES = 1 << 20
_FLUSH_SECONDS = 1.0


def _endpoint(address, other) -> tuple[str, int]:
    """``(ip, port)`` of a socket address; a socket closed before it was asked has none, so stand in
    the unspecified address of the other end's family."""
    if address:
        return address[0], address[1]
    return ("::" if other and ":" in other[0] else "0.0.0.0"), 0


class WireTap:
    """Writes the broker's traffic to ``path`` (pcapng). The ``conn`` handle that
    ``connection_opened`` returns is passed back to the other calls for that connection."""

    def __init__(self, path, *, flush_bytes: int = _FLUSH_BYTES, flush_seconds: float = _FLUSH_SECONDS,
                 interface_name: str = "kafkawire-broker"):
        self.path = Path(path)
        self.flush_bytes = flush_bytes
        self.flush_seconds = flush_seconds
        self._last_flush = time.monotonic()
        self._file: BinaryIO | None = open(self.path, "wb")
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._seeds = itertools.count()  # a reused address pair still gets new sequence numbers
        self._append(file_header("kafkawire", interface_name))
        self.flush()  # a valid, empty capture from the start

    @property
    def closed(self) -> bool:
        return self._file is None

    def connection_opened(self, client_addr: tuple, server_addr: tuple, ts_ns: int) -> TcpConversationWriter:
        client, server = _endpoint(client_addr, server_addr), _endpoint(server_addr, client_addr)
        conn = TcpConversationWriter(client, server, seed=next(self._seeds))
        self._append(conn.open(ts_ns))
        return conn

    def client_sent(self, conn: TcpConversationWriter, data, ts_ns: int) -> None:
        """Bytes the broker read from the client."""
        if conn.state == "open":
            self._append(conn.client_data(data, ts_ns))

    def broker_sent(self, conn: TcpConversationWriter, data, ts_ns: int) -> None:
        """Bytes the broker wrote to the client."""
        if conn.state == "open":
            self._append(conn.server_data(data, ts_ns))

    def connection_closed(self, conn: TcpConversationWriter, ts_ns: int, aborted: bool = False,
                          by_client: bool = True) -> None:
        """The end of a connection: a FIN exchange begun by one side, or a reset by it (``aborted``)."""
        if conn.state == "open":
            self._append(conn.abort(ts_ns, by_client=by_client) if aborted else conn.close(ts_ns, by_client=by_client))
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        if self._file is None or not self._pending:
            return
        try:
            self._file.writelines(self._pending)
            self._file.flush()
        except OSError as error:
            log.error("wire tap %s failed, capture stopped: %s", self.path, error)
            self._stop()
        self._pending.clear()
        self._pending_bytes = 0

    def close(self) -> None:
        self.flush()
        self._stop()

    def _append(self, blocks: bytes) -> None:
        if self._file is None or not blocks:
            return
        self._pending.append(blocks)
        self._pending_bytes += len(blocks)
        if self._pending_bytes > self.flush_bytes or time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()

    def _stop(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None

    def __enter__(self) -> "WireTap":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
