"""The capture tables written to an object store: an S3-compatible HTTP server (moto's server mode) that the
test starts, a bucket, and ``kafkawire decode --out s3://bucket/... --fs-option ...`` with credentials in
the environment; the tables read back from the bucket equal a local run's (the shared local session)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
moto_server = pytest.importorskip("moto.server")
import pyarrow.parquet as pq  # noqa: E402

from capture_synthetic import build_synthetic  # noqa: E402
from paths import REPO  # noqa: E402
from kafkawire.capture.table_sets import file_system, table_names, with_options  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "kafkawire-test", "AWS_SECRET_ACCESS_KEY": "kafkawire-test-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture(scope="module")
def object_store():
    """(endpoint host:port, file-system options) of a fresh S3-compatible server with a bucket ``tables``."""
    import boto3
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"{host}:{port}"
        client = boto3.client("s3", endpoint_url=f"http://{endpoint}", aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1")
        client.create_bucket(Bucket="tables")
        yield endpoint, [f"endpoint_override={endpoint}", "scheme=http"]
    finally:
        server.stop()


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> Path:
    return build_synthetic(tmp_path_factory.mktemp("object-store")).path


def test_decode_writes_the_tables_to_a_bucket(spark, capture, object_store, tmp_path, monkeypatch):
    endpoint, options = object_store
    local = tmp_path / "local"
    job.decode(spark, [str(capture)], str(local), records=True)
    environment = {key: value for key, value in os.environ.items() if key != "PYSPARK_GATEWAY_PORT"}
    environment.update(CREDENTIALS, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    fs_options = [word for option in options for word in ("--fs-option", option)]
    done = subprocess.run([sys.executable, "-m", "kafkawire", "decode", str(capture), "--out", "s3://tables/run",
                           *fs_options, "--records"], env=environment, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"into s3://tables/run?endpoint_override={endpoint}&scheme=http" in done.stdout
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    fs, root = file_system(with_options("s3://tables/run", options))
    assert table_names(with_options("s3://tables/run", options)) == table_names(str(local))
    for name in table_names(str(local)):
        want = pq.read_table(local / name)
        got = pq.read_table(f"{root}/{name}", filesystem=fs)
        keys = [(column, "ascending") for column in want.column_names if column not in ("body", "headers",
                                                                                          "error_codes")]
        assert got.schema == want.schema and want.num_rows > 0, name
        assert got.sort_by(keys).equals(want.sort_by(keys)), name
    # a second run refuses the table set there, as it does on a local disk; --overwrite replaces it
    again = subprocess.run([sys.executable, "-m", "kafkawire", "decode", str(capture), "--out", "s3://tables/run",
                            *fs_options], env=environment, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "--overwrite" in again.stderr


@pytest.mark.parametrize("options, message", [
    (["endpoint_override"], "a file-system option is key=value"),
])
def test_bad_fs_options(options, message):
    with pytest.raises(ValueError, match=message):
        with_options("s3://tables/run", options)
    with pytest.raises(ValueError, match="need a URI"):
        with_options("tables/", ["scheme=http"])
    assert with_options("s3://b/t?region=x", ["scheme=http"]) == "s3://b/t?region=x&scheme=http"
