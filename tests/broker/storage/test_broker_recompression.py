"""compression.type on the append path (``LogValidator``'s compressed path): a batch in another codec than
the topic's is stored with the same records, offsets, timestamps and producer fields in the topic's
codec, at its compression.<codec>.level; the rewritten batch's CRC holds, with LogAppendTime too; a
batch that outgrows max.message.bytes once recompressed is MESSAGE_TOO_LARGE; ``producer`` keeps it."""
from __future__ import annotations

import time

import pytest

from kafkawire.broker.storage.config import LogConfig
from kafkawire.broker.storage.errors import LogAppendError
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.error_codes import ErrorCode
from kafkawire.records import Codec, iter_batches
from kafkawire.records.builder import RecordBatchBuilder


def _batch(codec: Codec, count: int = 50, producer_id: int = -1) -> bytes:
    builder = RecordBatchBuilder(compression=codec, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=0 if producer_id >= 0 else -1)
    for i in range(count):
        builder.append(b"value %d " % i * 30, key=b"k%d" % i, headers=[("h", b"%d" % i)], timestamp=1_000 + i)
    return builder.build()


def _records(batch):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


@pytest.mark.parametrize("source", list(Codec))
@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_a_batch_is_stored_in_the_topics_codec_with_the_same_records(tmp_path, source, target):
    log = PartitionLog(tmp_path / f"t-{source.name}-{target}-0", LogConfig(compression_type=target))
    raw = _batch(source, producer_id=7)
    log.append(raw, now_ms=10_000)
    assert log.append(raw, now_ms=10_000).base_offset == 0  # a retry is a duplicate, as before
    (stored,) = list(iter_batches(log.read(0, 1 << 20, True).records))  # CRCs checked
    (sent,) = list(iter_batches(raw))
    assert int(stored.compression) == {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[target]
    assert _records(stored) == _records(sent)
    assert (stored.producer_id, stored.producer_epoch, stored.base_sequence) == (7, 0, 0)
    assert stored.max_timestamp == sent.max_timestamp
    log.close()


def test_producer_keeps_the_batch_as_sent(tmp_path):
    log = PartitionLog(tmp_path / "p-0", LogConfig())
    raw = _batch(Codec.LZ4)
    log.append(raw, now_ms=10_000)
    stored = log.read(0, 1 << 20, True).records
    assert bytes(stored)[16:] == raw[16:]  # all but the base offset and the partition leader epoch
    log.close()


def test_log_append_time_and_recompression_together(tmp_path):
    log = PartitionLog(tmp_path / "lat-0", LogConfig(compression_type="zstd", message_timestamp_type="LogAppendTime"))
    now = int(time.time() * 1000)
    result = log.append(_batch(Codec.NONE), now_ms=now)
    assert result.log_append_time == now
    (stored,) = list(iter_batches(log.read(0, 1 << 20, True).records))
    assert int(stored.compression) == 4 and stored.max_timestamp == now
    assert stored.timestamp_type.name == "LOG_APPEND_TIME"
    log.close()


def test_the_codecs_level_is_used():
    from kafkawire.broker.storage.validation import validate_produce_records
    raw = _batch(Codec.NONE, count=400)
    sizes = {level: validate_produce_records(raw, LogConfig(compression_type="gzip", compression_gzip_level=level),
                                             10_000).size for level in (1, 9)}
    assert sizes[9] < sizes[1]


def test_a_batch_too_large_once_recompressed_is_refused(tmp_path):
    builder = RecordBatchBuilder(compression=Codec.ZSTD)
    for _ in range(100):
        builder.append(b"x" * 1000)
    raw = builder.build()
    assert len(raw) < 4000
    log = PartitionLog(tmp_path / "big-0", LogConfig(compression_type="uncompressed", max_message_bytes=4000))
    with pytest.raises(LogAppendError) as refused:
        log.append(raw, now_ms=10_000)
    assert refused.value.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert log.log_end_offset == 0
    log.close()
