"""Kafka's compression codecs (kafkawire.records.compression): round trips, the framing Java writes and
reads, interop with kafka-python 3.0.12's ``kafka.codec``, decompression limits, and corrupt input.

kafka-python's snappy and old-Kafka lz4 functions need python-snappy and xxhash, which are not installed:
the tests give ``kafka.codec`` stand-ins (cramjam's raw snappy blocks, and our own XXH32, itself checked
against the XXH32 content checksums liblz4 writes), so what is compared is kafka-python's framing code.
"""
from __future__ import annotations

import contextlib
import random
import struct
import threading
import tracemalloc
import types
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from unittest import mock

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.database import InMemoryExampleDatabase
from kafka import codec as kafka_codec

import kafkawire
from kafkawire.errors import CompressionError, DecompressionLimitError
from kafkawire.records.compression import (
    DEFAULT_DECOMPRESSED_LIMIT, Codec, _xxh32, compress, decompress,
)

SETTINGS = settings(max_examples=150, deadline=None, database=InMemoryExampleDatabase(),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MiB = 1024 * 1024
KAFKAWIRE = str(Path(kafkawire.__file__).parent)

# (codec, compress() options, decompress() options)
VARIANTS = {
    "none": (Codec.NONE, {}, {}),
    "gzip": (Codec.GZIP, {}, {}),
    "snappy-xerial": (Codec.SNAPPY, {}, {}),
    "snappy-raw": (Codec.SNAPPY, {"snappy_framing": "raw"}, {}),
    "lz4": (Codec.LZ4, {}, {}),
    "lz4-legacy": (Codec.LZ4, {"legacy_lz4": True}, {"legacy_lz4": True}),
    "zstd": (Codec.ZSTD, {}, {}),
}
COMPRESSED = [name for name in VARIANTS if name != "none"]

# Random bytes (incompressible) or a repeated chunk (compressible, up to 192 KiB: several snappy chunks
# and lz4 blocks).
payloads = st.one_of(
    st.binary(max_size=3000),
    st.builds(lambda chunk, times: chunk * times, st.binary(min_size=1, max_size=64), st.integers(1, 3000)),
)


def as_buffer(data: bytes, kind: str):
    """``data`` as bytes, a bytearray, or a memoryview slice that starts inside a larger buffer."""
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(b"junk" + data + b"tail")[4:4 + len(data)]
    return data


buffers = st.sampled_from(["bytes", "bytearray", "memoryview"])


def text(size: int, seed: int = 1) -> bytes:
    """Compressible but not trivial bytes, like record batches."""
    rng = random.Random(seed)
    words = [rng.randbytes(rng.randint(2, 8)).hex().encode() for _ in range(200)]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words) + b" "
    return bytes(out[:size])


# --- round trips ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
@SETTINGS
@given(data=payloads, compress_from=buffers, decompress_from=buffers)
def test_round_trip(variant, data, compress_from, decompress_from):
    codec, options, read_options = VARIANTS[variant]
    compressed = compress(codec, as_buffer(data, compress_from), **options)
    assert type(compressed) is bytes
    out = decompress(codec, as_buffer(compressed, decompress_from), **read_options)
    assert type(out) is bytes and out == data


LEVELS = {
    Codec.GZIP: st.sampled_from([-1, *range(1, 10)]),
    Codec.LZ4: st.integers(1, 17),
    Codec.ZSTD: st.one_of(st.integers(-10, 22), st.sampled_from([-131072, -1000])),
}


@pytest.mark.parametrize("codec", LEVELS, ids=lambda codec: codec.name.lower())
@SETTINGS
@given(data=payloads, legacy=st.booleans(), choice=st.data())
def test_round_trip_at_every_level(codec, data, legacy, choice):
    level = choice.draw(LEVELS[codec], label="level")
    legacy = legacy and codec is Codec.LZ4
    out = decompress(codec, compress(codec, data, level, legacy_lz4=legacy), legacy_lz4=legacy)
    assert out == data


def test_default_levels_are_kafkas():
    data = text(20000)
    assert compress(Codec.GZIP, data) == compress(Codec.GZIP, data, -1) == compress(Codec.GZIP, data, 6)
    assert compress(Codec.ZSTD, data) == compress(Codec.ZSTD, data, 3)
    assert compress(Codec.LZ4, data) == compress(Codec.LZ4, data, 9)
    assert compress(Codec.LZ4, data, 9) != compress(Codec.LZ4, data, 10)  # fast compressor vs HC


def test_codec_ids_and_names():
    assert [(codec.name, int(codec)) for codec in Codec] == [
        ("NONE", 0), ("GZIP", 1), ("SNAPPY", 2), ("LZ4", 3), ("ZSTD", 4)]
    assert DEFAULT_DECOMPRESSED_LIMIT == 64 * MiB
    assert compress(2, b"abc") == compress(Codec.SNAPPY, b"abc")  # plain ints are accepted


# --- the framing Java writes and reads --------------------------------------------------------------------

def test_gzip_writes_javas_header_and_trailer():
    data = text(5000)
    out = compress(Codec.GZIP, data)
    # GZIPOutputStream: no flags, MTIME 0, XFL 0, OS 255; raw deflate; CRC-32 and ISIZE little-endian.
    assert out[:10] == b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    assert out[10:-8] == zlib.compress(data, 6, wbits=-15)
    assert out[-8:] == struct.pack("<II", zlib.crc32(data), len(data))


def test_gzip_reads_concatenated_members_and_ignores_what_java_ignores():
    a, b = text(3000, 1), text(70000, 2)
    both = compress(Codec.GZIP, a) + compress(Codec.GZIP, b, 1)
    assert decompress(Codec.GZIP, both) == a + b
    # After a member, GZIPInputStream reads on only if a valid member header follows.
    for junk in (b"\x00", b"garbage after the member", b"\x1f\x8b", b"\x1f\x8b\x08\x08\x00\x00\x00\x00\x00\xffname"):
        assert decompress(Codec.GZIP, both + junk) == a + b
    header_crc = b"\x1f\x8b\x08\x02" + bytes(6)
    bad_crc = header_crc + b"\x00\x00" + compress(Codec.GZIP, b"x")[10:]
    assert decompress(Codec.GZIP, both + bad_crc) == a + b  # an FHCRC mismatch: not a member
    good_crc = header_crc + (zlib.crc32(header_crc) & 0xFFFF).to_bytes(2, "little") + compress(Codec.GZIP, b"x")[10:]
    assert decompress(Codec.GZIP, both + good_crc) == a + b + b"x"
    # A valid header followed by a broken member is an error, as in Java.
    with pytest.raises(CompressionError, match="gzip"):
        decompress(Codec.GZIP, both + compress(Codec.GZIP, b"more")[:-3])


def xerial_chunks(stream: bytes) -> list[bytes]:
    chunks, pos = [], 16
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        chunks.append(stream[pos + 4:pos + 4 + length])
        pos += 4 + length
    return chunks


def test_snappy_writes_snappy_javas_framing():
    data = text(100_000)
    out = compress(Codec.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    blocks = [bytes(cramjam.snappy.decompress_raw(chunk)) for chunk in xerial_chunks(out)]
    assert [len(block) for block in blocks] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(blocks) == data
    assert compress(Codec.SNAPPY, b"") == out[:16]  # SnappyOutputStream writes the header even when empty
    assert decompress(Codec.SNAPPY, out[:16]) == b""
    raw = compress(Codec.SNAPPY, data, snappy_framing="raw")
    assert raw == bytes(cramjam.snappy.compress_raw(data))


def test_snappy_reads_like_snappy_java():
    a, b = text(40000, 1), text(500, 2)
    first, second = compress(Codec.SNAPPY, a), compress(Codec.SNAPPY, b)
    assert decompress(Codec.SNAPPY, first + second) == a + b  # a concatenated stream's header is skipped
    for trailing in (b"\x00", b"\x00\x00", b"\x00\x00\x01"):  # fewer than 4 bytes after a chunk: ignored
        assert decompress(Codec.SNAPPY, first + trailing) == a
    assert decompress(Codec.SNAPPY, first + b"\x82SNAXXXXXXXXXXXX" + second[16:]) == a  # not a header: stop
    with pytest.raises(CompressionError, match="snappy: truncated xerial header"):
        decompress(Codec.SNAPPY, first + second[:10])
    with pytest.raises(CompressionError, match="snappy: incompatible xerial version 0"):
        decompress(Codec.SNAPPY, first + second[:8] + struct.pack(">ii", 0, 0) + second[16:])
    with pytest.raises(CompressionError, match="snappy: negative chunk length"):
        decompress(Codec.SNAPPY, first + b"\xff\xff\xff\xf0" + b"x" * 20)
    with pytest.raises(CompressionError, match="snappy: truncated chunk"):
        decompress(Codec.SNAPPY, first + b"\x00\x00\x01\x00" + b"x" * 20)
    with pytest.raises(CompressionError, match="snappy"):
        decompress(Codec.SNAPPY, first + b"\x00\x00\x00\x00")  # an empty chunk is not a snappy block
    # Without the 16-byte header the data is one raw block (what librdkafka writes).
    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(a))) == a
    assert decompress(Codec.SNAPPY, b"\x00") == b""
    with pytest.raises(CompressionError, match="snappy"):
        decompress(Codec.SNAPPY, b"")


def test_lz4_writes_kafkas_frame():
    data = text(150_000)
    out = compress(Codec.LZ4, data)
    # Magic, FLG 0x60 (version 1, independent blocks, no checksums, no content size), BD 0x40 (64 KiB).
    assert out[:6] == b"\x04\x22\x4d\x18\x60\x40"
    assert out[6] == (_xxh32(out[4:6]) >> 8) & 0xFF
    info = lz4.frame.get_frame_info(out)
    assert (info["block_size"], info["block_linked"], info["content_checksum"], info["block_checksum"],
            info["content_size"]) == (65536, False, False, False, 0)
    assert out[-4:] == b"\x00\x00\x00\x00"  # the end mark, no content checksum
    legacy = compress(Codec.LZ4, data, legacy_lz4=True)
    assert legacy[6] == (_xxh32(out[:6]) >> 8) & 0xFF != out[6]  # over magic + descriptor: differs
    assert legacy[:6] + legacy[7:] == out[:6] + out[7:]


def test_lz4_reads_like_kafka():
    data = text(150_000)
    for kwargs in ({"store_size": True}, {"content_checksum": True}, {"block_checksum": True},
                   {"block_size": lz4.frame.BLOCKSIZE_MAX4MB}, {"compression_level": 12}):
        frame = lz4.frame.compress(data, block_linked=False, **kwargs)
        assert decompress(Codec.LZ4, frame) == data
    with pytest.raises(CompressionError, match="dependent blocks"):
        decompress(Codec.LZ4, lz4.frame.compress(data, block_linked=True))
    out = compress(Codec.LZ4, data)
    assert decompress(Codec.LZ4, out + b"anything after the end mark") == data  # Java ignores it
    legacy = compress(Codec.LZ4, data, legacy_lz4=True)
    with pytest.raises(CompressionError, match="lz4"):
        decompress(Codec.LZ4, legacy)  # magic 1+ checks the header checksum
    assert decompress(Codec.LZ4, out, legacy_lz4=True) == data  # magic 0 ignores it
    # A legacy frame with a content size: the checksum byte sits 8 bytes later.
    sized = lz4.frame.compress(data, block_linked=False, store_size=True)
    broken = sized[:14] + bytes(((_xxh32(sized[:14]) >> 8) & 0xFF,)) + sized[15:]
    assert decompress(Codec.LZ4, broken, legacy_lz4=True) == data
    for bad, reason in ((b"", "bad magic"), (b"\x04\x22\x4d\x18\x60", "truncated"), (b"LZ4?" + out[4:], "bad magic")):
        with pytest.raises(CompressionError, match=reason):
            decompress(Codec.LZ4, bad)


def test_zstd_reads_what_java_and_others_write():
    a, b = text(300_000, 1), text(1000, 2)
    no_size = zstandard.ZstdCompressor(level=3, write_content_size=False)
    streamed = no_size.compressobj()
    java_like = streamed.compress(a) + streamed.flush()  # like zstd-jni's stream: no content size
    assert zstandard.get_frame_parameters(java_like).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Codec.ZSTD, java_like) == a
    skippable = struct.pack("<II", 0x184D2A5E, 3) + b"abc"
    checked = zstandard.ZstdCompressor(write_checksum=True).compress(b)
    assert decompress(Codec.ZSTD, java_like + skippable + checked + no_size.compress(b"")) == a + b
    assert decompress(Codec.ZSTD, compress(Codec.ZSTD, b"")) == b""
    for bad, reason in ((b"", "empty"), (java_like + b"garbage!", "not a zstd frame"),
                        (java_like + b"\x28\xb5", "truncated"), (skippable[:-1], "truncated skippable"),
                        (checked[:-1] + bytes((checked[-1] ^ 1,)), "zstd: corrupt data")):
        with pytest.raises(CompressionError, match=reason):
            decompress(Codec.ZSTD, bad)


def test_zstd_contexts_are_per_thread():
    rng = random.Random(5)
    jobs = [(text(rng.randint(0, 50_000), seed), rng.choice([1, 3, 9, -5])) for seed in range(64)]

    def run(job):
        data, level = job
        out = compress(Codec.ZSTD, data, level)
        assert decompress(Codec.ZSTD, out) == data
        with pytest.raises(CompressionError):
            decompress(Codec.ZSTD, out[:-1])
        assert decompress(Codec.ZSTD, out) == data  # the thread's context recovers from the error
        return out, threading.get_ident()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(run, jobs * 4))
    assert [out for out, _ in results] == [zstandard.ZstdCompressor(level=level).compress(data)
                                           for data, level in jobs * 4]


# --- kafka-python's kafka.codec ---------------------------------------------------------------------------

@contextlib.contextmanager
def kafka_python_stand_ins():
    """python-snappy and xxhash for kafka.codec, from cramjam and our XXH32."""
    snappy = types.SimpleNamespace(compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
                                   decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)))
    xxhash = types.SimpleNamespace(
        xxh32=lambda data: types.SimpleNamespace(digest=lambda: _xxh32(data).to_bytes(4, "big")))
    with mock.patch.object(kafka_codec, "snappy", snappy), mock.patch.object(kafka_codec, "xxhash", xxhash):
        yield


@SETTINGS
@given(data=st.binary(max_size=256))
def test_xxh32_matches_liblz4(data):
    # liblz4's content checksum is XXH32 (seed 0) of the content, little-endian after the end mark.
    frame = lz4.frame.compress(data, content_checksum=True)
    assert _xxh32(data) == int.from_bytes(frame[-4:], "little")


def test_xxh32_reference_values():
    assert [_xxh32(value) for value in (b"", b"a", b"abc")] == [0x02CC5D05, 0x550D7456, 0x32D153FF]
    assert _xxh32(b"", seed=1) != _xxh32(b"")


@SETTINGS
@given(data=payloads, level=st.integers(1, 9))
def test_gzip_interop(data, level):
    ours, theirs = compress(Codec.GZIP, data, level), kafka_codec.gzip_encode(data, level)
    assert kafka_codec.gzip_decode(ours) == data
    assert decompress(Codec.GZIP, theirs) == data
    # Python's gzip module deflates with the same zlib settings: only the header (MTIME, XFL, OS) differs.
    assert ours[10:] == theirs[10:]


@SETTINGS
@given(data=payloads)
def test_snappy_interop(data):
    with kafka_python_stand_ins():
        theirs = kafka_codec.snappy_encode(data, xerial_compatible=True)
        # Same framing and chunk size (32 KiB), same raw-block encoder: identical bytes.
        assert compress(Codec.SNAPPY, data) == theirs
        assert decompress(Codec.SNAPPY, theirs) == data
        if data:  # kafka-python takes a 16-byte stream (header only) for a raw block
            assert kafka_codec.snappy_decode(compress(Codec.SNAPPY, data)) == data
        raw = kafka_codec.snappy_encode(data, xerial_compatible=False)
        assert compress(Codec.SNAPPY, data, snappy_framing="raw") == raw
        assert decompress(Codec.SNAPPY, raw) == data
        assert kafka_codec.snappy_decode(compress(Codec.SNAPPY, data, snappy_framing="raw")) == data


@SETTINGS
@given(data=payloads)
def test_lz4_interop(data):
    theirs = kafka_codec.lz4_encode(data)  # with a content size, which Kafka does not write
    assert decompress(Codec.LZ4, theirs) == data
    assert kafka_codec.lz4_decode(compress(Codec.LZ4, data)) == data
    # Without the content size, kafka-python's frame (lz4.frame level 0) is Kafka's default: identical.
    assert compress(Codec.LZ4, data) == kafka_codec.lz4_encode(data, store_size=False)


@SETTINGS
@given(data=payloads)
def test_lz4_legacy_interop(data):
    with kafka_python_stand_ins():
        theirs = kafka_codec.lz4_encode_old_kafka(data)
        assert compress(Codec.LZ4, data, legacy_lz4=True) == theirs
        assert decompress(Codec.LZ4, theirs, legacy_lz4=True) == data
        assert kafka_codec.lz4_decode_old_kafka(compress(Codec.LZ4, data, legacy_lz4=True)) == data


@SETTINGS
@given(data=payloads)
def test_zstd_interop(data):
    theirs = kafka_codec.zstd_encode(data)
    assert compress(Codec.ZSTD, data) == theirs  # the same library at the same level (3)
    assert decompress(Codec.ZSTD, theirs) == data
    assert kafka_codec.zstd_decode(compress(Codec.ZSTD, data)) == data


# --- limits -----------------------------------------------------------------------------------------------

def zeros_200_mib(variant: str) -> bytes:
    """200 MiB of zeros, compressed without holding 200 MiB."""
    zero = bytes(MiB)
    if variant == "gzip":
        stream = zlib.compressobj(1, zlib.DEFLATED, 31)
        return b"".join([stream.compress(zero) for _ in range(200)] + [stream.flush()])
    if variant == "zstd":
        stream = zstandard.ZstdCompressor(write_content_size=False).compressobj()
        return b"".join([stream.compress(zero) for _ in range(200)] + [stream.flush()])
    if variant in ("lz4", "lz4-legacy"):
        stream = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False)
        frame = b"".join([stream.begin()] + [stream.compress(zero) for _ in range(200)] + [stream.flush()])
        if variant == "lz4-legacy":
            frame = frame[:6] + bytes(((_xxh32(frame[:6]) >> 8) & 0xFF,)) + frame[7:]
        return frame
    if variant == "snappy-xerial":
        chunk = xerial_chunks(compress(Codec.SNAPPY, zero[:32768]))[0]
        return compress(Codec.SNAPPY, b"") + (len(chunk).to_bytes(4, "big") + chunk) * (200 * 32)
    assert variant == "snappy-raw"  # a block that declares 200 MiB: refused before anything is decoded
    size = 200 * MiB
    varint = bytes([(size >> 7 * i) & 0x7F | (0x80 if size >> 7 * (i + 1) else 0) for i in range(4)])
    return varint + b"\x00\x00" + b"\xfe\x01\x00" * 1000


@pytest.mark.parametrize("variant", COMPRESSED)
def test_a_200_mib_bomb_is_refused_within_the_default_limit(variant):
    codec, _, read_options = VARIANTS[variant]
    bomb = zeros_200_mib(variant)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError, match=f"{codec.name.lower()}: data expands beyond the "
                                                          f"{DEFAULT_DECOMPRESSED_LIMIT}-byte limit"):
            decompress(codec, bomb, **read_options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # About the limit (64 MiB) plus one step, far from 200 MiB. (cramjam's allocations are not traced,
    # but snappy refuses each block from its declared length before decoding it.)
    assert peak < DEFAULT_DECOMPRESSED_LIMIT + 20 * MiB


@pytest.mark.parametrize("variant", COMPRESSED)
def test_a_small_limit_bounds_memory(variant):
    codec, options, read_options = VARIANTS[variant]
    bomb = compress(codec, bytes(8 * MiB), **options)
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError, match="1048576-byte limit"):
            decompress(codec, bomb, MiB, **read_options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB


def held_by(error: BaseException, given: bytes) -> int:
    """The bytes (bytes, bytearrays, cramjam buffers, lists of them) other than the input ``given`` that
    ``error`` keeps alive through kafkawire's frames in its traceback, its cause's and its context's."""
    def size(value) -> int:
        if value is given:
            return 0
        if isinstance(value, (bytes, bytearray, cramjam.Buffer)):
            return len(value)
        if isinstance(value, list):
            return sum(size(item) for item in value)
        return 0

    total, seen = 0, set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename.startswith(KAFKAWIRE):
                total += sum(size(value) for value in tb.tb_frame.f_locals.values())
            tb = tb.tb_next
        pending += [current.__cause__, current.__context__]
    return total


@pytest.mark.parametrize("variant", COMPRESSED)
def test_a_refused_decompression_keeps_none_of_its_output(variant):
    # A broker answers after all of a request's batches are checked: the errors it holds until then
    # must not hold what each bomb had expanded to.
    codec, options, read_options = VARIANTS[variant]
    bomb = compress(codec, bytes(8 * MiB), **options)
    with pytest.raises(DecompressionLimitError) as caught:
        decompress(codec, bomb, MiB, **read_options)
    assert held_by(caught.value, bomb) < 64 * 1024
    truncated = compress(codec, text(4 * MiB), **options)[:-4096]  # fails after expanding most of it
    with pytest.raises(CompressionError) as caught:
        decompress(codec, truncated, **read_options)
    assert held_by(caught.value, truncated) < 64 * 1024


class OutputMeter:
    """Stands in for each codec library's decompressing call in kafkawire.records.compression and adds
    up what they were asked to produce (zstd, gzip, lz4) or produced (snappy's raw blocks)."""

    def __init__(self):
        self.asked = 0

    def zstd(self, real):
        meter = self

        class Reader:
            def __init__(self, reader):
                self.reader = reader

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.reader.close()

            def read(self, size):
                meter.asked += size
                return self.reader.read(size)

        class Decompressor:
            def stream_reader(self, *args, **kwargs):
                return Reader(real().stream_reader(*args, **kwargs))

        return Decompressor

    def gzip(self, real):
        meter = self

        class Inflater:
            def __init__(self, **kwargs):
                self.inflater = real(**kwargs)

            def decompress(self, data, max_length):
                meter.asked += max_length
                return self.inflater.decompress(data, max_length)

            def __getattr__(self, name):
                return getattr(self.inflater, name)

        return Inflater

    def counting(self, real, size):
        def call(*args, **kwargs):
            result = real(*args, **kwargs)
            self.asked += size(args, kwargs, result)
            return result
        return call


@pytest.mark.parametrize("variant", COMPRESSED)
def test_a_bomb_is_read_no_further_than_the_limit(variant):
    codec, options, read_options = VARIANTS[variant]
    bomb = compress(codec, bytes(64 * MiB), **options)
    module = "kafkawire.records.compression"
    meter = OutputMeter()
    with mock.patch(f"{module}._zstd_decompressor", meter.zstd(zstandard.ZstdDecompressor)), \
            mock.patch(f"{module}.zlib.decompressobj", meter.gzip(zlib.decompressobj)), \
            mock.patch("lz4.frame._frame.decompress_chunk",  # (the libraries load on first use: patched there)
                       meter.counting(lz4.frame._frame.decompress_chunk, lambda a, k, r: k.get("max_length", 0))), \
            mock.patch("cramjam.snappy.decompress_raw",
                       meter.counting(cramjam.snappy.decompress_raw, lambda a, k, r: len(r))):
        with pytest.raises(DecompressionLimitError):
            decompress(codec, bomb, MiB, **read_options)
    if variant == "snappy-raw":  # a raw block is refused from its declared length: nothing decoded
        assert meter.asked == 0
    else:  # one byte past the limit tells "too big" (snappy checks each chunk's declared length first)
        assert MiB // 2 < meter.asked <= MiB + 1


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("size", [1, 1000, 100_000])
def test_the_limit_is_inclusive(variant, size):
    codec, options, read_options = VARIANTS[variant]
    data = text(size)
    compressed = compress(codec, data, **options)
    assert decompress(codec, compressed, size, **read_options) == data
    with pytest.raises(DecompressionLimitError):
        decompress(codec, compressed, size - 1, **read_options)
    assert decompress(codec, compress(codec, b"", **options), 0, **read_options) == b""


@pytest.mark.parametrize("variant", ["gzip", "snappy-xerial", "zstd"])
def test_the_limit_counts_across_members_chunks_and_frames(variant):
    codec, _, _ = VARIANTS[variant]
    parts = [text(30_000, seed) for seed in range(3)]
    whole = b"".join(compress(codec, part) for part in parts)
    if codec is Codec.SNAPPY:  # one stream with concatenated headers, as snappy-java reads it
        whole = compress(codec, parts[0]) + compress(codec, parts[1]) + compress(codec, parts[2])
    assert decompress(codec, whole, 90_000) == b"".join(parts)
    with pytest.raises(DecompressionLimitError):
        decompress(codec, whole, 89_999)


# --- corrupt input ----------------------------------------------------------------------------------------

def outcome(codec: Codec, data: bytes, **options) -> bytes | None:
    """What decompress gives: bytes, or None for a CompressionError (anything else fails the test)."""
    try:
        return decompress(codec, data, MiB, **options)
    except CompressionError as e:
        assert str(e).startswith(codec.name.lower() + ": "), str(e)
        return None


@pytest.mark.parametrize("variant", COMPRESSED)
def test_every_truncation_is_an_error(variant):
    codec, options, read_options = VARIANTS[variant]
    data = text(40_000 if variant == "snappy-xerial" else 3000)  # two snappy chunks
    compressed = compress(codec, data, **options)
    for cut in range(len(compressed)):
        out = outcome(codec, compressed[:cut], **read_options)
        if variant == "snappy-xerial":  # no end mark: a cut at a chunk boundary (or 1-3 bytes after) reads
            assert out is None or (data.startswith(out) and cut - len(out) < 40_000)
        else:
            assert out is None, cut


@pytest.mark.parametrize("variant", COMPRESSED)
@SETTINGS
@given(data=payloads, flips=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 7)),
                                      min_size=1, max_size=4))
def test_bit_flips_give_bytes_or_a_compression_error(variant, data, flips):
    codec, options, read_options = VARIANTS[variant]
    corrupt = bytearray(compress(codec, data, **options))
    for where, bit in flips:
        corrupt[int(where * len(corrupt))] ^= 1 << bit
    outcome(codec, bytes(corrupt), **read_options)


PREFIXES = [b"", b"\x1f\x8b\x08\x00", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01", b"\x04\x22\x4d\x18\x60\x40",
            b"\x04\x22\x4d\x18\x68\x40", b"\x28\xb5\x2f\xfd", b"\x28\xb5\x2f\xfd\x20", b"\x50\x2a\x4d\x18"]


@pytest.mark.parametrize("variant", COMPRESSED)
@SETTINGS
@given(prefix=st.sampled_from(PREFIXES), garbage=st.binary(max_size=200))
def test_garbage_gives_bytes_or_a_compression_error(variant, prefix, garbage):
    codec, _, read_options = VARIANTS[variant]
    outcome(codec, prefix + garbage, **read_options)


# --- arguments --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [5, 6, 7, 8, -1])
def test_unknown_codecs(codec):
    with pytest.raises(CompressionError, match=f"unknown compression codec {codec}"):
        compress(codec, b"data")
    with pytest.raises(CompressionError, match=f"unknown compression codec {codec}"):
        decompress(codec, b"data")


@pytest.mark.parametrize(("codec", "good", "bad"), [
    (Codec.GZIP, [-1, 1, 9], [0, 10, -2]),
    (Codec.LZ4, [1, 9, 17], [0, 18, -1]),
    (Codec.ZSTD, [-131072, 0, 3, 22], [-131073, 23]),
    (Codec.SNAPPY, [], [0, 1]),
    (Codec.NONE, [], [0, 1]),
], ids=lambda value: value.name.lower() if isinstance(value, Codec) else None)
def test_levels(codec, good, bad):
    for level in good:
        assert decompress(codec, compress(codec, b"data" * 100, level)) == b"data" * 100
    for level in bad:
        with pytest.raises(ValueError, match=str(level)):
            compress(codec, b"data", level)


def test_snappy_framing_argument():
    with pytest.raises(ValueError, match="snappy_framing"):
        compress(Codec.SNAPPY, b"data", snappy_framing="framed")
    assert compress(Codec.GZIP, b"data", snappy_framing="ignored by other codecs")


def test_library_errors_are_compression_errors():
    cases = {
        Codec.GZIP: b"\x1f\x8b\x08\x00" + bytes(6) + b"\xff" * 20,
        Codec.SNAPPY: b"\x05\xff\xff\xff",
        Codec.LZ4: b"\x04\x22\x4d\x18\x60\x40\x00",
        Codec.ZSTD: compress(Codec.ZSTD, b"x" * 100)[:-3] + b"\xff" * 3,
    }
    for codec, bad in cases.items():
        with pytest.raises(CompressionError) as caught:
            decompress(codec, bad)
        assert type(caught.value) is CompressionError and caught.value.__cause__ is not None
        assert str(caught.value).startswith(codec.name.lower() + ": corrupt data (")
