"""Fuzzing the records reader: random and mutated blobs of every magic and codec raise only the
documented errors (RecordsError and its subclasses), and a small blob never expands past the limit."""
from __future__ import annotations

import random
import struct
import tracemalloc

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase

from kafkawire.errors import DecompressionLimitError, RecordsError
from kafkawire.records import (
    Codec, LegacyMessageSetBuilder, RecordBatch, RecordBatchBuilder, control_record, iter_batches,
)

LIMIT = 256 * 1024  # decompressed bytes allowed per batch while fuzzing


def _read_everything(blob: bytes, verify_crc: bool) -> None:
    """Everything a consumer would do with a blob; only RecordsError may escape."""
    for batch in iter_batches(blob, verify_crc=verify_crc, decompressed_limit=LIMIT):
        repr(batch)
        records = batch.records()
        for record in records:
            repr(record)
            if batch.is_control:
                control_record(record)
        if isinstance(batch, RecordBatch):
            columns = batch.columns()
            assert len(columns) == len(records) == batch.count


def _samples() -> list[bytes]:
    rng = random.Random(7)
    samples = []
    for codec in Codec:
        builder = RecordBatchBuilder(base_offset=rng.randrange(1 << 40), compression=codec, producer_id=5,
                                     base_sequence=3)
        for i in range(rng.randrange(1, 6)):
            builder.append(rng.randbytes(rng.randrange(0, 200)), key=rng.choice([None, b"key"]),
                           headers=[("h", rng.randbytes(3))] if i % 2 else (), timestamp=rng.randrange(1 << 41))
        samples.append(builder.build())
    for magic in (0, 1):
        for codec in (Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4):
            builder = LegacyMessageSetBuilder(magic, base_offset=100, compression=codec)
            for _ in range(3):
                builder.append(rng.randbytes(50), key=b"k", timestamp=1000)
            samples.append(builder.build())
    control = RecordBatchBuilder(control=True, transactional=True)
    control.append(b"\x00\x00\x00\x00\x00\x05", key=b"\x00\x00\x00\x01", timestamp=1)
    samples.append(control.build())
    return samples


SAMPLES = _samples()


def _fix_crc(blob: bytearray) -> bytearray:
    """Recompute a magic-2 batch's CRC so a mutation reaches the record reader."""
    if len(blob) >= 61 and blob[16] == 2:
        struct.pack_into(">I", blob, 17, crc32c(bytes(blob[21:])))
    return blob


@settings(max_examples=400, deadline=None, database=InMemoryExampleDatabase(),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sample=st.sampled_from(SAMPLES), flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)),
                                                     min_size=1, max_size=4),
       fix_crc=st.booleans(), verify=st.booleans())
def test_mutated_batches_raise_only_records_errors(sample, flips, fix_crc, verify):
    blob = bytearray(sample)
    for position, value in flips:
        blob[position % len(blob)] = value
    if fix_crc:
        _fix_crc(blob)
    try:
        _read_everything(bytes(blob), verify)
    except RecordsError:
        pass


@settings(max_examples=300, deadline=None, database=InMemoryExampleDatabase())
@given(blob=st.binary(max_size=400))
def test_random_bytes_raise_only_records_errors(blob):
    try:
        _read_everything(blob, False)
    except RecordsError:
        pass


@settings(max_examples=200, deadline=None, database=InMemoryExampleDatabase())
@given(sample=st.sampled_from(SAMPLES), cut=st.integers(0, 1 << 20))
def test_truncated_length_fields_raise_only_records_errors(sample, cut):
    # Shrink the declared batch length so the records end early, and fix the CRC: the record reader
    # then meets records that run past the end, or compressed data that stops short.
    blob = bytearray(sample)
    keep = 61 + cut % max(1, len(blob) - 61)
    del blob[keep:]
    if blob[16] == 2:
        struct.pack_into(">i", blob, 8, len(blob) - 12)
        _fix_crc(blob)
    try:
        _read_everything(bytes(blob), True)
    except RecordsError:
        pass


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_a_small_batch_cannot_expand_into_gigabytes(codec):
    builder = RecordBatchBuilder(compression=codec)
    for _ in range(64):
        builder.append(b"\x00" * (1 << 20), timestamp=0)  # 64 MiB of zeros
    blob = builder.build()
    assert len(blob) < 4 << 20
    (batch,) = iter_batches(blob, decompressed_limit=LIMIT)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError):
            batch.records()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * LIMIT, peak  # what Python sees; the libraries' own buffers are bounded too
