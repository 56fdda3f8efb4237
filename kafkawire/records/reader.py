"""Reading a ``records`` blob: the batches it holds, lazily, over zero-copy views.

A blob is a plain concatenation of entries, each a magic-2 batch or a legacy message; the magic byte
sits at the same place in all of them. A trailing entry shorter than its declared size is not an
error: fetch responses routinely end with one, and Kafka's own iterator stops there too.
"""
from __future__ import annotations

from collections.abc import Iterator
from struct import Struct

from ..errors import RecordsError
from .batch import RecordBatch
from .compression import DEFAULT_DECOMPRESSED_LIMIT, Buffer
from .layouts import LOG_OVERHEAD, MAGIC_OFFSET
from .legacy import LegacyBatch
from .record import Record

__all__ = ["iter_batches", "read_batches", "iter_records", "MAX_DECOMPRESSED_LIMIT"]

_PREFIX = Struct(">qi")
# The smallest entry after the log prefix: a legacy v0 message with null key and value.
_MIN_ENTRY_SIZE = 14
# Column positions are int32, and Kafka's own buffers are limited to 2 GiB.
MAX_DECOMPRESSED_LIMIT = 0x7FFFFFFF


def iter_batches(blob: Buffer, *, verify_crc: bool = True, decompressed_limit: int = DEFAULT_DECOMPRESSED_LIMIT
                 ) -> Iterator[RecordBatch | LegacyBatch]:
    """The batches (magic 2) and legacy messages (magic 0/1) in ``blob``, in order.

    Each is a view of ``blob``'s bytes (nothing is copied); CRCs are checked as each one is reached
    unless ``verify_crc`` is false. ``decompressed_limit`` bounds what one batch may expand to.
    """
    if not 0 < decompressed_limit <= MAX_DECOMPRESSED_LIMIT:
        raise ValueError(f"decompressed_limit must be between 1 and {MAX_DECOMPRESSED_LIMIT}")
    view = blob if isinstance(blob, memoryview) else memoryview(blob)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    pos = 0
    total = len(view)
    while total - pos >= LOG_OVERHEAD:
        base_offset, size = _PREFIX.unpack_from(view, pos)
        if size < _MIN_ENTRY_SIZE:
            raise RecordsError(f"entry size {size} is smaller than the smallest message ({_MIN_ENTRY_SIZE})",
                               pos + 8, base_offset)
        end = pos + LOG_OVERHEAD + size
        if end > total:
            return  # a partial trailing entry
        magic = view[pos + MAGIC_OFFSET]
        entry = view[pos:end]
        batch: RecordBatch | LegacyBatch
        if magic == 2:
            batch = RecordBatch(entry, pos, decompressed_limit)
        elif magic in (0, 1):
            batch = LegacyBatch(entry, pos, decompressed_limit)
        else:
            raise RecordsError(f"unknown magic {magic}", pos + MAGIC_OFFSET, base_offset)
        if verify_crc:
            batch.verify()
        yield batch
        pos = end


def read_batches(blob: Buffer, *, verify_crc: bool = True,
                 decompressed_limit: int = DEFAULT_DECOMPRESSED_LIMIT) -> list[RecordBatch | LegacyBatch]:
    """``iter_batches`` as a list."""
    return list(iter_batches(blob, verify_crc=verify_crc, decompressed_limit=decompressed_limit))


def iter_records(blob: Buffer, *, include_control: bool = False, verify_crc: bool = True,
                 decompressed_limit: int = DEFAULT_DECOMPRESSED_LIMIT) -> Iterator[Record]:
    """Every record in ``blob``, in offset order, skipping control records unless asked for them
    (consumers never surface them)."""
    for batch in iter_batches(blob, verify_crc=verify_crc, decompressed_limit=decompressed_limit):
        if batch.is_control and not include_control:
            continue
        if isinstance(batch, LegacyBatch):
            yield from batch.records(verify_crc)
        else:
            yield from batch.records()
