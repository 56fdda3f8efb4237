"""Transactions in captures decoded on Spark: the synthetic capture of kafkawire-encoded transactional
traffic (``capture_transactions``) gives the same tables as in process, and the Spark report engine
the same transactions view and problems as the Arrow one. One local Spark session serves the module."""
from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
import pyarrow.parquet as pq  # noqa: E402

import capture_transactions as synthetic  # noqa: E402
from capture_in_process import decode_in_process  # noqa: E402
from kafkawire.capture import report  # noqa: E402
from kafkawire.capture.table_sets import TABLE_ORDER  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402
from kafkawire.capture_spark.report_spark import build  # noqa: E402

pytestmark = [pytest.mark.xdist_group("spark"),
              pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")]


def rows(out, table: str) -> list[dict]:
    return sorted(pq.read_table(out / table).to_pylist(), key=repr)


@pytest.fixture(scope="module")
def decoded(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("transactions_spark")
    capture = synthetic.build(folder / "transactions.pcapng")
    job.decode(spark, [str(capture)], str(folder / "spark"), records=True)
    return {"spark": folder / "spark", "local": decode_in_process(capture, folder / "local")}


def test_synthetic_tables_agree_with_in_process(decoded):
    for table in TABLE_ORDER:
        assert rows(decoded["spark"], table) == rows(decoded["local"], table), table


def test_synthetic_report_engines_agree(spark, decoded):
    by_spark = build(spark, str(decoded["spark"]))
    assert by_spark.transactions == synthetic.EXPECTED_TRANSACTIONS
    assert {row["kind"]: row["count"] for row in by_spark.problems} == {
        kind: len(reasons) for kind, reasons in synthetic.EXPECTED_PROBLEMS.items()}
    assert by_spark == report.build_arrow(str(decoded["spark"]))
