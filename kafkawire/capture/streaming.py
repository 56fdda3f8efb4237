"""Captures -> frames, problems and connection summaries in capture order, in this process, without Spark.

The capture job shuffles packets by connection so that one task sees each connection whole; here every
connection's reassembler and conversation live side by side instead, and each packet goes to its own
as the files are read, so a frame comes out as soon as the packet that completes it has been read
(what ``kafkawire show`` prints). It is the same pipeline (``packets``, ``tcp_reassembly``,
``kafka_connection``) fed in the same per-connection order, so it gives the same frames and problems.

Memory: each connection holds only what its stages hold (a frame in progress, outstanding requests, the
reassembler's recent segments for its retransmission checks), never the capture. Payloads are not copied:
a plain file's packets carry views of its mapping, whose pages are given back as the reading goes on
(``payloads.release_pages``; a view still held maps its page again from the page cache), so the many
connections alive at once hold views, not copies, of their recent segments. gzip files are read as a
stream (payloads copied out of each decompressed chunk).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

from .kafka.kafka_connection import Conversation, new_conversation
from .model import ConnectionSummary, KafkaFrame, Packet, Problem, connection_key
from .files.packets import iter_packets
from .files.reading import SkippedBytes
from .tcp.tcp_reassembly import TcpReassembler

if TYPE_CHECKING:
    from .tls.key_log import KeyLog
    from .tls.tls_connection import DecryptingConversation

__all__ = ["CaptureStream"]

_CONNECTION_CACHE_LIMIT = 1 << 16
RELEASE_BYTES = 64 << 20  # the mapping's pages read so far are given back every this many bytes


class CaptureStream:
    """Iterates over the ``KafkaFrame``, ``Problem`` and ``ConnectionSummary`` items of capture ``files``
    (read in the order given, as the capture job numbers them), each as soon as the capture shows it;
    at the end, what every connection still holds (as the job does at the end of a connection's packets).

    After (or during) the iteration, ``stats`` has the reader's counts (``packets`` module) and
    ``skipped`` the runs of capture bytes it gave up on (the capture job's problems table lists them).
    """

    def __init__(self, files: list[str], broker_ports: set[int] | None = None, keys: KeyLog | None = None):
        self.files = [os.fspath(path) for path in files]
        self.broker_ports = set(broker_ports) if broker_ports else None
        self.keys = keys  # a tls.key_log.KeyLog: TLS connections with their secrets in it are decrypted
        self.stats: dict[str, int] = {}
        self.skipped: list[SkippedBytes] = []
        self.connections = 0

    def __iter__(self) -> Iterator[KafkaFrame | Problem | ConnectionSummary]:
        # connection -> (reassembler, conversation); found by 4-tuple (the key computed once per 4-tuple)
        live: dict[str, tuple[TcpReassembler, Conversation | DecryptingConversation]] = {}
        by_four: dict[tuple, tuple[TcpReassembler, Conversation | DecryptingConversation]] = {}
        for index, path in enumerate(self.files):
            for packet in self._packets(index, path):
                four = packet[2:6]  # src, sport, dst, dport
                stages = by_four.get(four)
                if stages is None:
                    key = connection_key(*four)
                    stages = live.get(key)
                    if stages is None:
                        stages = live[key] = (TcpReassembler(), new_conversation(key, self.broker_ports, self.keys))
                        self.connections += 1
                    if len(by_four) >= _CONNECTION_CACHE_LIMIT:
                        by_four.clear()
                    by_four[four] = stages
                feed = stages[1].feed
                for event in stages[0].feed(packet):
                    items = feed(event)
                    if items:
                        yield from items
        by_four.clear()
        for reassembler, conversation in live.values():  # as decode_connection ends a connection's packets
            for event in reassembler.finish():
                yield from conversation.feed(event)
            yield from conversation.finish()
        live.clear()

    def _packets(self, index: int, path: str) -> Iterator[Packet]:
        """The file's packets, their payloads views of its mapping (a gzip or remote file's: copies)."""
        packets = iter_packets(path, index, stats=self.stats, skipped=self.skipped, release_every=RELEASE_BYTES,
                               views=True)
        return cast("Iterator[Packet]", packets)  # payloads=True (the default): Packets, no PacketRefs
