"""Capture files -> ``Packet``: the TCP segments of pcap and pcapng files, whole or by byte-range split.

``iter_packets(path, file_index, start, end, context)`` yields the TCP packets whose record (pcap) or
block (pcapng) starts in ``[start, end)``, reading past ``end`` to finish the last one, as Hadoop's
readers do. Plain files are mmap-ed; gzip-compressed captures (magic 1f8b, whatever the name) are read
as a stream, whole: a split of one with ``start > 0`` yields nothing, so any byte-range cutting of a
gzip file still reads it exactly once.

The formats have a module each (``pcap_reader``, ``pcapng_reader``), and so do a frame's link, IP and
TCP headers (``packet_headers``); ``splits`` cuts files into splits, ``inputs`` expands what a run
names into files, ``payloads`` reads back payloads left in their files.

With ``payloads=False`` a plain file yields ``PacketRef`` instead of ``Packet``: the payload's file offset
and length (the record's data offset plus the link, IP and TCP header lengths, known while parsing, so
free), for ``PayloadReader`` to read back later. The capture job carries these between its stages
instead of the bytes. With ``views=True`` a plain file's Packets carry memoryviews of its mapping
instead of copies (``kafkawire show`` reads this way: no byte is copied until a frame is joined).

Skipped records are counted, not raised: pass a dict as ``stats`` and the counts are added to it
(keys below; the dict can be shared by several calls). Where reading skipped a run of bytes (a corrupt
header, a torn tail), pass a list as ``skipped`` to get a ``SkippedBytes`` for each: where, how many
bytes and why, so that the capture job can list them. ``records`` counts the packet records whose
frame was looked at, ``packets`` the TCP packets yielded; every other key is a reason a record gave
no packet, or a reason reading stopped early:

    not_ip            the link layer carries something else (ARP, LLDP, ...)
    not_tcp           IP, but UDP, ICMP, ...
    ip_fragments      a fragment of a fragmented IPv4/IPv6 datagram (not reassembled)
    unknown_link_type a link type this reader does not decode
    unknown_interface a pcapng packet naming an interface no IDB described
    headers_cut       the snap length cut into the IP or TCP header
    malformed         headers that contradict themselves or the record's lengths
    truncated_tail    the last record/block is cut short (a capture killed mid-write)
    corrupt           a record/block header that cannot be right (or zeros where one should be): a plain
                      pcap resyncs after it (``find_record_boundary``), pcapng and gzip streams stop
"""
from __future__ import annotations

import gzip
import mmap
import os
import zlib
from collections.abc import Iterator

from ..model import ORDER_STRIDE, Packet, PacketRef
from .payloads import release_pages
from .pcap_reader import PCAP_HEADER_SIZE, PcapFacts, pcap_records, read_pcap
from .pcapng_reader import Section, pcapng_blocks, read_pcapng
from .reading import (
    CORRUPT, TRUNCATED_TAIL, WALK_CORRUPT, CaptureError, NotACaptureError, ReadCounts, format_of, kind_of_file,
    torn_tail,
)
from .remote_files import is_remote, local_path
from .remote_reading import read_remote
from .splits import Split

__all__ = ["iter_packets", "iter_split", "STREAM_CHUNK"]

STREAM_CHUNK = 1 << 20          # gzip captures are decompressed this much at a time


def iter_packets(path, file_index: int = 0, start: int = 0, end: int | None = None,
                 context: dict | None = None, stats: dict | None = None, *,
                 payloads: bool = True, skipped: list | None = None,
                 release_every: int | None = None, views: bool = False) -> Iterator[Packet | PacketRef]:
    """The TCP packets of the records of capture ``path`` that start in ``[start, end)``, in file order.

    ``Packet.order`` is ``file_index * 2**40`` plus the record's byte offset in the (decompressed) file.
    ``context`` is a ``Split.context`` from ``plan_splits``; without one, a split starting mid-file finds
    its first record itself. Counts of what was skipped are added to ``stats`` (see the module's doc),
    and a ``SkippedBytes`` for each run of bytes skipped is appended to ``skipped``.
    Raises ``NotACaptureError`` for a file that is no capture; an empty file has no packets.

    ``payloads=False`` leaves the payloads in the file: a plain pcap or pcapng file yields ``PacketRef``
    (where its payload is) instead of ``Packet``; a gzip-compressed one, which cannot be read at an
    offset, still yields Packets with their payloads.

    ``release_every`` gives the pages of a plain file's mapping back each time reading has gone that many
    bytes further (``payloads.release_pages``), so that a long read does not keep the file resident.

    ``views=True`` (with ``payloads``) gives a plain file's payloads as memoryviews of its mapping: the
    mapping lives as long as the last of them (pages released as above map again from the page cache).
    """
    counts = ReadCounts()
    try:
        yield from _read(os.fspath(path), file_index * ORDER_STRIDE, start, end, context, counts, not payloads,
                         release_every, views)
    finally:
        if stats is not None:
            for key, value in counts.items():
                if value:
                    stats[key] = stats.get(key, 0) + value
        if skipped is not None:
            skipped.extend(counts.skips)


def iter_split(split: Split, stats: dict | None = None, *, payloads: bool = True,
               skipped: list | None = None) -> Iterator[Packet | PacketRef]:
    """``iter_packets`` over one ``Split``."""
    return iter_packets(split.path, split.file_index, split.start, split.end, split.context, stats,
                        payloads=payloads, skipped=skipped)


def _read(path: str, order_base: int, start: int, end: int | None, context, counts, refs: bool = False,
          release_every: int | None = None, views: bool = False):
    if is_remote(path):  # read by byte ranges, never mapped
        yield from read_remote(path, order_base, start, end, context, counts, refs)
        return
    path = local_path(path)
    with open(path, "rb") as file:
        kind = kind_of_file(file, path)
        if kind is None:
            return
        if kind == "gzip":
            if start > 0:
                return  # not splittable: the split at 0 reads it all
            file.seek(0)
            with gzip.GzipFile(fileobj=file, mode="rb") as stream:
                yield from _read_stream(stream, path, order_base, counts)
            return
        size = os.fstat(file.fileno()).st_size
        stop = size if end is None else min(end, size)
        if start >= stop:
            return
        mm = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    buf = packets = None
    try:
        if hasattr(mm, "madvise"):
            mm.madvise(mmap.MADV_SEQUENTIAL)
        read = read_pcap if kind == "pcap" else read_pcapng
        buf = memoryview(mm) if views and not refs else mm  # slices of a memoryview are views
        packets = read(buf, path, size, start, stop, order_base, context, counts, refs)
        if release_every is None:
            yield from packets
            return
        released = start + release_every
        for packet in packets:
            if packet.order - order_base > released:
                released = packet.order - order_base
                release_pages(mm, released)
                released += release_every
            yield packet
    finally:
        buf = packets = None
        try:
            mm.close()
        except BufferError:  # views still held by the caller: the mapping goes with the last of them
            pass


def _read_stream(stream, path: str, order_base: int, counts):
    """A decompressed capture, chunk by chunk: memory stays at a chunk plus the largest record."""
    torn = False

    def more(wanted: int = STREAM_CHUNK) -> bytes:
        nonlocal torn
        parts, got = [], 0
        while got < wanted and not torn:
            try:
                part = stream.read1(wanted - got)  # one read at a time keeps what precedes a tear
            except EOFError:  # a gzip file cut short, as a killed compressor leaves it
                torn = True
                break
            except (OSError, zlib.error) as error:
                raise CaptureError(f"{path}: corrupt gzip data: {error}") from error
            if not part:
                break
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    inside = " of the decompressed data"
    buf = more()
    if not buf:
        if torn:
            torn_tail(counts, path, 0, 0, inside)
        return
    kind = format_of(buf)
    if kind not in ("pcap", "pcapng"):
        raise NotACaptureError(path, buf[:4], " (inside gzip)")
    while kind == "pcap" and len(buf) < PCAP_HEADER_SIZE:
        chunk = more()
        if not chunk:
            counts.skip(TRUNCATED_TAIL, path, 0, len(buf), f"{len(buf)} bytes{inside}, shorter than a pcap file header")
            return
        buf += chunk
    if kind == "pcap":
        facts = PcapFacts.from_header(buf, path)
        pos = PCAP_HEADER_SIZE
    else:
        section = Section()
        pos = 0
    consumed = 0
    while True:
        # ``buf`` is a chunk of the decompressed file: payloads are copied out (Packets, never PacketRefs).
        if kind == "pcap":
            walk = pcap_records(buf, pos, len(buf), len(buf), order_base + consumed, facts, counts)
        else:
            walk = pcapng_blocks(buf, pos, len(buf), len(buf), order_base + consumed, section, counts)
        pos, ended = yield from walk
        if ended == WALK_CORRUPT:  # a stream is read once, front to back: no resync
            counts.skip(CORRUPT, path, consumed + pos, None,
                        f"a record that cannot be right at byte {consumed + pos}{inside}; the rest was not read")
            return
        # Reading at least as much again as is pending keeps the copying linear for records larger
        # than a chunk.
        chunk = more(max(STREAM_CHUNK, len(buf) - pos))
        if not chunk:
            if pos < len(buf) or torn:
                torn_tail(counts, path, consumed + pos, len(buf) - pos, inside)
            return
        consumed += pos
        buf = buf[pos:] + chunk
        pos = 0
