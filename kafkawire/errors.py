"""The errors kafkawire raises. All are ValueErrors, so callers can catch bad input in one place."""
from __future__ import annotations


class KafkaWireError(ValueError):
    """Base class of kafkawire's errors."""


class DecodeError(KafkaWireError):
    """Bytes that do not decode: names the field path and the byte offset where decoding failed.

    ``path`` is a list of segments, e.g. ``["FetchResponse", "responses[3]", "partitions[0]", "records"]``;
    ``offset`` counts from the start of the buffer given to the decoder (None when unknown).
    """

    def __init__(self, reason: str, offset: int | None = None, path: list[str] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.offset = offset
        self.path = path if path is not None else []

    @property
    def field_path(self) -> str:
        return ".".join(self.path)

    def __str__(self) -> str:
        where = f" at byte {self.offset}" if self.offset is not None else ""
        if self.path:
            return f"{self.field_path}: {self.reason}{where}"
        return f"{self.reason}{where}"


class EncodeError(KafkaWireError):
    """A message that cannot be written: a value of the wrong type or range, with its field path."""

    def __init__(self, reason: str, path: list[str] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.path = path if path is not None else []

    @property
    def field_path(self) -> str:
        return ".".join(self.path)

    def __str__(self) -> str:
        return f"{self.field_path}: {self.reason}" if self.path else self.reason


class UnsupportedVersionError(EncodeError):
    """Writing a version the message lacks, or a field the version cannot carry (as upstream refuses)."""


class RecordsError(DecodeError):
    """A ``records`` blob that does not read: a wrong length, a negative count, a varint that overflows,
    a control record that is too short. ``offset`` is the byte position in the blob given to the
    reader; ``base_offset`` is the Kafka offset of the batch (or legacy message) it happened in."""

    def __init__(self, reason: str, offset: int | None = None, base_offset: int | None = None,
                 path: list[str] | None = None):
        super().__init__(reason, offset, path)
        self.base_offset = base_offset

    def __str__(self) -> str:
        text = super().__str__()
        return f"batch at offset {self.base_offset}: {text}" if self.base_offset is not None else text


class CorruptRecordError(RecordsError):
    """A batch or legacy message whose stored CRC does not match its bytes."""


class CompressionError(RecordsError):
    """Compressed data that does not decompress (truncated, garbage, an unknown codec)."""


class DecompressionLimitError(CompressionError):
    """Compressed data that would expand beyond the configured limit (64 MiB per batch by default)."""
