"""What the storage layer raises: append refusals with Kafka's error code, and out-of-range reads."""
from __future__ import annotations

from ...error_codes import ErrorCode

__all__ = ["LogAppendError", "OffsetOutOfRange", "OffsetInRemoteTier", "RecordError"]

RecordError = tuple[int, str]  # (batch index, message), ProduceResponse's RecordErrors (v8+)


class LogAppendError(Exception):
    """An append refused, with the code Kafka answers (nothing was appended).

    ``record_errors`` lists per-record problems (``ProduceResponse.RecordErrors``), when there are any.
    """

    def __init__(self, error_code: ErrorCode, message: str, record_errors: list[RecordError] | None = None):
        super().__init__(f"{error_code.name}: {message}")
        self.error_code = error_code
        self.message = message
        self.record_errors = record_errors or []


class OffsetOutOfRange(Exception):
    """A read below the log start offset or beyond the log end offset (OFFSET_OUT_OF_RANGE, 1)."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, message: str | None = None):
        super().__init__(message or f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class OffsetInRemoteTier(OffsetOutOfRange):
    """A read of an offset that lives only in the remote tier (log start <= offset < local log start):
    the caller takes the remote path (``PartitionLog.read_remote``), as ReplicaManager does."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int, local_log_start_offset: int):
        super().__init__(offset, log_start_offset, log_end_offset,
                         f"offset {offset} is in the remote tier [{log_start_offset}, {local_log_start_offset})")
        self.local_log_start_offset = local_log_start_offset
