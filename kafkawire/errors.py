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
