"""Kafka's compression codecs, byte-compatible with the Java client and broker, with bounded decompression.

Framing, as Kafka writes it (``common/compress/*``) and as this module reads it:

* gzip (1): one RFC 1952 member with the header ``GZIPOutputStream`` writes (MTIME 0, XFL 0, OS 255) and
  the Deflater's default level 6. Reading accepts concatenated members and, like ``GZIPInputStream``,
  ignores trailing bytes that do not start a valid member header.
* snappy (2): snappy-java's ``SnappyOutputStream`` framing: the 16-byte header (magic ``\\x82SNAPPY\\x00``,
  int32 BE version 1, int32 BE compatible version 1), then per 32 KiB of input one chunk of
  [int32 BE length][raw snappy block]. ``snappy_framing="raw"`` writes one raw block, as librdkafka
  does. Reading detects the header (concatenated headers too, as ``SnappyInputStream`` does) and
  otherwise takes the data as one raw block.
* lz4 (3): one LZ4 frame as ``Lz4BlockOutputStream`` writes it: 64 KiB blocks, independent blocks, no
  checksums, no content size. Messages of magic 0 (KIP-57) carry the header checksum computed the old,
  broken way, over the magic number as well as the descriptor: ``legacy_lz4=True`` writes it and makes
  reading ignore the checksum, as Java does for magic 0. Frames with dependent blocks are refused, as
  Java refuses them; bytes after the end mark are ignored, as Java ignores them.
* zstd (4): standard zstd frames (level 3 by default), with the content size in the header (as
  kafka-python writes them; zstd-jni's streaming writer omits it, and every reader accepts both).
  Reading accepts several frames, skippable frames and frames without a content size, and refuses
  truncated frames and trailing garbage, as zstd-jni does.

Every decompression stops before the output exceeds ``limit`` bytes (DecompressionLimitError); any other
failure of the underlying library, a truncation or garbage becomes a CompressionError.
"""
from __future__ import annotations

import enum
import struct
import threading
import zlib

from typing import TYPE_CHECKING

from kafkawire.errors import CompressionError, DecompressionLimitError

if TYPE_CHECKING:  # the libraries themselves load on first use: a process that never compresses skips them
    import cramjam
    import zstandard

Buffer = bytes | bytearray | memoryview

DEFAULT_DECOMPRESSED_LIMIT = 64 * 1024 * 1024


class Codec(enum.IntEnum):
    """The codec ids of bits 0-2 of a batch's (or legacy message's) attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# (lowest, highest, default) as Kafka's CompressionType declares them; gzip also takes -1, the Deflater default.
_LEVELS = {Codec.GZIP: (1, 9, -1), Codec.LZ4: (1, 17, 9), Codec.ZSTD: (-131072, 22, 3)}


_CODECS = {int(codec): codec for codec in Codec}  # a dict lookup is ten times faster than Codec(id)


def codec_of(codec: int) -> Codec:
    """The Codec for an attributes codec id; CompressionError for an id Kafka does not define."""
    kind = _CODECS.get(codec)
    if kind is None:
        raise CompressionError(f"unknown compression codec {codec}")
    return kind


def codec_name(codec: int) -> str:
    """A codec id's name for messages, "unknown(N)" for ids Kafka does not define."""
    kind = _CODECS.get(codec)
    return kind.name if kind is not None else f"unknown({codec})"


def _level(codec: Codec, level: int | None) -> int:
    """The level to compress at: ``level`` checked, or the codec's default; 0 for codecs without levels."""
    if codec not in _LEVELS:
        if level is not None:
            raise ValueError(f"{codec.name.lower()} takes no compression level (got {level})")
        return 0
    low, high, default = _LEVELS[codec]
    if level is None:
        return default
    if not (low <= level <= high or level == default):
        raise ValueError(f"{codec.name.lower()} compression level {level} is outside {low}..{high}")
    return level


def compress(codec: int, data: Buffer, level: int | None = None, *, legacy_lz4: bool = False,
             snappy_framing: str = "xerial") -> bytes:
    """Compress ``data`` with ``codec`` as the Java client would (see the module docstring).

    ``level`` None means the codec's Kafka default; an out-of-range level (or any level for none and
    snappy) is a ValueError. ``legacy_lz4`` writes the magic-0 header checksum; ``snappy_framing`` is
    ``"xerial"`` (Java) or ``"raw"`` (librdkafka).
    """
    kind = codec_of(codec)
    chosen = _level(kind, level)
    if kind is Codec.SNAPPY and snappy_framing not in ("xerial", "raw"):
        raise ValueError(f"snappy_framing must be 'xerial' or 'raw', not {snappy_framing!r}")
    try:
        if kind is Codec.NONE:
            return bytes(data)
        if kind is Codec.GZIP:
            return _gzip(data, chosen)
        if kind is Codec.SNAPPY:
            if snappy_framing == "xerial":
                return _snappy(data)
            import cramjam
            return bytes(cramjam.snappy.compress_raw(data))
        if kind is Codec.LZ4:
            return _lz4_frame(data, chosen, legacy_lz4)
        return _zstd_compressor(chosen).compress(data)
    except _library_errors(kind) as e:
        raise CompressionError(f"{kind.name.lower()}: cannot compress ({e})") from e


def decompress(codec: int, data: Buffer, limit: int = DEFAULT_DECOMPRESSED_LIMIT, *,
               legacy_lz4: bool = False) -> bytes:
    """Decompress ``data`` written with ``codec``, producing at most ``limit`` bytes.

    Raises DecompressionLimitError if the output would exceed ``limit``, CompressionError if the data
    does not decompress. ``legacy_lz4`` accepts the broken lz4 header checksum of magic-0 messages.
    """
    kind = codec_of(codec)
    try:
        if kind is Codec.NONE:
            if len(data) > limit:
                raise _too_big(kind, limit)
            return bytes(data)
        if kind is Codec.GZIP:
            return _gunzip(data, limit)
        if kind is Codec.SNAPPY:
            return _unsnappy(memoryview(data), limit)
        if kind is Codec.LZ4:
            return _unlz4(memoryview(data), limit, legacy_lz4)
        return _unzstd(memoryview(data), limit)
    except CompressionError as error:
        # The reader's frames, kept alive by the traceback, hold what it had expanded (up to ``limit``
        # bytes): whoever keeps the error must not keep that too.
        raise error.with_traceback(None)
    except _library_errors(kind) as e:
        name = kind.name.lower()
        cause = e.with_traceback(None)  # as above
        raise CompressionError(f"{name}: corrupt data ({str(e).removeprefix(name + ': ')})") from cause


def _library_errors(kind: Codec) -> type[Exception] | tuple[type[Exception], ...]:
    """What each library raises on bad input (lz4 raises plain RuntimeErrors)."""
    if kind is Codec.SNAPPY:
        import cramjam
        return cramjam.CompressionError, cramjam.DecompressionError
    if kind is Codec.ZSTD:
        import zstandard
        return zstandard.ZstdError
    if kind is Codec.GZIP:
        return zlib.error
    return RuntimeError if kind is Codec.LZ4 else ()


# Streams without a declared size are inflated in growing steps, checking the limit after each, so a
# stream that is too big costs about ``limit`` bytes (plus one step) before it is refused.
_FIRST_STEP = 64 * 1024
_MAX_STEP = 8 * 1024 * 1024


def _too_big(codec: Codec, limit: int) -> DecompressionLimitError:
    return DecompressionLimitError(f"{codec.name.lower()}: data expands beyond the {limit}-byte limit")


# --- gzip -------------------------------------------------------------------------------------------------

# What java.util.zip.GZIPOutputStream writes: no flags, MTIME 0, XFL 0, OS 255 (unknown).
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _gzip(data: Buffer, level: int) -> bytes:
    body = zlib.compress(data, level, wbits=-15)
    return b"".join((_GZIP_HEADER, body, struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)))


def _gunzip(data: Buffer, limit: int) -> bytes:
    parts: list[bytes] = []
    produced, step = 0, _FIRST_STEP
    member = zlib.decompressobj(wbits=31)
    while True:
        want = min(step, limit - produced + 1)  # one byte more than allowed tells "too big"
        out = member.decompress(data, want)
        produced += len(out)
        if produced > limit:
            raise _too_big(Codec.GZIP, limit)
        parts.append(out)
        if member.eof:
            data = member.unused_data
            if not _gzip_member_follows(data):
                return parts[0] if len(parts) == 1 else b"".join(parts)
            member = zlib.decompressobj(wbits=31)
        elif len(out) < want:  # output not full, so the input ran out inside the member
            raise CompressionError("gzip: truncated stream")
        else:
            data = member.unconsumed_tail
        step = min(2 * step, _MAX_STEP)


def _gzip_member_follows(rest: bytes) -> bool:
    """Whether ``rest`` starts with a complete gzip member header, by GZIPInputStream's rules: after a
    member, Java reads on only if the next header is valid, and ignores whatever else follows."""
    if len(rest) < 10 or rest[:3] != b"\x1f\x8b\x08":
        return False
    flags, pos = rest[3], 10
    if flags & 4:  # FEXTRA
        if len(rest) < pos + 2:
            return False
        pos += 2 + int.from_bytes(rest[pos:pos + 2], "little")
    for flag in (8, 16):  # FNAME, FCOMMENT: zero-terminated
        if flags & flag:
            pos = rest.find(b"\x00", pos) + 1
            if pos == 0:
                return False
    if flags & 2:  # FHCRC
        if rest[pos:pos + 2] != (zlib.crc32(rest[:pos]) & 0xFFFF).to_bytes(2, "little"):
            return False
        pos += 2
    return pos <= len(rest)


# --- snappy -----------------------------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible version 1
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream.DEFAULT_BLOCK_SIZE


def _snappy(data: Buffer) -> bytes:
    view = memoryview(data)
    import cramjam
    parts: list[Buffer | cramjam.Buffer] = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK])
        parts += (len(block).to_bytes(4, "big"), block)
    return b"".join(parts)


def _unsnappy(view: memoryview, limit: int) -> bytes:
    # SnappyInputStream's test: 16 bytes or more, starting with the magic; anything else is one raw block.
    if len(view) < 16 or view[:8] != _XERIAL_MAGIC:
        return bytes(_snappy_block(view, limit, limit))
    parts: list[cramjam.Buffer] = []
    produced, pos, end = 0, 16, len(view)
    while end - pos >= 4:  # like SnappyInputStream, ignore 1-3 trailing bytes
        if view[pos:pos + 4] == _XERIAL_MAGIC[:4]:  # a concatenated stream's header
            if end - pos < 16:
                raise CompressionError("snappy: truncated xerial header")
            if view[pos:pos + 8] != _XERIAL_MAGIC:
                break  # SnappyInputStream stops here
            version = int.from_bytes(view[pos + 8:pos + 12], "big", signed=True)
            if version < 1:
                raise CompressionError(f"snappy: incompatible xerial version {version}")
            pos += 16
            continue
        length = int.from_bytes(view[pos:pos + 4], "big", signed=True)
        if length < 0:
            raise CompressionError(f"snappy: negative chunk length {length}")
        pos += 4
        if pos + length > end:
            raise CompressionError(f"snappy: truncated chunk ({length} bytes declared, {end - pos} left)")
        block = _snappy_block(view[pos:pos + length], limit - produced, limit)
        produced += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


def _snappy_block(block: memoryview, budget: int, limit: int) -> cramjam.Buffer:
    # A raw block declares its length up front: refuse before allocating anything.
    import cramjam
    if cramjam.snappy.decompress_raw_len(block) > budget:
        raise _too_big(Codec.SNAPPY, limit)
    return cramjam.snappy.decompress_raw(block)


# --- lz4 --------------------------------------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"


def _lz4_frame(data: Buffer, level: int, legacy: bool) -> bytes:
    # Kafka's default 9 is lz4-java's fast compressor (lz4.frame's 0), other levels HC at that level (3 at least).
    import lz4.frame
    frame: bytes = lz4.frame.compress(data, compression_level=0 if level == 9 else max(level, 3),
                                      block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                      content_checksum=False, block_checksum=False, store_size=False)
    if not legacy:
        return frame
    broken = (_xxh32(frame[:6]) >> 8) & 0xFF  # over magic + FLG + BD, not FLG + BD
    return b"".join((frame[:6], bytes((broken,)), memoryview(frame)[7:]))


def _unlz4(view: memoryview, limit: int, legacy: bool) -> bytes:
    if view[:4] != _LZ4_MAGIC:
        raise CompressionError("lz4: not an LZ4 frame (bad magic number)")
    if len(view) < 7:
        raise CompressionError("lz4: truncated frame")
    flags = view[4]
    if not flags & 0x20:
        raise CompressionError("lz4: frame with dependent blocks (Kafka requires independent blocks)")
    from lz4.frame import _frame as _lz4
    context = _lz4.create_decompression_context()
    pos = 0
    if legacy:  # Java ignores the header checksum of magic 0: give lz4 the correct one instead
        checksum_at = 14 if flags & 0x08 else 6  # a content size adds 8 bytes to the descriptor
        if len(view) <= checksum_at:
            raise CompressionError("lz4: truncated frame")
        fixed = (_xxh32(view[4:checksum_at]) >> 8) & 0xFF
        _lz4.decompress_chunk(context, b"".join((view[:checksum_at], bytes((fixed,)))))
        pos = checksum_at + 1
    parts: list[bytes] = []
    produced, step = 0, _FIRST_STEP
    while True:
        want = min(step, limit - produced + 1)
        out, read, end_of_frame = _lz4.decompress_chunk(context, view[pos:], max_length=want)
        pos += read
        produced += len(out)
        if produced > limit:
            raise _too_big(Codec.LZ4, limit)
        parts.append(out)
        if end_of_frame:
            return parts[0] if len(parts) == 1 else b"".join(parts)
        if len(out) < want:  # output not full, so all input was used up before the end mark
            raise CompressionError("lz4: truncated frame")
        step = min(2 * step, _MAX_STEP)


def _xxh32(data: Buffer, seed: int = 0) -> int:
    """XXH32, for the lz4 frame-descriptor checksum (a few bytes, so pure Python is enough)."""
    p1, p2, p3, p4, p5, mask = 2654435761, 2246822519, 3266489917, 668265263, 374761393, 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    data = bytes(data)
    n, pos = len(data), 0
    if n >= 16:
        lanes = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed, (seed - p1) & mask]
        while pos + 16 <= n:
            for i, word in enumerate(struct.unpack_from("<4I", data, pos)):
                lanes[i] = rotl((lanes[i] + word * p2) & mask, 13) * p1 & mask
            pos += 16
        h = rotl(lanes[0], 1) + rotl(lanes[1], 7) + rotl(lanes[2], 12) + rotl(lanes[3], 18)
    else:
        h = seed + p5
    h = (h + n) & mask
    while pos + 4 <= n:
        h = rotl((h + int.from_bytes(data[pos:pos + 4], "little") * p3) & mask, 17) * p4 & mask
        pos += 4
    for byte in data[pos:]:
        h = rotl((h + byte * p5) & mask, 11) * p1 & mask
    h = (h ^ (h >> 15)) * p2 & mask
    h = (h ^ (h >> 13)) * p3 & mask
    return h ^ (h >> 16)


# --- zstd -------------------------------------------------------------------------------------------------

# zstandard's contexts are not safe to share between threads and cost more to create than
# decompressing a small batch does, so each thread keeps its own.
_local = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    compressors = getattr(_local, "compressors", None)
    if compressors is None:
        compressors = _local.compressors = {}
    compressor = compressors.get(level)
    if compressor is None:
        import zstandard
        compressor = compressors[level] = zstandard.ZstdCompressor(level=level)
    return compressor


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    decompressor = getattr(_local, "decompressor", None)
    if decompressor is None:
        import zstandard
        decompressor = _local.decompressor = zstandard.ZstdDecompressor()
    return decompressor


def _unzstd(view: memoryview, limit: int) -> bytes:
    # zstandard's readers end quietly on truncated input, so the frames are walked first: that finds
    # truncation and gives a bound on the output, which keeps the read's allocation small.
    bound = _zstd_bound(view)
    with _zstd_decompressor().stream_reader(view, read_across_frames=True) as reader:
        out = reader.read(min(bound, limit) + 1)
    if len(out) > limit:
        raise _too_big(Codec.ZSTD, limit)
    return out


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_BLOCK_MAX = 128 * 1024


def _zstd_bound(view: memoryview) -> int:
    """Check that ``view`` is a sequence of whole zstd frames and return an upper bound of their content:
    the declared content size, or the sum of each block's largest possible output."""
    if not view:
        raise CompressionError("zstd: empty input")
    bound, pos, end = 0, 0, len(view)
    while pos < end:
        if end - pos < 4:
            raise CompressionError("zstd: truncated frame header")
        magic = int.from_bytes(view[pos:pos + 4], "little")
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # a skippable frame: 4-byte length, then that many bytes
            pos += 8 + int.from_bytes(view[pos + 4:pos + 8], "little")
            if pos > end:
                raise CompressionError("zstd: truncated skippable frame")
            continue
        if magic != _ZSTD_MAGIC:
            raise CompressionError(f"zstd: not a zstd frame at byte {pos}")
        if end - pos < 6:
            raise CompressionError("zstd: truncated frame header")
        descriptor = view[pos + 4]
        single_segment = descriptor & 0x20
        size_bytes = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
        pos += 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 3]
        content_size = None
        if size_bytes:
            content_size = int.from_bytes(view[pos:pos + size_bytes], "little") + (256 if size_bytes == 2 else 0)
            pos += size_bytes
        blocks = 0
        last = 0
        while not last:
            if end - pos < 3:
                raise CompressionError("zstd: truncated frame")
            header = int.from_bytes(view[pos:pos + 3], "little")
            last, kind, size = header & 1, (header >> 1) & 3, header >> 3
            if kind == 3:
                raise CompressionError(f"zstd: reserved block type at byte {pos}")
            pos += 3 + (1 if kind == 1 else size)  # an RLE block stores one byte
            blocks += size if kind < 2 else _ZSTD_BLOCK_MAX
        pos += 4 if descriptor & 4 else 0  # content checksum
        if pos > end:
            raise CompressionError("zstd: truncated frame")
        bound += blocks if content_size is None else content_size
    return bound
