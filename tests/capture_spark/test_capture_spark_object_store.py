"""Captures read from and tables written to an object store: an S3-compatible HTTP server (moto's server
mode) that the test starts, buckets, and ``kafkawire decode s3://caps/... --out s3://tables/...
--fs-option ...`` with credentials in the environment; the tables read back from the bucket equal a local
run's. Inputs in the bucket: a single file, a folder, a glob, a rotated series, gzip and pcap forms, read
by the module's Spark session (conftest), whose workers get the credentials from the environment it
started in."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("moto.server")
import pyarrow.parquet as pq  # noqa: E402

import pyarrow as pa  # noqa: E402

from support.capture_synthetic import build_synthetic, rotated_series, split_blocks, write_pcap  # noqa: E402
from support.object_store import CREDENTIALS  # noqa: E402
from support.object_store import object_store as start_object_store  # noqa: E402
from support.paths import REPO  # noqa: E402
from kafkawire.capture.tables.table_sets import file_system, table_names, with_options  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def credentials():
    """The store's credentials in the environment, before the module's Spark session starts its workers."""
    saved = {key: os.environ.get(key) for key in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def store(credentials, spark):
    """The server, and its credentials for the Spark workers too: the JVM that forks them may have
    started before this module (a session stopped in an earlier module leaves it running), with
    another environment; PySpark hands ``SparkContext.environment`` to the workers it starts."""
    spark.sparkContext.environment.update(CREDENTIALS)
    with start_object_store(buckets=("tables", "spark-caps")) as started:
        yield started


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    return build_synthetic(tmp_path_factory.mktemp("object-store")).path


def _assert_same_tables(local: Path, location: str) -> None:
    """The table set at ``location`` (a URI) has the tables of ``local``, with the same rows."""
    fs, root = file_system(location)
    assert table_names(location) == table_names(str(local))
    for name in table_names(str(local)):
        want = pq.read_table(local / name)
        got = pq.read_table(f"{root}/{name}", filesystem=fs)
        keys = [(field.name, "ascending") for field in want.schema if not pa.types.is_nested(field.type)
                and field.name not in ("body", "headers")]
        assert got.schema == want.schema, name
        assert got.sort_by(keys).equals(want.sort_by(keys)), name


def test_decode_reads_a_bucket_and_writes_the_tables_to_one(spark, capture, store, tmp_path):
    local = tmp_path / "local"
    job.decode(spark, [str(capture)], str(local), records=True)
    assert pq.read_table(local / "frames").num_rows > 0
    store.put("spark-caps", "run/synthetic.pcapng", capture.read_bytes())
    environment = {key: value for key, value in os.environ.items() if key != "PYSPARK_GATEWAY_PORT"}
    environment.update(CREDENTIALS, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    fs_options = [word for option in store.options for word in ("--fs-option", option)]
    done = subprocess.run([sys.executable, "-m", "kafkawire", "decode", "s3://spark-caps/run/", "--out", "s3://tables/run",
                           *fs_options, "--records"], env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"into s3://tables/run?endpoint_override={store.endpoint}&scheme=http" in done.stdout
    _assert_same_tables(local, with_options("s3://tables/run", store.options))
    fs, root = file_system(with_options("s3://tables/run", store.options))
    summary = json.loads(fs.open_input_stream(f"{root}/_summary/summary.json").read())
    assert summary["files"] == ["s3://spark-caps/run/synthetic.pcapng"]  # named without the file-system options
    # a second run refuses the table set there, as it does on a local disk; --overwrite replaces it
    again = subprocess.run([sys.executable, "-m", "kafkawire", "decode", str(capture), "--out", "s3://tables/run",
                            *fs_options], env=environment, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "--overwrite" in again.stderr
    missing = subprocess.run([sys.executable, "-m", "kafkawire", "decode", "s3://spark-caps/nothing/*.pcap", "--out",
                              "s3://tables/other", *fs_options], env=environment, capture_output=True, text=True,
                             timeout=600)
    assert missing.returncode == 2 and "s3://spark-caps/nothing/*.pcap: no such file" in missing.stderr


def test_folders_globs_series_gzip_and_pcap_in_a_bucket_decode_as_on_disk(spark, capture, store, tmp_path):
    """Each input form decoded from the bucket (tables to the bucket) equals the same files decoded from
    disk; small splits so that the files are cut and read by ranges in several tasks."""
    series = rotated_series(build_synthetic(tmp_path), tmp_path / "series", per_file=60)
    for path in [*series, tmp_path / "series" / "notes.txt"]:
        store.put("spark-caps", f"series/{path.name}", path.read_bytes())
    blocks = split_blocks(capture.read_bytes())[2:]
    write_pcap(tmp_path / "plain.pcap", blocks)
    plain = (tmp_path / "plain.pcap").read_bytes()
    (tmp_path / "packed.pcap.gz").write_bytes(gzip.compress(plain))
    store.put("spark-caps", "forms/plain.pcap", plain)
    store.put("spark-caps", "forms/packed.pcap.gz", (tmp_path / "packed.pcap.gz").read_bytes())
    cases = {
        "folder": ([str(tmp_path / "series")], [store.uri("spark-caps/series")]),
        "glob": ([str(tmp_path / "series" / "series.pcapng*")], [store.uri("spark-caps/series/series.pcapng*")]),
        "files": ([str(tmp_path / "plain.pcap"), str(tmp_path / "packed.pcap.gz")],
                  [store.uri("spark-caps/forms/plain.pcap"), store.uri("spark-caps/forms/packed.pcap.gz")]),
    }
    for case, (local_inputs, remote_inputs) in cases.items():
        local = tmp_path / f"local-{case}"
        want = job.decode(spark, local_inputs, str(local), split_bytes=8192)
        got = job.decode(spark, remote_inputs, store.uri(f"tables/{case}"), split_bytes=8192)
        assert [name.rsplit("/", 1)[-1] for name in got.files] == [p.rsplit("/", 1)[-1] for p in want.files], case
        assert (got.splits, got.input_bytes, got.rows, got.connections) == (
            want.splits, want.input_bytes, want.rows, want.connections), case
        assert got.splits > len(got.files)
        _assert_same_tables(local, store.uri(f"tables/{case}"))


@pytest.mark.parametrize("options, message", [
    (["endpoint_override"], "a file-system option is key=value"),
])
def test_bad_fs_options(options, message):
    with pytest.raises(ValueError, match=message):
        with_options("s3://tables/run", options)
    with pytest.raises(ValueError, match="need a URI"):
        with_options("tables/", ["scheme=http"])
    assert with_options("s3://b/t?region=x", ["scheme=http"]) == "s3://b/t?region=x&scheme=http"
