"""Cutting a capture file into byte-range splits at exact record offsets, for parallel reading.

``plan_splits`` walks a file's record headers once (pcap: 16-byte headers; pcapng: block to block by
length) and cuts it at exact record offsets, each split carrying the context needed to parse from
there (``Split.context``, plain JSON values). The walk reads headers only, so planning needs no resync
heuristics. A split without ``context["aligned"]`` (cut by someone else, or of a file still being
written) finds its first record itself: pcap with ``find_record_boundary``'s chain rule, pcapng by
walking the blocks from the file start.
"""
from __future__ import annotations

import mmap
import os
from struct import Struct
from typing import NamedTuple

from ...pcap.layouts import LITTLE, offset_of, pcap_record_header
from .payloads import release_pages
from .pcap_reader import PCAP_HEADER_SIZE, PCAP_RECORD_SIZE, PcapFacts
from .pcapng_reader import walk_pcapng
from .reading import kind_of_file
from .remote_files import is_remote, local_path

__all__ = ["Split", "plan_splits", "SPLIT_BYTES"]

SPLIT_BYTES = 128 << 20


class Split(NamedTuple):
    """A byte range of one capture file. Plain values only, so it pickles and round-trips through JSON
    (``Split(*json.loads(json.dumps(split)))``). ``end`` None reads to the end of the file."""
    path: str
    file_index: int
    start: int
    end: int | None
    context: dict | None



def plan_splits(path, file_index: int = 0, split_bytes: int = SPLIT_BYTES) -> list[Split]:
    """Cut a capture into splits of about ``split_bytes`` at exact record offsets, with one walk over its
    record headers (nothing else is read). gzip-compressed files cannot be cut: one split, whole."""
    if split_bytes <= 0:
        raise ValueError(f"split_bytes must be positive, not {split_bytes}")
    path = local_path(os.fspath(path))
    if is_remote(path):
        from .remote_reading import remote_pieces
        return remote_pieces(path, file_index, split_bytes)
    whole = [Split(path, file_index, 0, None, None)]
    with open(path, "rb") as file:
        kind = kind_of_file(file, path)
        if kind is None or kind == "gzip":
            return whole
        size = os.fstat(file.fileno()).st_size
        if size <= split_bytes:
            return [Split(path, file_index, 0, size, None)]
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            if hasattr(mm, "madvise"):
                mm.madvise(mmap.MADV_SEQUENTIAL)
            if kind == "pcap":
                cuts = _pcap_cuts(mm, path, size, split_bytes)
            else:
                cuts = [(0, None)]
                for cut in walk_pcapng(mm, size, split_bytes, split_bytes):
                    cuts.append(cut)
                    release_pages(mm, cut[0])
    ends = [start for start, _ in cuts[1:]] + [size]
    return [Split(path, file_index, start, stop, context) for (start, context), stop in zip(cuts, ends)
            if start < stop]


def _pcap_cuts(buf, path: str, size: int, split_bytes: int) -> list[tuple[int, dict | None]]:
    if size < PCAP_HEADER_SIZE:
        return [(0, None)]
    facts = PcapFacts.from_header(buf, path)
    lengths = Struct(facts.byteorder + "II").unpack_from  # incl_len, orig_len
    lengths_at = offset_of(pcap_record_header(LITTLE), "incl_len")
    max_incl = facts.max_incl
    starts = [0]
    pos, last, cut = PCAP_HEADER_SIZE, None, split_bytes
    while pos + PCAP_RECORD_SIZE <= size:
        if pos >= cut:
            starts.append(pos)
            cut = pos + split_bytes
            release_pages(buf, pos)
        incl, orig = lengths(buf, pos + lengths_at)
        if incl > max_incl or not (incl or orig):
            break  # corrupt (as pcap_reader.pcap_records sees it): the last split resyncs past it, as a whole read does
        last = pos
        pos += PCAP_RECORD_SIZE + incl
    if last is not None:
        facts.ts_window = [facts.timestamp_at(buf, PCAP_HEADER_SIZE), facts.timestamp_at(buf, last)]
    context = facts.context(True)
    return [(start, context) for start in starts]

