"""Helpers for tests of the broker's partition logs: a settable clock, batches built with
kafkawire.records, and a PartitionLog opened with a LogConfig of keyword arguments."""
from __future__ import annotations

from kafkawire.broker.storage.config import LogConfig
from kafkawire.broker.storage.log import PartitionLog
from kafkawire.records import Codec, RecordBatchBuilder

NOW = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = NOW):
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(values=(b"v",), *, timestamp: int | None = NOW, timestamps=None, compression=Codec.NONE, producer_id=-1,
          producer_epoch=-1, base_sequence=-1, key: bytes | None = None, **options) -> bytes:
    builder = RecordBatchBuilder(compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                                 base_sequence=base_sequence, **options)
    for i, value in enumerate(values):
        builder.append(value, key=key, timestamp=timestamps[i] if timestamps is not None else timestamp)
    return builder.build()


def open_log(path, **config) -> PartitionLog:
    clock = config.pop("clock", None) or Clock()
    remote = config.pop("remote", None)
    return PartitionLog(path, LogConfig(**config), remote=remote, now_ms=clock)
