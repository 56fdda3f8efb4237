"""The capture job's part-file sink (O_DIRECT, with its fallbacks) and the workers' malloc settings."""
from __future__ import annotations

import errno
import os
import platform
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from kafkawire.capture_spark import direct_file
from kafkawire.capture_spark.direct_file import BLOCK, DirectFile

chunks = st.lists(st.binary(max_size=3 * BLOCK + 7), max_size=12)


@settings(max_examples=60, deadline=None)
@given(chunks=chunks, blocks=st.integers(1, 3))
def test_direct_file_holds_exactly_what_was_written(tmp_path_factory, chunks, blocks):
    path = tmp_path_factory.mktemp("direct") / "out.bin"
    written = b""
    with DirectFile(str(path), buffer_bytes=blocks * BLOCK) as sink:
        for chunk in chunks:
            assert sink.write(chunk) == len(chunk)
            written += chunk
            assert sink.tell() == len(written)
    assert path.read_bytes() == written


def test_direct_file_bypasses_the_page_cache_where_it_can(tmp_path):
    with DirectFile(str(tmp_path / "out.bin")) as sink:
        sink.write(b"x" * (BLOCK + 1))
    # Linux file systems on disks take O_DIRECT; a tmp_path elsewhere would only take the fallback
    if sys.platform.startswith("linux") and _file_system_type(tmp_path) in {"ext4", "xfs", "btrfs"}:
        assert sink.direct
    assert (tmp_path / "out.bin").stat().st_size == BLOCK + 1


def test_direct_file_falls_back_when_open_refuses_o_direct(tmp_path, monkeypatch):
    real_open = os.open

    def refusing_open(path, flags, mode=0o777):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode)

    monkeypatch.setattr(direct_file.os, "open", refusing_open)
    with DirectFile(str(tmp_path / "out.bin"), buffer_bytes=BLOCK) as sink:
        sink.write(b"abc" * 5000)
    assert not sink.direct
    assert (tmp_path / "out.bin").read_bytes() == b"abc" * 5000


@pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT here")
def test_direct_file_falls_back_when_the_first_write_refuses(tmp_path, monkeypatch):
    real_write = os.write
    refused = []

    def refusing_write(fd, data):
        import fcntl
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            refused.append(len(data))
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_write(fd, data)

    monkeypatch.setattr(direct_file.os, "write", refusing_write)
    payload = bytes(range(256)) * 100
    with DirectFile(str(tmp_path / "out.bin"), buffer_bytes=BLOCK) as sink:
        sink.write(payload)
    assert refused and not sink.direct
    assert (tmp_path / "out.bin").read_bytes() == payload


def test_direct_file_rejects_unaligned_buffers_and_writes_after_close(tmp_path):
    with pytest.raises(ValueError, match="multiple of 4096"):
        DirectFile(str(tmp_path / "a"), buffer_bytes=1000)
    sink = DirectFile(str(tmp_path / "b"))
    sink.close()
    sink.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        sink.write(b"late")


def test_parquet_written_through_a_direct_file_reads_back(tmp_path):
    table = pa.table({"n": list(range(50_000)), "blob": [os.urandom(i % 300) for i in range(50_000)]})
    path = tmp_path / "t.parquet"
    sink = DirectFile(str(path))
    with pq.ParquetWriter(sink, table.schema) as writer:
        writer.write_table(table, row_group_size=20_000)
    sink.close()
    assert pq.read_table(path).equals(table)


def test_keep_freed_memory_lets_a_large_buffer_be_reused_without_faults():
    """A 24 MB buffer, freed and allocated again: with the thresholds raised the second one is the
    first's memory (no page faults); by default glibc maps it afresh or takes new heap pages."""
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    script = textwrap.dedent("""
        import resource, sys
        from kafkawire.capture_spark.worker_memory import keep_freed_memory
        if sys.argv[1] == "keep":
            assert keep_freed_memory()
        def faults():
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        size = 24 << 20
        buffer = b"x" * size
        del buffer
        before = faults()
        buffer = b"y" * size
        print(faults() - before)
    """)
    counts = {mode: int(subprocess.run([sys.executable, "-c", script, mode], check=True, capture_output=True,
                                       text=True).stdout)
              for mode in ("keep", "default")}
    pages = (24 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert counts["keep"] < pages // 20
    assert counts["default"] > pages // 2


def _file_system_type(path) -> str:
    best, kind = "", ""
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, point, fs_type, *_ = line.split()
            if str(path).startswith(point) and len(point) > len(best):
                best, kind = point, fs_type
    return kind
