"""Where the capture job's tables live: a *table set* is a folder holding one folder per table
(``frames/``, ``fetches/``...), ``bodies/`` (a table per message type: ``bodies/FetchResponse/``...) and
``_summary/``; a *table* is a folder of Parquet files.

``check_out`` says whether ``kafkawire decode --out DIR`` may write a table set there, and
``check_tables`` whether ``kafkawire report DIR`` has one to read; both answer in a line a person can act
on (``TableSetError``) and touch nothing, so the command line calls them before it starts Spark.
"""
from __future__ import annotations

import os
from urllib.parse import quote

from ...errors import KafkaWireError

__all__ = ["TABLE_ORDER", "REPORTED", "BODIES", "FRAME_KEY", "SUMMARY", "STAGING", "TableSetError", "check_out",
           "check_tables", "table_names", "found_in", "file_system"]

TABLE_ORDER = ("frames", "fetches", "produces", "records", "problems", "connections", "share_acquisitions",
               "share_acknowledgements")
REPORTED = ("frames", "fetches", "produces", "problems", "connections")  # every decode writes these (records: --records)
STAGING = "_staging"  # written by earlier versions; removed when found
SUMMARY = "_summary"
BODIES = "bodies"  # a folder of tables, one per message type the capture has (table_schemas.body_table)
# A bodies row's frame in the frames table: these four columns, unique per frame (a connection's
# addresses and ports may be reused, its stream offsets counting from 0 again: the time tells them apart).
FRAME_KEY = ("connection", "direction", "stream_offset", "ts")
OURS = (*TABLE_ORDER, BODIES, STAGING, SUMMARY)
# Files that make a folder a Parquet table (Spark and Hadoop write the underscore ones beside the parts).
_TABLE_FILES = ("_SUCCESS", "_metadata", "_common_metadata")


class TableSetError(KafkaWireError):
    """An ``--out`` that must not be written, or a folder that holds no table set."""


def with_options(location: str, options) -> str:
    """A URI with file-system options (``key=value`` texts: ``endpoint_override=host:port``,
    ``scheme=http``, ``region=...``) added to its query, which pyarrow's ``FileSystem.from_uri`` reads, so
    that the options travel with the location to every worker. Credentials belong in the environment
    (AWS_ACCESS_KEY_ID..., GOOGLE_APPLICATION_CREDENTIALS...), where pyarrow finds them, not here."""
    if not options:
        return location
    if "://" not in location:
        raise ValueError(f"{location}: file-system options need a URI (s3://..., gs://...), not a local path")
    pairs = []
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key:
            raise ValueError(f"{option!r}: a file-system option is key=value")
        pairs.append(f"{quote(key)}={quote(value, safe=':/')}")
    return location + ("&" if "?" in location else "?") + "&".join(pairs)


def file_system(location: str):
    """(pyarrow FileSystem, path on it) for a local path or a URI."""
    from pyarrow import fs

    if "://" in location:
        return fs.FileSystem.from_uri(location)
    return fs.LocalFileSystem(), os.path.abspath(location)


def _kind(fs, path: str):
    from pyarrow.fs import FileType

    kind = fs.get_file_info(path).type
    return None if kind == FileType.NotFound else ("folder" if kind == FileType.Directory else "file")


def found_in(fs, root: str, names=OURS) -> list[str]:
    """Which of ``names`` (a table set's folders) are under ``root``."""
    return [name for name in names if _kind(fs, f"{root}/{name}") is not None]


def is_table(fs, path: str) -> bool:
    """Whether the folder ``path`` is itself a Parquet table: its files are Parquet files (and the
    marker files Spark writes beside them; hidden files aside), at least one, so that readers take
    everything under it as one table. A folder that also holds other files (a home folder with a
    stray .parquet file) is not one."""
    from pyarrow.fs import FileSelector, FileType

    if _kind(fs, path) != "folder":
        return False
    parquet = False
    for info in fs.get_file_info(FileSelector(path, allow_not_found=True)):
        if info.type != FileType.File or info.base_name.startswith("."):
            continue
        if info.base_name.endswith(".parquet"):
            parquet = True
        elif info.base_name not in _TABLE_FILES:
            return False
    return parquet


def table_names(location: str) -> list[str]:
    """The tables of the table set at ``location`` (a local path or a URI): those of ``TABLE_ORDER``
    that are there, in that order, then ``bodies/<message>`` for each message's typed bodies, by name."""
    from pyarrow.fs import FileSelector, FileType

    fs, root = file_system(location)
    root = root.rstrip("/")
    bodies = fs.get_file_info(FileSelector(f"{root}/{BODIES}", allow_not_found=True))
    return found_in(fs, root, TABLE_ORDER) + sorted(
        f"{BODIES}/{info.base_name}" for info in bodies if info.type == FileType.Directory)


def _parent(path: str) -> str:
    parent = path.rstrip("/").rsplit("/", 1)[0]
    return parent if parent != path.rstrip("/") else ""


def check_out(out: str, overwrite: bool) -> None:
    """Raises TableSetError unless a table set may be written at ``out``: not a file, not inside a table
    (nor a folder named like a table of a table set: ``--out tables/frames``), and, unless ``overwrite``,
    not a table set already. Local paths are checked up to the root; a URI's folder and its parent."""
    fs, root = file_system(out)
    root = root.rstrip("/") or "/"
    kind = _kind(fs, root)
    if kind == "file":
        raise TableSetError(f"--out {out} is a file; it must be a folder (new, or one holding a table set)")
    chain: list[str] = []
    path = root
    while path and (len(chain) < 2 or "://" not in out):
        chain.append(path)
        parent = _parent(path)
        if parent == path or not parent:
            break
        path = parent
    for folder in chain:
        parent = _parent(folder)
        name = folder.rsplit("/", 1)[-1]
        if is_table(fs, folder):
            where = "is" if folder == root else f"is inside {folder}, which is"
            raise TableSetError(f"--out {out} {where} a Parquet table: its readers would mix the new tables "
                                f"into it; choose a folder outside it")
        if parent and name in (*TABLE_ORDER, BODIES) and found_in(fs, parent):
            where = "is" if folder == root else f"is inside {folder}, which is"
            kind = "folder" if name == BODIES else "table"
            raise TableSetError(f"--out {out} {where} the {name} {kind} of the tables in {parent}; choose a "
                                f"folder outside it (or {parent} itself, with --overwrite)")
    if kind == "folder" and not overwrite:
        found = found_in(fs, root)
        if found:
            raise TableSetError(f"--out {out} already holds the tables of a decode ({', '.join(found)}); "
                                f"pass --overwrite to replace them all, or choose another folder")


def check_tables(path: str) -> None:
    """Raises TableSetError unless ``path`` holds a table set that ``kafkawire report`` can read."""
    fs, root = file_system(path)
    root = root.rstrip("/") or "/"
    kind = _kind(fs, root)
    if kind is None:
        raise TableSetError(f"{path}: no such folder")
    if kind == "file":
        raise TableSetError(f"{path} is a file; pass the --out folder of `kafkawire decode`")
    found = found_in(fs, root, REPORTED)
    if len(found) == len(REPORTED):
        return
    parent = _parent(root)
    name = root.rsplit("/", 1)[-1]
    if name in (*TABLE_ORDER, BODIES) and parent and found_in(fs, parent, REPORTED):
        raise TableSetError(f"{path} is the {name} table; pass the folder that holds the tables, {parent}")
    if not found:
        raise TableSetError(f"{path} holds no tables of `kafkawire decode` (no {', '.join(REPORTED)} folders)")
    missing = [name for name in REPORTED if name not in found]
    raise TableSetError(f"{path} lacks the {', '.join(missing)} table(s) of `kafkawire decode`")
