"""The rows stage 1 hands to the shuffle: a connection's packets from one split, packed into a chunk.

A row per packet cost the shuffle a pickle, an unpickle, a partitioner call and a sort comparison per
packet (docs/performance.md has what that came to). A chunk
holds up to ``MAX_PACKETS`` consecutive packets of one connection as fixed-size binary headers, so
the shuffle moves a few thousand rows per GB:

    row   = ((connection key, order of the chunk's first packet), (endpoints, headers, payloads))

- ``endpoints``: (src, sport, dst, dport) of the chunk's first packet; a header's direction bit says
  whether a packet went that way (0) or back (1).
- ``headers``: one ``HEADER`` per packet (order, time, TCP sequence, ack and flags, direction, where
  its payload is, bytes missing), in capture order.
- ``payloads``: None when the payloads stay in the capture file (a header's offset and length are in
  that file, read back by ``PayloadReader``); the payloads themselves, concatenated, for a gzip
  capture, which cannot be read at an offset (a header's offset is then into these bytes).

A connection's chunks cover disjoint, consecutive runs of its packets, so sorting rows by key puts
every packet of a connection in capture order, whichever splits and tasks the chunks came from.
"""
from __future__ import annotations

from struct import Struct
from typing import Iterator, Sequence

from ..capture.model import ORDER_STRIDE, Packet, PacketRef
from ..capture.files.payloads import PayloadReader
from ..capture.files.remote_payloads import BATCH_BYTES

# order, ts_ns, seq, ack, flags, direction, (pad), payload offset, payload length, missing
HEADER = Struct("<qqIIHBxQII")
MAX_PACKETS = 4096              # packets per chunk
MAX_OPEN_PAYLOAD = 64 << 20     # carried payload bytes held in a task's open chunks before all are sent
MAX_OPEN_PACKETS = 1 << 20      # packets held in a task's open chunks before all are sent

_new_tuple = tuple.__new__
_pack = HEADER.pack
_NOTHING: tuple = ()
_REF_FIELDS = len(PacketRef._fields)


class _OpenChunk:
    __slots__ = ("key", "endpoints", "headers", "payloads", "payload_bytes", "count")

    def __init__(self, key: tuple, endpoints: tuple, carried: bool):
        self.key = key
        self.endpoints = endpoints
        self.headers = bytearray()
        self.payloads: list | None = [] if carried else None
        self.payload_bytes = 0
        self.count = 0

    def row(self) -> tuple:
        payloads = None if self.payloads is None else b"".join(self.payloads)
        return self.key, (self.endpoints, bytes(self.headers), payloads)


class ChunkPacker:
    """Packs one task's packets into chunk rows. ``add`` returns the rows completed by a packet (most
    often none); ``finish`` the rest. Memory is bounded: a chunk is sent at ``MAX_PACKETS`` packets,
    and every open chunk once they hold ``MAX_OPEN_PAYLOAD`` carried bytes or ``MAX_OPEN_PACKETS``.
    ``connection_bytes`` sums each connection's payload bytes over everything added."""

    def __init__(self):
        self.connection_bytes: dict[str, int] = {}
        self._open: dict[str, _OpenChunk] = {}
        self._open_payload = 0
        self._open_packets = 0

    def add(self, connection: str, packet: Packet | PacketRef) -> Sequence[tuple]:
        # told apart by their lengths (cheaper than isinstance, per packet), which mypy cannot follow
        if len(packet) == _REF_FIELDS:
            (order, ts_ns, src, sport, dst, dport, seq, ack, flags, offset, length,
             missing) = packet  # type: ignore[misc]
            payload = None
        else:
            order, ts_ns, src, sport, dst, dport, seq, ack, flags, payload, missing = packet  # type: ignore[misc]
        done: Sequence[tuple] = _NOTHING
        chunk = self._open.get(connection)
        if chunk is not None and (chunk.payloads is None) != (payload is None):
            # a task's splits went from a plain file to a gzip one (or back) in the middle of a
            # connection (a rotated series): one chunk's payloads are all in files or all carried
            done = [self._close(connection)]
            chunk = None
        if chunk is None:
            chunk = self._open[connection] = _OpenChunk((connection, order), (src, sport, dst, dport),
                                                        payload is not None)
        payloads = chunk.payloads  # a list when its packets carry their payloads
        if payload is not None and payloads is not None:
            offset, length = chunk.payload_bytes, len(payload)
            payloads.append(payload)
            chunk.payload_bytes += length
            self._open_payload += length
        totals = self.connection_bytes
        totals[connection] = totals.get(connection, 0) + length
        endpoints = chunk.endpoints
        chunk.headers += _pack(order, ts_ns, seq, ack, flags, src != endpoints[0] or sport != endpoints[1],
                               offset, length, missing)
        chunk.count += 1
        self._open_packets += 1
        if self._open_payload >= MAX_OPEN_PAYLOAD or self._open_packets >= MAX_OPEN_PACKETS:
            return [*done, *self.finish()]
        if chunk.count >= MAX_PACKETS:
            return [*done, self._close(connection)]
        return done

    def _close(self, connection: str) -> tuple:
        chunk = self._open.pop(connection)
        self._open_packets -= chunk.count
        self._open_payload -= chunk.payload_bytes
        return chunk.row()

    def finish(self) -> list[tuple]:
        rows = [chunk.row() for chunk in self._open.values()]
        self._open.clear()
        self._open_payload = self._open_packets = 0
        return rows


def unpack_packets(rows, payloads: PayloadReader) -> Iterator[Packet]:
    """The Packets of chunk rows (one connection's, sorted by key), payloads read back or sliced out."""
    read = payloads.read
    for _, (endpoints, headers, carried) in rows:
        src, sport, dst, dport = endpoints
        ways = ((src, sport, dst, dport), (dst, dport, src, sport))
        headers = HEADER.iter_unpack(headers)
        if carried is None:
            for order, ts_ns, seq, ack, flags, direction, offset, length, missing in headers:
                yield _new_tuple(Packet, (order, ts_ns, *ways[direction], seq, ack, flags,
                                          read(order // ORDER_STRIDE, offset, length), missing))
        else:
            for order, ts_ns, seq, ack, flags, direction, offset, length, missing in headers:
                yield _new_tuple(Packet, (order, ts_ns, *ways[direction], seq, ack, flags,
                                          carried[offset:offset + length], missing))


def prefetched(rows, payloads: PayloadReader):
    """Chunk rows as they come, the payloads they leave in remote files asked for ahead, a batch of about
    ``BATCH_BYTES`` at a time (``remote_payloads``): a batch is fetched while the one before is read, and
    dropped once the row after its last has been asked for (its packets have been rebuilt by then).
    Rows of local files only pass through."""
    remote = payloads.remote_files
    if not remote:
        yield from rows
        return
    pending: list[tuple[list, object]] = []
    batch_rows: list[tuple] = []
    wanted: dict[int, list[tuple[int, int]]] = {}
    wanted_bytes = 0
    for row in rows:
        headers, carried = row[1][1], row[1][2]
        if carried is None:
            for order, _, _, _, _, _, offset, length, _ in HEADER.iter_unpack(headers):
                file_index = order // ORDER_STRIDE
                if length and file_index in remote:
                    wanted.setdefault(file_index, []).append((offset, length))
                    wanted_bytes += length
        batch_rows.append(row)
        if wanted_bytes >= BATCH_BYTES:
            pending.append((batch_rows, payloads.remote.fetch(wanted)))
            batch_rows, wanted, wanted_bytes = [], {}, 0
            if len(pending) > 1:
                yield from _read_out(*pending.pop(0), payloads)
    pending.append((batch_rows, payloads.remote.fetch(wanted)))
    for batch_rows, batch in pending:
        yield from _read_out(batch_rows, batch, payloads)


def _read_out(rows: list, batch, payloads: PayloadReader):
    yield from rows
    payloads.remote.drop(batch)
