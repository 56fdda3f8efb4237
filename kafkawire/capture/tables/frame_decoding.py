"""What a frame's body decodes to, and what a partition's records blob holds, for the table rows.

Bodies are decoded by ``framing`` (the one frame decoder: requests, and responses at the version they
were read at); record batches by ``records``, their headers only: records are decompressed only for
the records table (``record_table``). SaslAuthenticate bodies come out with their tokens' secrets
taken out (``authentication.redact_body``), so that no table is ever given them.
"""
from __future__ import annotations

from typing import NamedTuple

from kafkawire.codec.base import Message
from kafkawire.errors import DecodeError
from kafkawire.framing import read_request, read_response
from kafkawire.messages import api
from kafkawire.records import LegacyBatch, iter_batches
from kafkawire.records.batch import CODEC_MASK
from kafkawire.records.compression import codec_name
from kafkawire.records.legacy import LEGACY_CODEC_MASK

from ..kafka.authentication import SASL_AUTHENTICATE, redact_body
from ..model import KafkaFrame, Problem

__all__ = ["Decoded", "decode_frame", "decode_problem", "CODEC_NAMES", "api_info", "BlobSummary", "summarize_records"]

CODEC_NAMES = {codec: codec_name(codec).lower() for codec in range(8)}  # ids 5-7: "unknown(N)"


class Decoded(NamedTuple):
    """What became of one frame's body."""
    api_name: str | None
    header_version: int | None
    body: Message | None
    version: int | None   # the version the body was read at (ApiVersions may fall back to 0)
    error: str | None      # why there is no body
    trailing: int = 0      # bytes after the body (read past, as Kafka does; a problem says so)


def decode_frame(frame: KafkaFrame) -> Decoded:
    """Decode a request (``framing.read_request``) or a matched response (``framing.read_response``).
    Bytes after the body do not stop it: Kafka ignores them, and librdkafka 2.16 sends 3 after its
    all-topics MetadataRequest; ``Decoded.trailing`` counts them."""
    info = api_info(frame.api_key)
    name = info.name if info is not None else None
    version = frame.api_version
    if frame.direction == "request":
        if info is not None and version is not None and not info.supports(version):
            # said before the header is read: its version depends on the body's
            return Decoded(name, None, None, None, f"unsupported {info.name} version {version}")
        header_version = info.request_header_version(version) if info is not None else None
        try:
            _, body, trailing = read_request(frame.frame)
        except DecodeError as error:
            return Decoded(name, header_version, None, None, str(error))
        if frame.api_key == SASL_AUTHENTICATE:
            redact_body(body, frame.sasl_mechanism)
        return Decoded(name, header_version, body, version, None, trailing)
    if frame.request is None or frame.api_key is None or version is None:
        return Decoded(name, None, None, None, None)  # unmatched: not decoded (a Problem says so)
    if info is None:
        return Decoded(None, None, None, None, f"unknown API key {frame.api_key}")
    if not info.supports(version):
        return Decoded(name, None, None, None, f"unsupported {info.name} version {version}")
    header_version = info.response_header_version(version)
    try:
        _, body, body_version, trailing = read_response(frame.frame, info.key, version)
    except DecodeError as error:
        return Decoded(name, header_version, None, None, str(error))
    if frame.api_key == SASL_AUTHENTICATE:
        redact_body(body, frame.sasl_mechanism)
    return Decoded(name, header_version, body, body_version, None, trailing)


def decode_problem(frame: KafkaFrame, decoded: Decoded) -> Problem | None:
    """The problem of a frame that does not decode (``undecodable``) or has bytes after its body
    (``trailing_bytes``: decoded all the same, as Kafka reads it); None for a clean frame."""
    if decoded.error is not None:
        return Problem(frame.connection, frame.direction, frame.end_ts_ns, "undecodable", decoded.error,
                       frame.offset, frame.size + 4, frame.api_key, frame.api_version, frame.correlation_id)
    if decoded.trailing:
        end = frame.size - decoded.trailing  # where the body ended, in the frame
        name = decoded.body.NAME if decoded.body is not None else decoded.api_name  # (trailing: a body)
        return Problem(frame.connection, frame.direction, frame.end_ts_ns, "trailing_bytes",
                       f"{name}: {decoded.trailing} bytes after the body at byte {end} "
                       f"(ignored, as Kafka does)", frame.offset + 4 + end, decoded.trailing,
                       frame.api_key, frame.api_version, frame.correlation_id)
    return None


def api_info(key):
    """The API of a key, None for an unknown one (or None)."""
    if key is None:
        return None
    try:
        return api(key)
    except KeyError:
        return None


# ---- record blobs -----------------------------------------------------------------------------------

class BlobSummary(NamedTuple):
    """One partition's records field, from batch headers only (no decompression). Legacy message sets
    count each top-level message (a compressed wrapper counts once) as a batch and as a record."""
    records_bytes: int
    first_batch_bytes: int | None  # the size of the first whole batch (KIP-74 lets it exceed the limits)
    batch_count: int
    record_count: int
    first_offset: int | None   # None when the first entry is a compressed legacy wrapper
    last_offset: int | None
    compression: str | None    # codec of the first batch
    producer_id: int | None
    producer_epoch: int | None
    base_sequence: int | None
    is_transactional: bool | None
    batches: tuple             # RecordBatch / LegacyBatch views, for the records table
    error: str | None          # why reading stopped early (corrupt batch, bad size)


_EMPTY_BLOB = BlobSummary(0, None, 0, 0, None, None, None, None, None, None, None, (), None)


def summarize_records(blob) -> BlobSummary:
    """Batch headers of a records blob, CRCs checked; reading stops at the first bad batch."""
    if blob is None or len(blob) == 0:
        return _EMPTY_BLOB
    batches = []
    error = None
    try:
        for batch in iter_batches(blob):
            batches.append(batch)
    except DecodeError as exc:
        error = str(exc)
    if not batches:
        return BlobSummary(len(blob), None, 0, 0, None, None, None, None, None, None, None, (), error)
    first = batches[0]
    records = 0
    for batch in batches:
        records += 1 if isinstance(batch, LegacyBatch) else batch.count
    if isinstance(first, LegacyBatch):
        first_offset = None if first.is_compressed else first.offset
        codec = first.attributes & LEGACY_CODEC_MASK
        producer: tuple[int | None, int | None, int | None, bool | None] = (None, None, None, None)
    else:
        first_offset = first.base_offset
        codec = first.attributes & CODEC_MASK
        producer = (first.producer_id, first.producer_epoch, first.base_sequence, first.is_transactional)
    return BlobSummary(len(blob), first.size, len(batches), records, first_offset, batches[-1].last_offset,
                       CODEC_NAMES[codec], *producer, tuple(batches), error)

