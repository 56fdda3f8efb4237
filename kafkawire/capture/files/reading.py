"""What every capture reader shares: the formats by their magic, the errors, and what reading skipped.

Skipped records are counted, not raised: a read adds its counts to a ``stats`` dict (the keys below) and
lists each run of bytes it gave up on as a ``SkippedBytes`` (see ``packets`` for the whole story).
"""
from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from ...errors import KafkaWireError
from ...pcap.layouts import GZIP_MAGIC, PCAP_MAGICS, PCAPNG_SECTION_HEADER_TYPE

_SHB_BYTES = PCAPNG_SECTION_HEADER_TYPE.to_bytes(4, "big")

# Why a packet yielded nothing (the ``stats`` keys).
NOT_IP, NOT_TCP, FRAGMENT, UNKNOWN_LINK = "not_ip", "not_tcp", "ip_fragments", "unknown_link_type"
UNKNOWN_INTERFACE, HEADERS_CUT, MALFORMED = "unknown_interface", "headers_cut", "malformed"
TRUNCATED_TAIL, CORRUPT = "truncated_tail", "corrupt"
# How a walk over records ended.
WALK_DONE, WALK_INCOMPLETE, WALK_CORRUPT = 0, 1, 2


class CaptureError(KafkaWireError):
    """A capture file that cannot be read."""


class NotACaptureError(CaptureError):
    """A file that is not a pcap, pcapng or gzip-compressed capture; names the path and its first bytes."""

    def __init__(self, path: str, magic: bytes, inside: str = ""):
        self.path, self.magic, self.inside = path, bytes(magic), inside
        found = self.magic.hex(" ") if self.magic else "nothing (an empty file)"
        super().__init__(
            f"{path}: not a packet capture{inside}: it starts with {found}; expected a pcap magic "
            f"(a1b2c3d4 or a1b23c4d, either byte order), pcapng's 0a0d0d0a, or gzip's 1f8b")

    def __reduce__(self):  # pickled from the process that plans the splits
        return type(self), (self.path, self.magic, self.inside)


class SkippedBytes(NamedTuple):
    """A run of a capture's bytes that reading gave up on. ``kind`` is ``corrupt`` (a record or block
    header that cannot be right) or ``truncated_tail`` (the last record cut short); ``offset`` is in the
    file, or in the decompressed data of a gzip file; ``length`` is None where the rest of a gzip
    stream was not read (its size is not known)."""
    path: str
    offset: int
    length: int | None
    kind: str
    reason: str


# The problems table's kinds of the runs of capture bytes the reader skipped (SkippedBytes.kind).
CAPTURE_PROBLEMS = {CORRUPT: "corrupt_record", TRUNCATED_TAIL: "truncated_tail"}


class ReadCounts(defaultdict):
    """The counts of one read (``stats`` keys), and the runs of bytes it skipped."""

    def __init__(self):
        super().__init__(int)
        self.skips: list[SkippedBytes] = []

    def skip(self, kind: str, path: str, offset: int, length: int | None, reason: str) -> None:
        self[kind] += 1
        self.skips.append(SkippedBytes(path, offset, length, kind, f"{path}: {reason}"))


def torn_tail(counts: ReadCounts, path: str, offset: int, length: int, where: str = "") -> None:
    """The last record or block, at ``offset``, runs past the end of the data."""
    counts.skip(TRUNCATED_TAIL, path, offset, length,
                f"the last record, at byte {offset}{where}, is cut short ({length} bytes, not read)")


def format_of(magic: bytes) -> str | None:
    """``pcap``, ``pcapng`` or ``gzip`` for a file's first bytes; None for anything else."""
    if bytes(magic[:4]) in PCAP_MAGICS:
        return "pcap"
    if bytes(magic[:4]) == _SHB_BYTES:
        return "pcapng"
    if bytes(magic[:2]) == GZIP_MAGIC:
        return "gzip"
    return None


def kind_of_file(file, path: str) -> str | None:
    """``format_of`` the open ``file``'s first bytes (read from where it is); None for an empty file.
    Raises ``NotACaptureError`` for anything that is not a capture."""
    magic = file.read(4)
    if not magic:
        return None
    kind = format_of(magic)
    if kind is None:
        raise NotACaptureError(path, magic)
    return kind
