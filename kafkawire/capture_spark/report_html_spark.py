"""The HTML report's chart figures (``capture.reporting.html.series``: the definitions) with Spark SQL,
for tables too large for the driver or behind a URI; the other engine is
``capture.reporting.html.series_arrow``. Spark groups the rows; only the groups, bounded by the time
buckets and the keys, come back to the driver."""
from __future__ import annotations

from ..capture.reporting.html.series import FILL_BINS, SPANNED, TALLIES, ChartData, Tally, bucket_width, shape
from ..capture.reporting.report import PERCENTILES
from ..capture.tables.table_sets import BODIES


def compute(spark, out_dir: str) -> ChartData:
    """The ChartData of the tables in ``out_dir``, computed with Spark SQL on ``spark``."""
    from pyspark.sql import functions as F

    out = str(out_dir).rstrip("/")
    tables = {name: spark.read.parquet(f"{out}/{name}") for name in SPANNED}
    spans = [tables[name].agg(F.min(F.unix_micros("ts")).alias("first"), F.max(F.unix_micros("ts")).alias("last"))
             .first() for name in SPANNED]
    if spans[0]["first"] is None:  # no frames
        return shape(None, 1, {}, [], {})
    first = min(span["first"] for span in spans if span["first"] is not None)
    width = bucket_width(first, max(span["last"] for span in spans if span["last"] is not None))
    frames = tables["frames"]
    tables["commits"] = _commits(spark, out)
    tables["response_errors"] = frames.where(F.col("direction") == "response").select(
        "api_name", F.explode("error_codes").alias("error_code"))
    tallies = {name: _tally(F, tables[tally.table], tally, width) for name, tally in TALLIES.items()}
    answered = tables["fetches"].where(F.col("response_size").isNotNull())
    return shape(first, width, tallies, _latency(F, frames), _fills(F, answered))


def _condition(F, condition):
    op, column = condition[0], F.col(condition[1])
    test = (column == condition[2] if op == "eq" else column.isin(list(condition[2])) if op == "in"
            else column.isNotNull())
    return F.coalesce(test, F.lit(False))


def _tally(F, table, tally: Tally, width: int) -> list[tuple]:
    for condition in tally.conditions:
        table = table.where(_condition(F, condition))
    bucket = (F.expr(f"unix_micros(ts) div {width}") if tally.timed else F.lit(None)).alias("bucket")
    figure = (F.count(F.lit(1)) if tally.how == "count" else
              F.sum(F.coalesce(F.col(tally.value).cast("long"), F.lit(0))) if tally.how == "sum" else
              F.max(F.col(tally.value).cast("long"))).alias("figure")
    rows = table.groupBy(bucket, *tally.keys).agg(figure).collect()
    return [tuple(row) for row in rows]


def _commits(spark, out: str):
    """One row per partition an OffsetCommit request commits (``series_arrow``'s ``commits``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType, TimestampType

    try:
        requests = spark.read.parquet(f"{out}/{BODIES}/OffsetCommitRequest")
    except Exception as error:  # no such table: the capture has no OffsetCommit request
        if "PATH_NOT_FOUND" not in str(error) and "Path does not exist" not in str(error):
            raise
        return spark.createDataFrame([], StructType([
            StructField("ts", TimestampType()), StructField("group_id", StringType()),
            StructField("topic", StringType()), StructField("partition", IntegerType()),
            StructField("committed_offset", LongType())]))
    topics = requests.select("ts", F.col("body.group_id").alias("group_id"), F.explode("body.topics").alias("t"))
    partitions = topics.select("ts", "group_id", F.col("t.name").alias("topic"), F.explode("t.partitions").alias("p"))
    return partitions.select("ts", "group_id", "topic", F.col("p.partition_index").alias("partition"),
                             F.col("p.committed_offset").alias("committed_offset"))


def _latency(F, frames) -> list[dict]:
    """Per API and version, nearest-rank percentiles: each group's latencies ranked in one sort."""
    from pyspark.sql.window import Window

    timed = frames.where((F.col("direction") == "response") & F.col("latency_ms").isNotNull())
    group = Window.partitionBy("api_name", "api_version")
    ranked = timed.select("api_name", "api_version", "latency_ms").withColumn(
        "rank", F.row_number().over(group.orderBy("latency_ms"))).withColumn("n", F.count("*").over(group))
    wanted = {p: F.expr(f"(n * {p} + 99) div 100") for p in PERCENTILES}
    rows = ranked.groupBy("api_name", "api_version").agg(
        F.max("n").alias("responses"), F.max("latency_ms").alias("max"),
        *[F.max(F.when(F.col("rank") == rank, F.col("latency_ms"))).alias(f"p{p}") for p, rank in wanted.items()]
    ).collect()
    return [dict(api_name=row["api_name"], api_version=row["api_version"], responses=row["responses"],
                 **{f"p{p}": row[f"p{p}"] for p in PERCENTILES}, max=row["max"]) for row in rows]


def _fills(F, answered) -> dict[str, list[tuple]]:
    """The fill tallies (``series.fill_figures``) of responses and of partitions, as ``series_arrow._fill``."""
    responses = answered.groupBy("connection", "correlation_id").agg(
        F.sum(F.coalesce(F.col("records_bytes"), F.lit(0))).alias("size"),
        F.max(F.col("max_bytes").cast("long")).alias("limit"),
        F.sum(F.coalesce(F.col("batch_count").cast("long"), F.lit(0))).alias("batches"))
    partitions = answered.select(F.coalesce(F.col("records_bytes"), F.lit(0)).alias("size"),
                                 F.col("partition_max_bytes").cast("long").alias("limit"),
                                 F.coalesce(F.col("batch_count").cast("long"), F.lit(0)).alias("batches"))
    return {"responses": _fill(F, responses), "partitions": _fill(F, partitions)}


def _fill(F, rows) -> list[tuple]:
    size, limit, batches = F.col("size"), F.col("limit"), F.col("batches")
    with_limit = rows.where(limit.isNotNull() & (limit > 0))
    bin_ = F.when(size > limit, F.lit(FILL_BINS)).otherwise(
        F.least(F.expr(f"(size * {FILL_BINS}) div `limit`"), F.lit(FILL_BINS - 1)))
    mean = F.when(batches > 0, F.expr("size div batches")).otherwise(F.lit(0))
    bound = (size > 0) & (size + mean > limit)
    grouped = with_limit.groupBy(bin_.cast("int").alias("bin"), bound.alias("bound")).count().collect()
    return sorted((row["bin"], bool(row["bound"]), row["count"]) for row in grouped)
