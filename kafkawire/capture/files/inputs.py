"""The capture files a run names: paths, folders and globs, expanded and put in capture order.

``expand_inputs`` is what ``kafkawire decode`` does with its arguments: folders are searched, globs
expanded, files that do not start like a capture left out (unless named outright), and the rest sorted
by their first packet's time, which puts tcpdump's rotated series in capture order.
"""
from __future__ import annotations

import glob
import gzip
import os
import re
import zlib

from ...pcap.layouts import PCAPNG_ENHANCED_PACKET_TYPE, PCAPNG_INTERFACE_DESCRIPTION_TYPE, PCAPNG_PACKET_TYPE
from .pcap_reader import PCAP_HEADER_SIZE, PCAP_RECORD_SIZE, PcapFacts
from .pcapng_reader import EPB_SIZE, IDB_SIZE, MIN_BLOCK, PB_SIZE, TRAILER_SIZE, Section, block_at
from .remote_files import display_name, expand_remote, is_remote, local_path, open_binary
from .reading import WALK_CORRUPT, WALK_DONE, WALK_INCOMPLETE, NotACaptureError, format_of, kind_of_file

__all__ = ["expand_inputs", "first_timestamp_ns", "is_capture"]


def is_capture(path) -> bool:
    """Whether ``path`` starts like a capture: a pcap or pcapng magic, or gzip around one."""
    try:
        with open_binary(path) as file:
            kind = format_of(file.read(4))
            if kind != "gzip":
                return kind is not None
            file.seek(0)
            with gzip.GzipFile(fileobj=file, mode="rb") as stream:
                return format_of(stream.read(4)) in ("pcap", "pcapng")
    except (OSError, EOFError, zlib.error):
        return False


def _read_exactly(stream, count: int) -> bytes | None:
    data = stream.read(count)
    return data if len(data) == count else None


_FIRST_TIMESTAMP_BLOCKS = 4096  # blocks looked at before giving up on finding a pcapng packet


def first_timestamp_ns(path) -> int | None:
    """The time of the first packet record in a capture (None if it has none), reading only its head."""
    path = os.fspath(path)
    with open_binary(path) as file:
        path = display_name(path)
        kind = kind_of_file(file, path)
        if kind is None:
            return None
        file.seek(0)
        try:
            if kind == "gzip":
                with gzip.GzipFile(fileobj=file, mode="rb") as stream:
                    return _first_timestamp(stream, path)
            return _first_timestamp(file, path)
        except (EOFError, zlib.error, gzip.BadGzipFile):
            return None


def _first_timestamp(stream, path: str) -> int | None:
    magic = _read_exactly(stream, 4)
    if magic is None:
        return None
    kind = format_of(magic)
    if kind == "pcap":
        rest = _read_exactly(stream, PCAP_HEADER_SIZE - 4 + PCAP_RECORD_SIZE)
        if rest is None:
            return None
        head = magic + rest
        return PcapFacts.from_header(head, path).timestamp_at(head, PCAP_HEADER_SIZE)
    if kind != "pcapng":
        raise NotACaptureError(path, magic, " (inside gzip)")
    section = Section()
    block_head = magic
    for _ in range(_FIRST_TIMESTAMP_BLOCKS):
        rest = _read_exactly(stream, MIN_BLOCK - len(block_head))
        if rest is None:
            return None
        block = block_head + rest
        block_type, length, ended = block_at(block, 0, len(block), section)
        if ended == WALK_CORRUPT:
            return None
        if ended == WALK_INCOMPLETE:
            rest = _read_exactly(stream, length - len(block))
            if rest is None:
                return None
            block += rest
            block_type, length, ended = block_at(block, 0, len(block), section)
            if ended != WALK_DONE:
                return None
        if block_type == PCAPNG_INTERFACE_DESCRIPTION_TYPE and length >= IDB_SIZE + TRAILER_SIZE:
            section.add_interface(block, 0, length)
        elif (block_type == PCAPNG_ENHANCED_PACKET_TYPE and length >= EPB_SIZE + TRAILER_SIZE
              or block_type == PCAPNG_PACKET_TYPE and length >= PB_SIZE + TRAILER_SIZE):
            ts = section.timestamp_at(block, 0)
            if ts is not None:
                return ts
        block_head = b""
    return None


def _natural(path: str) -> list:
    """``cap2`` before ``cap10``: digit runs compare as numbers."""
    return [int(part) if index % 2 else part for index, part in enumerate(re.split(r"(\d+)", path))]


def _captures_under(folder: str) -> list[str]:
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found.extend(path for path in (os.path.join(root, name) for name in sorted(files))
                     if os.path.isfile(path) and is_capture(path))
    return found


def _expand_remote(pattern: str) -> list[str]:
    """``expand_inputs``' rules for a URI, on its file system (pyarrow's listing and glob matching)."""
    how, uris = expand_remote(pattern)
    if how == "missing":
        raise FileNotFoundError(f"{display_name(pattern)}: no such file or folder, and no files match it")
    if how == "glob" and not uris:
        raise FileNotFoundError(f"{display_name(pattern)}: no such file or folder, and no files match it")
    uris = uris or []  # None only when missing
    return uris if how == "file" else [uri for uri in uris if is_capture(uri)]


def expand_inputs(patterns) -> list[str]:
    """Capture files named by ``patterns`` (a path, a folder or a glob, or a list of them), in capture order.

    Folders are searched recursively, and folders and globs keep only files that start like a capture
    (``is_capture``); a file named outright is kept whatever it is, so a wrong one fails loudly
    (``NotACaptureError``). The order is (first packet's time, name with numbers compared as numbers),
    which puts tcpdump's rotated series (``-C``: name, name1, name2...; ``-G``: strftime names) in
    capture order; files without packets go last.
    """
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    found: dict[str, None] = {}
    for pattern in patterns:
        pattern = local_path(os.fspath(pattern))
        if is_remote(pattern):
            found.update(dict.fromkeys(_expand_remote(pattern)))
        elif os.path.isdir(pattern):
            found.update(dict.fromkeys(_captures_under(pattern)))
        elif os.path.isfile(pattern):
            found[pattern] = None
        else:
            matches = sorted(glob.glob(pattern, recursive=True))
            if not matches:
                raise FileNotFoundError(f"{pattern}: no such file or folder, and no files match it")
            for match in matches:
                if os.path.isdir(match):
                    found.update(dict.fromkeys(_captures_under(match)))
                elif is_capture(match):
                    found[match] = None
    unique: dict[str, str] = {}
    for path in found:
        unique.setdefault(path if is_remote(path) else os.path.realpath(path), path)

    def capture_order(path: str):
        ts = first_timestamp_ns(path)
        return (0, ts, _natural(path)) if ts is not None else (1, 0, _natural(path))

    return sorted(unique.values(), key=capture_order)
