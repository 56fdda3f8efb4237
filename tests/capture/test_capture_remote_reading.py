"""Captures read from an object store: an S3-compatible HTTP server (moto's server mode) started here, the
same captures on local disk and in a bucket, read through pyarrow's S3 file system by byte ranges.

- Whole reads, planned splits and unplanned byte ranges give exactly the local packets, counts and
  skipped runs of bytes (pcap both ways, pcapng, gzip, a torn tail, corrupt records that pcap resyncs
  past), also with blocks smaller than the records so that every walk crosses window ends.
- Folders, globs and a rotated series expand on the bucket as they do on disk, in capture order.
- What is read: the planning walk reads the file once in blocks, stage 1 each split once, and stage 2
  the payloads as coalesced ranges: a bound on bytes and requests, counted where every request is made.
- ``kafkawire show s3://...`` prints what ``show`` prints for the local file.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import random
import struct
from pathlib import Path

import pytest

pytest.importorskip("moto.server")

from support.capture_synthetic import build_synthetic, rotated_series, split_blocks, write_pcap  # noqa: E402
from support.object_store import CREDENTIALS, object_store  # noqa: E402
from kafkawire.capture.files import remote_files, remote_reading  # noqa: E402
from kafkawire.capture.files.inputs import expand_inputs  # noqa: E402
from kafkawire.capture.files.packets import iter_packets, iter_split  # noqa: E402
from kafkawire.capture.files.splits import plan_splits  # noqa: E402
from kafkawire.cli import main  # noqa: E402


@pytest.fixture(scope="module")
def store():
    saved = {key: os.environ.get(key) for key in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    try:
        with object_store(buckets=("reading-caps",)) as started:
            yield started
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _pcap_offsets(data: bytes) -> list[int]:
    offsets, pos = [], 24
    while pos + 16 <= len(data):
        offsets.append(pos)
        pos += 16 + struct.unpack_from("<I", data, pos + 8)[0]
    return offsets


@pytest.fixture(scope="module")
def captures(tmp_path_factory, store):
    """name -> (local path, URI in the bucket) of captures good and bad."""
    folder = tmp_path_factory.mktemp("remote")
    synthetic = build_synthetic(folder)
    blocks = split_blocks(synthetic.path.read_bytes())[2:]
    write_pcap(folder / "synthetic.pcap", blocks)
    pcap = (folder / "synthetic.pcap").read_bytes()
    offsets = _pcap_offsets(pcap)
    corrupt = bytearray(pcap)
    struct.pack_into("<I", corrupt, offsets[40] + 8, 0x7FFFFFF0)  # a captured length that cannot be right
    corrupt[offsets[100]:offsets[103]] = bytes(offsets[103] - offsets[100])  # zeros a crash left
    pcapng = synthetic.path.read_bytes()
    broken_ng = bytearray(pcapng)
    block_at = len(pcapng) - sum(map(len, blocks[-30:]))
    struct.pack_into("<I", broken_ng, block_at + 4, 13)  # a block length not a multiple of 4
    files = {"pcapng": pcapng, "pcap": pcap, "pcap.gz": gzip.compress(pcap), "pcapng.gz": gzip.compress(pcapng),
             "torn.pcap": pcap[:-700], "corrupt.pcap": bytes(corrupt), "corrupt.pcapng": bytes(broken_ng)}
    found = {}
    for name, data in files.items():
        path = folder / f"capture.{name}"
        path.write_bytes(data)
        found[name] = (str(path), store.put("reading-caps", f"one/capture.{name}", data))
    return found


def _read(path, **kwargs):
    stats, skipped = {}, []
    packets = list(iter_packets(path, 3, stats=stats, skipped=skipped, **kwargs))
    return packets, stats, skipped


def _named(skipped, path: str, uri: str):
    """Skipped runs with the local path where the bucket's capture is named (without its query)."""
    return [skip._replace(path=path, reason=skip.reason.replace(uri.split("?")[0], path)) for skip in skipped]


@pytest.fixture(params=["default blocks", "small blocks"])
def blocks(request, monkeypatch):
    """Blocks and tails smaller than many records, so that the walks cross window ends everywhere."""
    if request.param == "small blocks":
        monkeypatch.setattr(remote_files, "BLOCK_BYTES", 1500)
        monkeypatch.setattr(remote_reading, "TAIL_BYTES", 700)
    return request.param


@pytest.mark.parametrize("name", ["pcapng", "pcap", "pcap.gz", "pcapng.gz", "torn.pcap", "corrupt.pcap",
                                  "corrupt.pcapng"])
def test_whole_reads_equal_local_ones(captures, name, blocks):
    path, uri = captures[name]
    for payloads in (True, False):
        want, want_stats, want_skipped = _read(path, payloads=payloads)
        got, stats, skipped = _read(uri, payloads=payloads)
        assert got == want and stats == want_stats, (name, payloads)
        assert _named(skipped, path, uri) == want_skipped
        assert all(skip.path == uri.split("?")[0] for skip in skipped)  # no file-system options in names
    if name.startswith("corrupt"):
        assert want_stats["corrupt"] >= 1
    if name == "torn.pcap":
        assert want_stats["truncated_tail"] == 1


@pytest.mark.parametrize("name", ["pcapng", "pcap", "pcap.gz", "torn.pcap", "corrupt.pcap"])
def test_planned_splits_and_unplanned_ranges_read_the_whole_file(captures, name, blocks):
    path, uri = captures[name]
    whole, whole_stats, _ = _read(path, payloads=False)
    size = os.path.getsize(path)
    # one-byte splits (every record its own) with the default blocks; with small blocks, splits of a
    # few records, which cross window ends as much and cost a few hundred requests fewer
    smallest = 1 if blocks == "default blocks" else 600
    for split_bytes in (smallest, 4096, 20_000, size):
        local = plan_splits(path, 3, split_bytes)
        remote = plan_splits(uri, 3, split_bytes)
        if not name.startswith(("corrupt", "torn")):
            assert [s[2:4] for s in remote] == [s[2:4] for s in local], split_bytes
        stats: dict = {}
        assert [p for split in remote for p in iter_split(split, stats, payloads=False)] == whole, split_bytes
        assert stats == whole_stats
    if name.endswith(".gz"):
        return
    rng = random.Random(name)
    for _ in range(3):  # byte ranges nobody planned: each finds its first record itself, as it does locally
        cuts = sorted({0, size} | {rng.randrange(size) for _ in range(5)})
        got = [p for start, end in zip(cuts, cuts[1:]) for p in iter_packets(uri, 3, start, end, payloads=False)]
        assert got == [p for start, end in zip(cuts, cuts[1:])
                       for p in iter_packets(path, 3, start, end, payloads=False)], cuts
        if not name.startswith("corrupt"):  # a resync can land past a corrupt header's neighbours
            assert got == whole


def test_folders_globs_and_rotated_series_expand_on_the_bucket(tmp_path, store):
    synthetic = build_synthetic(tmp_path)
    paths = rotated_series(synthetic, tmp_path / "series", per_file=60)
    names = [path.name for path in paths]
    random.Random(1).shuffle(names)  # put in another order than the series'
    for name in names + ["notes.txt"]:
        store.put("reading-caps", f"series/{name}", (tmp_path / "series" / name).read_bytes())
    store.put("reading-caps", "series/deeper/again.pcapng", paths[0].read_bytes())
    want = [store.uri(f"reading-caps/series/{path.name}") for path in paths]
    assert len(want) >= 4
    assert [u for u in expand_inputs([store.uri("reading-caps/series")]) if "deeper" not in u] == want
    assert expand_inputs([store.uri("reading-caps/series/series.pcapng*")]) == want  # the glob leaves notes.txt out
    assert expand_inputs([store.uri("reading-caps/*/series.pcapng*")]) == want
    assert expand_inputs([store.uri("reading-caps/series/**/again.pcapng")]) == [store.uri("reading-caps/series/deeper/again.pcapng")]
    assert expand_inputs([store.uri(f"reading-caps/series/{paths[2].name}")]) == [want[2]]
    local = expand_inputs([f"file://{tmp_path / 'series'}"])
    assert [Path(p).name for p in local] == [path.name for path in paths]
    with pytest.raises(FileNotFoundError, match="s3://reading-caps/nothing-here: no such file"):
        expand_inputs([store.uri("reading-caps/nothing-here")])
    with pytest.raises(FileNotFoundError, match="no files match"):
        expand_inputs([store.uri("reading-caps/series/*.pcap")])


@pytest.fixture
def counted(monkeypatch):
    """Every request to the object store from this process: (offset, length) in order, per file."""
    seen: dict[str, list[tuple[int, int]]] = {}
    original = remote_files.RemoteFile.read_at

    def read_at(self, offset, length):
        data = original(self, offset, length)
        if data:
            seen.setdefault(self.name, []).append((offset, len(data)))
        return data

    monkeypatch.setattr(remote_files.RemoteFile, "read_at", read_at)
    return seen


def test_reads_are_blocks_and_coalesced_ranges(tmp_path, store, counted, monkeypatch):
    """A capture of 5,000 packets on 8 interleaved connections, blocks of 64 KB: planning reads the file
    once in blocks (and its head), stage 1 each split once, and stage 2 (one task, every connection) the
    payloads as coalesced ranges, far fewer requests than packets, each byte about once."""
    from kafkawire.capture_spark.decode_stage import decode_partition
    from kafkawire.capture_spark.plan import plan_captures
    from kafkawire.capture_spark.read_stage import read_splits

    synthetic = build_synthetic(tmp_path)
    blocks = split_blocks(synthetic.path.read_bytes())[2:]
    write_pcap(tmp_path / "big.pcap", blocks * 16)  # the same conversations again and again
    data = (tmp_path / "big.pcap").read_bytes()
    size = len(data)
    uri = store.put("reading-caps", "counted/big.pcap", data)
    name = uri.split("?")[0]
    monkeypatch.setattr(remote_files, "BLOCK_BYTES", 64 << 10)

    plan = plan_captures([uri], 256 << 10, sample_spacing=32 << 10, sample_window=4 << 10)
    planning = counted.pop(name)
    assert sum(length for _, length in planning) <= 1.02 * size + (64 << 10)  # the heads: a few KB
    assert len(planning) <= size // (64 << 10) + 4  # the head (twice: expanding, ordering), then blocks
    assert len(plan.splits) >= 4 and plan.sampled_bytes

    rows = list(read_splits(plan.splits)(range(len(plan.splits))))
    reading = counted.pop(name)
    packets = sum(len(row[1][1]) // 40 for row in rows)
    assert packets >= 4000
    assert sum(length for _, length in reading) <= 1.1 * size
    assert len(reading) <= len(plan.splits) * (256 << 10) // (64 << 10) * 2

    rows.sort(key=lambda row: row[0])
    out = tmp_path / "tables"
    written = list(decode_partition(plan.files, str(out), None, False, task=(0, 0))(iter(rows)))
    payload = counted.pop(name)
    assert sum(length for _, length in payload) <= 1.1 * size
    assert len(payload) * 50 <= packets
    local = plan_captures([str(tmp_path / "big.pcap")], 256 << 10, sample_spacing=32 << 10, sample_window=4 << 10)
    local_rows = sorted(read_splits(local.splits)(range(len(local.splits))), key=lambda row: row[0])
    import pyarrow.parquet as pq
    local_out = tmp_path / "local-tables"
    local_written = list(decode_partition(local.files, str(local_out), None, False, task=(0, 0))(iter(local_rows)))
    assert [(t, f, n) for t, f, n in written] == local_written
    for table, file, _ in written:
        assert pq.read_table(out / file).equals(pq.read_table(local_out / file)), table


def test_carried_payloads_read_the_store_once_in_stage_1(tmp_path, store, counted, monkeypatch):
    """With a local master the job carries a remote capture's payloads in the chunks: stage 1 reads each
    split once, stage 2 reads nothing from the store, and the tables are those of the local file."""
    from kafkawire.capture_spark.decode_stage import decode_partition
    from kafkawire.capture_spark.plan import plan_captures
    from kafkawire.capture_spark.read_stage import read_splits
    import pyarrow.parquet as pq

    synthetic = build_synthetic(tmp_path)
    data = synthetic.path.read_bytes()
    uri = store.put("reading-caps", "carried/synthetic.pcapng", data)
    name = uri.split("?")[0]
    monkeypatch.setattr(remote_files, "BLOCK_BYTES", 16 << 10)
    plan = plan_captures([uri], 32 << 10, sample_spacing=8 << 10, sample_window=2 << 10)
    counted.pop(name)
    rows = sorted(read_splits(plan.splits, carry_remote=True)(range(len(plan.splits))), key=lambda row: row[0])
    assert all(row[1][2] is not None for row in rows)  # every chunk carries its payloads
    assert sum(length for _, length in counted.pop(name)) <= 1.1 * len(data)
    written = list(decode_partition(plan.files, str(tmp_path / "carried"), None, False, task=(0, 0))(iter(rows)))
    assert name not in counted  # stage 2 read nothing from the store
    local = plan_captures([str(synthetic.path)], 32 << 10, sample_spacing=8 << 10, sample_window=2 << 10)
    local_rows = sorted(read_splits(local.splits)(range(len(local.splits))), key=lambda row: row[0])
    local_written = list(decode_partition(local.files, str(tmp_path / "local"), None, False,
                                          task=(0, 0))(iter(local_rows)))
    assert written == local_written
    for table, file, _ in written:
        assert pq.read_table(tmp_path / "carried" / file).equals(pq.read_table(tmp_path / "local" / file)), table


def _show(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["show", *args])
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", ["pcapng", "pcap.gz", "torn.pcap"])
def test_show_on_the_bucket_prints_what_show_prints_locally(captures, store, name):
    path, uri = captures[name]
    options = [word for option in store.options for word in ("--fs-option", option)]
    for extra in ([], ["--json"]):
        status, local, _ = _show(path, *extra)
        assert status == 0
        remote_status, remote, err = _show(uri.split("?")[0], *options, *extra)
        assert remote_status == 0, err
        assert remote.replace(uri.split("?")[0], path) == local and len(local.splitlines()) > 20
    status, _, err = _show(store.uri("reading-caps/one/missing.pcap").split("?")[0], *options)
    assert status == 2 and "missing.pcap: no such file" in err
