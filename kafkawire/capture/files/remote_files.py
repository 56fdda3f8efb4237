"""Captures behind a URI (``s3://``, ``gs://``, ``abfs://``, ``hdfs://``...): pyarrow's file systems,
read by byte ranges.

A remote capture is named by its URI, file-system options in its query as ``--fs-option`` puts them
(``s3://bucket/caps/a.pcap?endpoint_override=host:9000&scheme=http``), so that the name alone opens it
in any process (planner, Spark workers); credentials come from the environment, where pyarrow looks.
Messages and tables name it without the query (``display_name``). ``file://`` URIs are local paths, read
as local files are (mmap).

Every read is a ``RemoteFile.read_at`` of a range, one request each: ``open_binary`` gives a buffered
file object for reading a head, ``blocks`` reads a range ahead in large blocks on a background thread
(the planning walk, stage 1, gzip streams), and ``remote_payloads`` reads stage 2's coalesced payload
ranges concurrently. Listing folders and matching globs (``expand_remote``) is the file system's.
"""
from __future__ import annotations

import functools
import io
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote, urlsplit

__all__ = ["is_remote", "local_path", "with_fs_options", "display_name", "with_query", "file_size", "open_binary",
           "blocks", "expand_remote", "RemoteFile", "BLOCK_BYTES", "FETCH_THREADS"]

BLOCK_BYTES = 8 << 20     # a walk's read-ahead: a request's latency is worth megabytes of transfer
READ_AHEAD = 3            # blocks requested ahead of the one being walked, at once
FETCH_THREADS = 8         # concurrent range requests of stage 2 (remote_payloads)
_GLOB = re.compile(r"[*?\[]")


def is_remote(path) -> bool:
    """Whether ``path`` is a URI to read through pyarrow's file systems (``file://`` is not)."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def local_path(path):
    """A ``file://`` URI as the local path it names; anything else as it is."""
    if isinstance(path, str) and path.startswith("file://"):
        return unquote(urlsplit(path).path)
    return path


def with_fs_options(captures, options) -> list[str]:
    """The captures that are URIs with the file-system ``options`` (``--fs-option``) in their query, as
    ``table_sets.with_options`` adds them; local paths (and ``file://`` URIs) as they are."""
    from ..tables.table_sets import with_options

    return [with_options(capture, options) if is_remote(capture) else capture for capture in captures]


def display_name(path: str) -> str:
    """A remote capture's URI without its query (its file-system options); a local path as it is."""
    return path.split("?", 1)[0] if is_remote(path) else path


def with_query(uri: str, query: str) -> str:
    return f"{uri}?{query}" if query else uri


@functools.lru_cache(maxsize=4096)
def _resolve(uri: str):
    from pyarrow import fs

    return fs.FileSystem.from_uri(uri)


class RemoteFile:
    """A remote capture opened for ranged reads: ``size`` and ``read_at``, one request each."""

    def __init__(self, uri: str):
        self.uri, self.name = uri, display_name(uri)
        filesystem, path = _resolve(uri)
        self._file = filesystem.open_input_file(path)
        self.size = self._file.size()

    def read_at(self, offset: int, length: int) -> bytes:
        length = max(0, min(length, self.size - offset))
        if not length:
            return b""
        return self._file.read_at(length, offset)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "RemoteFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def file_size(path) -> int:
    """The size of a capture, local or remote."""
    import os

    if is_remote(path):
        filesystem, where = _resolve(path)
        return filesystem.get_file_info(where).size
    return os.path.getsize(local_path(path))


class _RangedRaw(io.RawIOBase):
    """A remote file as a raw stream whose reads are ranged reads (wrapped in a BufferedReader)."""

    def __init__(self, remote: RemoteFile):
        self.remote, self.pos = remote, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.remote.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def tell(self) -> int:
        return self.pos

    def readinto(self, buffer) -> int:
        data = self.remote.read_at(self.pos, len(buffer))
        buffer[:len(data)] = data
        self.pos += len(data)
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self.remote.close()
        super().close()


def open_binary(path, buffer_bytes: int = 16 << 10):
    """``open(path, "rb")`` for a local path or a URI; a remote file's reads are ranged reads of at least
    ``buffer_bytes`` (a head: the default; a gzip stream: a block)."""
    if is_remote(path):
        return io.BufferedReader(_RangedRaw(RemoteFile(path)), buffer_bytes)
    return open(local_path(path), "rb")


def blocks(remote: RemoteFile, start: int, end: int | None = None, block: int | None = None) -> Iterator[bytes]:
    """The bytes of ``remote`` from ``start`` to ``end`` (None: its end) in blocks of ``block`` bytes
    (``BLOCK_BYTES``), the next ``READ_AHEAD`` requested while one is walked (read_at releases the GIL)."""
    block = block or BLOCK_BYTES
    end = remote.size if end is None else min(end, remote.size)
    offsets = iter(range(start, end, block))
    with ThreadPoolExecutor(READ_AHEAD, thread_name_prefix="capture-read-ahead") as pool:
        pending = []
        for offset in offsets:
            pending.append(pool.submit(remote.read_at, offset, min(block, end - offset)))
            if len(pending) > READ_AHEAD:
                break
        while pending:
            data = pending.pop(0).result()
            following = next(offsets, None)
            if following is not None:
                pending.append(pool.submit(remote.read_at, following, min(block, end - following)))
            yield data


def _pattern_regex(pattern: str) -> re.Pattern:
    """A glob as a regular expression over '/'-separated paths: ``*`` and ``?`` stay within a name,
    ``**`` crosses folders, ``[...]`` is a class."""
    out, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and "]" in pattern[index + 2:]:
            close = pattern.index("]", index + 2)
            inside = pattern[index + 1:close]
            out.append("[" + ("^" + inside[1:] if inside.startswith("!") else inside) + "]")
            index = close + 1
            continue
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out) + r"\Z")


def expand_remote(pattern: str) -> tuple[str, list[str] | None]:
    """What a remote ``pattern`` names: ("file", [uri]) for a file, ("folder", uris of every file under
    it) for a folder (a prefix with objects under it), ("glob", uris of the files that match it or are
    in a folder that does), each list sorted and each URI with the pattern's query; ("missing", None)
    if it names nothing."""
    from pyarrow.fs import FileType

    base, _, query = pattern.partition("?")
    if not _GLOB.search(base):
        filesystem, where = _resolve(pattern)
        kind = filesystem.get_file_info(where).type
        if kind == FileType.File:
            return "file", [pattern]
        if kind != FileType.Directory:
            return "missing", None
        return "folder", [with_query(uri, query) for uri in _files_under(filesystem, where, base.rstrip("/"))]
    fixed = _GLOB.split(base)[0].rsplit("/", 1)[0]  # the folder before the first wildcard
    filesystem, where = _resolve(with_query(fixed + "/", query))
    if filesystem.get_file_info(where.rstrip("/")).type != FileType.Directory:
        return "glob", []
    matcher = _pattern_regex(base[len(fixed):])

    def matches(uri: str) -> bool:
        rest = uri[len(fixed):]
        return any(matcher.match(rest[:cut]) for cut in [len(rest)] + [m.start() for m in re.finditer("/", rest)])

    return "glob", [with_query(uri, query) for uri in _files_under(filesystem, where, fixed) if matches(uri)]


def _files_under(filesystem, where: str, uri_root: str) -> list[str]:
    """The URIs (``uri_root`` + the path below ``where``) of every file under the folder ``where``, sorted."""
    from pyarrow.fs import FileSelector, FileType

    root = where.rstrip("/")
    found = filesystem.get_file_info(FileSelector(root, recursive=True, allow_not_found=True))
    return sorted(uri_root + info.path[len(root):] for info in found
                  if info.type == FileType.File)
