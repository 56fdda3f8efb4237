"""The capture job's planning and stages without Spark: the plan (splits joined from the planning walk's
pieces, sampled connections, partitions balanced by them), stage 1's chunk rows and stage 2's view of
them, the planning child process, and the workers' daemon. (The job on Spark: test_capture_spark_job.py.)
"""
from __future__ import annotations

import gzip
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from support.capture_synthetic import Synthetic, build_synthetic, rotated_series
from kafkawire.capture.model import connection_key
from kafkawire.capture.files.packets import iter_split
from kafkawire.capture.files.payloads import PayloadReader
from kafkawire.capture.files.reading import NotACaptureError
from kafkawire.capture.files.splits import Split, plan_splits
from kafkawire.capture_spark import chunks
from kafkawire.capture_spark.background_plan import BackgroundPlan
from kafkawire.capture_spark.decode_stage import connections_of
from kafkawire.capture_spark.plan import ConnectionPartitioner, balanced_partitions, plan_captures
from kafkawire.capture_spark.read_stage import read_splits


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> Synthetic:
    return build_synthetic(tmp_path_factory.mktemp("capture_stages"))


@pytest.fixture
def workdir(tmp_path) -> Path:
    return tmp_path


def _payload_by_connection(splits) -> dict[str, int]:
    counts: dict[str, int] = {}
    for split in splits:
        for packet in iter_split(split, payloads=False):
            key = connection_key(*packet[2:6])
            counts[key] = counts.get(key, 0) + packet.payload_length
    return counts


def test_plan_captures_joins_pieces_into_splits_and_samples_connections(synthetic):
    """The planning walk's pieces, joined into splits, read the same packets as one read of the file;
    windows as long as the pieces sample every packet, shorter ones a part of each connection's."""
    path = str(synthetic.path)
    whole = list(iter_split(plan_splits(path, 0)[0]))
    exact = _payload_by_connection(plan_splits(path, 0))
    for spacing, split_bytes in ((3000, 20_000), (4096, 4096), (5000, 1 << 30)):
        every = plan_captures([path], split_bytes, sample_spacing=spacing, sample_window=spacing)
        assert [p for split in every.splits for p in iter_split(split)] == whole
        assert all(s.end is None or s.end - s.start >= split_bytes for s in every.splits[:-1])
        assert [(s.start, s.end) for s in every.splits] == sorted((s.start, s.end) for s in every.splits)
        assert every.sampled_bytes == exact and every.input_bytes == synthetic.path.stat().st_size
        part = plan_captures([path], split_bytes, sample_spacing=spacing, sample_window=spacing // 4)
        assert part.splits == every.splits
        assert 0 < sum(part.sampled_bytes.values()) < sum(exact.values())
        assert all(part.sampled_bytes[key] <= exact[key] for key in part.sampled_bytes)


def test_plan_captures_of_a_gzip_file_is_one_split_unsampled(synthetic, workdir):
    packed = workdir / "plan.pcapng.gz"
    packed.write_bytes(gzip.compress(synthetic.path.read_bytes()))
    plan = plan_captures([str(packed)], 4096, sample_spacing=4096)
    assert plan.splits == [Split(str(packed), 0, 0, None, None)] and plan.sampled_bytes == {}


@pytest.mark.parametrize("limits", [(4096, 64 << 20, 1 << 20), (3, 64 << 20, 1 << 20), (5, 2000, 7)])
@pytest.mark.parametrize("packed", [False, True])
def test_chunk_rows_give_back_every_packet_in_order(synthetic, workdir, monkeypatch, limits, packed):
    """Stage 1's chunk rows, sorted as the shuffle sorts them, unpack to each connection's packets in
    capture order, payloads included, whether chunks close at their packet limit or because the task's
    open chunks hold too much (small limits here), and whether payloads stay in the file or ride along
    (gzip)."""
    monkeypatch.setattr(chunks, "MAX_PACKETS", limits[0])
    monkeypatch.setattr(chunks, "MAX_OPEN_PAYLOAD", limits[1])
    monkeypatch.setattr(chunks, "MAX_OPEN_PACKETS", limits[2])
    path = synthetic.path
    if packed:
        path = workdir / "chunks.pcapng.gz"
        path.write_bytes(gzip.compress(synthetic.path.read_bytes()))
    splits = plan_splits(str(path), 0, 4096)
    rows = sorted(read_splits(splits)(iter(range(len(splits)))), key=lambda row: row[0])
    whole = list(iter_split(plan_splits(str(path), 0)[0]))
    expected: dict[str, list] = {}
    for packet in whole:
        expected.setdefault(connection_key(*packet[2:6]), []).append(packet)
    assert all((payloads is not None) == packed for _, (_, _, payloads) in rows)
    if limits[0] == 4096 and not packed:
        assert len(rows) < len(whole) // 10  # few rows for the shuffle
    with PayloadReader([str(path)]) as reader:
        got = {connection: list(packets) for connection, packets in connections_of(iter(rows), reader)}
    assert got == expected


def test_one_task_reading_plain_and_gzip_files_of_a_series(synthetic, workdir):
    """A stage-1 task takes several splits: reading a rotated series whose files alternate plain and
    gzip, one task's connections go from payloads left in the files to carried ones and back, and
    each chunk holds one kind."""
    files = rotated_series(synthetic, workdir / "task-series")
    for path in files[1::2]:
        path.with_name(path.name + ".gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    plan = plan_captures([str(workdir / "task-series")])
    rows = sorted(read_splits(plan.splits)(iter(range(len(plan.splits)))), key=lambda row: row[0])
    assert {payloads is None for _, (_, _, payloads) in rows} == {True, False}
    expected: dict[str, list] = {}
    for index, path in enumerate(plan.files):
        for packet in iter_split(plan_splits(path, index)[0]):
            expected.setdefault(connection_key(*packet[2:6]), []).append(packet)
    with PayloadReader(plan.files) as reader:
        got = {connection: list(packets) for connection, packets in connections_of(iter(rows), reader)}
    assert got == expected


def test_background_plan_is_the_plan_and_brings_back_errors(synthetic, workdir):
    assert BackgroundPlan([synthetic.path], 4096).result() == plan_captures([str(synthetic.path)], 4096)
    bogus = workdir / "plan-notes.pcap"
    bogus.write_text("not a capture")
    with pytest.raises(NotACaptureError, match="plan-notes.pcap: not a packet capture") as caught:
        BackgroundPlan([bogus], 4096).result()
    assert caught.value.path == str(bogus)
    with pytest.raises(FileNotFoundError, match="no files match it"):
        BackgroundPlan([str(workdir / "nothing-here-*.pcap")], 4096).result()
    pending = BackgroundPlan([synthetic.path], 4096)
    pending.cancel()  # given up on: the child is gone
    assert pending._child.returncode is not None


def test_decode_command_from_a_script_without_a_main_guard(synthetic, workdir):
    """The planning child is not a multiprocessing spawn, which would run the calling script again."""
    script = workdir / "unguarded.py"
    out = workdir / "unguarded-tables"
    script.write_text("import sys\nfrom kafkawire.cli import main\nprint('script ran')\n"
                      f"sys.exit(main(['decode', {str(synthetic.path)!r}, '--out', {str(out)!r}]))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("script ran") == 1 and "decoded 1 file(s)" in done.stdout
    assert pq.read_table(out / "frames").num_rows > 0


def test_balanced_partitions_even_out_the_sampled_bytes():
    rng = random.Random(7)
    for _ in range(200):
        sizes = {f"10.1.0.{n}:{40000 + n}-10.0.0.1:9092": rng.choice([1, 10, 100, 1000]) * rng.randint(1, 50)
                 for n in range(rng.randint(1, 60))}
        partitions = rng.randint(1, 12)
        chosen = balanced_partitions(sizes, partitions)
        assert set(chosen) == set(sizes) and all(0 <= p < partitions for p in chosen.values())
        loads = [0] * partitions
        for key, count in sizes.items():
            loads[chosen[key]] += count
        # largest first, each to the least loaded: no partition exceeds another by more than its smallest item
        for p, load in enumerate(loads):
            smallest = min((sizes[k] for k, q in chosen.items() if q == p), default=0)
            assert load - min(loads) <= smallest
        assert balanced_partitions(dict(reversed(list(sizes.items()))), partitions) == chosen
    # beyond the limit, connections keep their hash partition and count there first
    sizes = {"a": 50, "b": 40, "c": 1, "d": 1}
    chosen = balanced_partitions(sizes, 2, limit=2)
    assert set(chosen) == {"a", "b"} and chosen["a"] != chosen["b"]
    partitioner = ConnectionPartitioner(chosen)
    assert [partitioner((key, 0)) % 2 for key in "ab"] == [chosen["a"], chosen["b"]]
    assert partitioner(("c", 5)) == zlib.crc32(b"c") and ConnectionPartitioner()(("a", 1)) == zlib.crc32(b"a")

def test_daemon_leaves_out_spark_zips_only_when_the_package_is_installed(monkeypatch, tmp_path):
    from kafkawire.capture_spark import daemon as spark_daemon

    path = ["/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-0.10.9.9-src.zip", "/app/deps.zip",
            *[entry for entry in sys.path if not entry.endswith(".zip")]]
    assert spark_daemon._without_spark_zips(path) == path[2:]
    monkeypatch.setattr(sys, "path", list(path))
    spark_daemon._prefer_installed_pyspark()
    assert sys.path == path[2:]  # this venv has pyspark and py4j installed
    bare = ["/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-0.10.9.9-src.zip", str(tmp_path)]
    monkeypatch.setattr(sys, "path", list(bare))
    spark_daemon._prefer_installed_pyspark()
    assert sys.path == bare  # PySpark only in its zip: left as it is
