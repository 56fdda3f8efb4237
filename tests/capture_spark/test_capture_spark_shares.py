"""Share groups (KIP-932) in a real capture decoded on Spark: the same tables as in process, and the
Spark report engine's share view the same as the Arrow one's and as what the test did
(``capture_shares``; the tables' and view's own checks are in tests/capture/test_capture_shares.py).

One local Spark session serves the module."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
from support import capture_shares as workload_of  # noqa: E402
from support.capture_in_process import decode_in_process  # noqa: E402

from kafkawire.capture.reporting import report  # noqa: E402
from kafkawire.capture.tables.table_sets import table_names  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402
from kafkawire.capture_spark.report_spark import build  # noqa: E402

pytestmark = pytest.mark.xdist_group("spark")


def rows(out, table: str) -> list[dict]:
    return sorted(pq.read_table(out / table).to_pylist(), key=repr)


@pytest.fixture(scope="module")
def decoded(spark, tmp_path_factory):
    pytest.importorskip("confluent_kafka")
    folder = tmp_path_factory.mktemp("shares_spark")
    workload = workload_of.capture_shares(folder)
    job.decode(spark, [str(workload.capture)], str(folder / "spark"), records=True)
    return workload, folder / "spark", decode_in_process(workload.capture, folder / "local")


def test_share_tables_agree_with_in_process(decoded):
    _, spark_out, local_out = decoded
    assert table_names(str(spark_out)) == table_names(str(local_out))
    for table in ("share_acquisitions", "share_acknowledgements", "records"):
        assert rows(spark_out, table) == rows(local_out, table), table
    assert {r["topic"] for r in rows(spark_out, "share_acquisitions")} == set(workload_of.TOPICS.values())


def test_share_view_engines_agree(spark, decoded):
    workload, spark_out, _ = decoded
    by_spark = build(spark, str(spark_out), delivery_limit=workload_of.DELIVERY_LIMIT)
    assert by_spark.share_records == workload_of.expected_share_records(workload)
    assert by_spark == report.build_arrow(str(spark_out), delivery_limit=workload_of.DELIVERY_LIMIT)
