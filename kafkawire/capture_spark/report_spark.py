"""The report's figures with Spark SQL, for tables too large for the driver or behind a URI (see
``capture.reporting.report``: the definitions, and the order, which ``report.ordered`` applies; the other
engine, ``capture.reporting.report_arrow``, needs no Spark)."""
from __future__ import annotations

from ..capture.kafka.authentication import AUTHENTICATED, FAILED, INCOMPLETE
from ..capture.reporting.report import PERCENTILES, STARVED_AFTER, Report, ordered, versions_text
from ..capture.tables.table_sets import BODIES, FRAME_KEY
from ..capture.reporting.shares import (
    ACKNOWLEDGEMENT_COLUMNS, ACQUISITION_COLUMNS, DEFAULT_DELIVERY_LIMIT, share_view,
)
from ..capture.reporting.transactions import (
    FRAME_COLUMNS, PRODUCE_COLUMNS, TXN_API_KEYS, TXN_MESSAGES, follow, frame_rows, problem_summary,
)

_LONG_MIN = -(1 << 63)


def build(spark, out_dir: str, starved_after: int = STARVED_AFTER, delivery_limit: int | None = None) -> Report:
    """The report of the tables in ``out_dir``, computed with Spark SQL on ``spark``."""
    return ordered(compute(spark, str(out_dir).rstrip("/"), starved_after,
                           DEFAULT_DELIVERY_LIMIT if delivery_limit is None else delivery_limit))


def compute(spark, out: str, starved_after: int, delivery_limit: int = DEFAULT_DELIVERY_LIMIT) -> Report:
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    frames = spark.read.parquet(f"{out}/frames")
    fetches = spark.read.parquet(f"{out}/fetches")
    produces = spark.read.parquet(f"{out}/produces")
    problems = spark.read.parquet(f"{out}/problems")
    connections = spark.read.parquet(f"{out}/connections")
    report = Report()

    is_request = F.col("direction") == "request"
    per_api = frames.groupBy("api_name").agg(
        F.sum(is_request.cast("long")).alias("requests"),
        F.sum((~is_request).cast("long")).alias("responses"),
        F.sum(F.when(~is_request & (F.size(F.coalesce("error_codes", F.array())) > 0), 1).otherwise(0)
              ).alias("errors"),
        F.min("api_version").alias("low"), F.max("api_version").alias("high"),
        F.max("latency_ms").alias("max"),
    )
    # Nearest-rank percentiles: each API's latencies ranked in one sort (a window per API).
    latencies = frames.where(F.col("latency_ms").isNotNull()).select("api_name", "latency_ms")
    per_name = Window.partitionBy("api_name")
    ranked = latencies.withColumn("rank", F.row_number().over(per_name.orderBy("latency_ms"))).withColumn(
        "n", F.count("*").over(per_name))
    wanted = {p: F.expr(f"(n * {p} + 99) div 100") for p in PERCENTILES}
    picked = ranked.where(_any(F, [F.col("rank") == rank for rank in wanted.values()]))
    percentiles = {row["api_name"]: row for row in picked.groupBy("api_name").agg(
        *[F.max(F.when(F.col("rank") == rank, F.col("latency_ms"))).alias(f"p{p}")
          for p, rank in wanted.items()]).collect()}
    for row in per_api.collect():
        pct = percentiles.get(row["api_name"])
        report.apis.append(dict(api_name=row["api_name"], versions=versions_text(row["low"], row["high"]),
                                requests=row["requests"], responses=row["responses"], errors=row["errors"],
                                **{f"p{p}": pct[f"p{p}"] if pct else None for p in PERCENTILES}, max=row["max"]))

    per_client = frames.groupBy("client").agg(
        F.max("client_id").alias("client_id"),
        F.sum(F.when(is_request, F.col("size") + 4).otherwise(0)).alias("sent"),
        F.sum(F.when(~is_request, F.col("size") + 4).otherwise(0)).alias("received"),
    )
    report.clients = [row.asDict() for row in per_client.collect()]

    earliest = F.min(F.struct(F.coalesce(F.unix_micros("ts"), F.lit(_LONG_MIN)).alias("at"), F.col("reason")))
    report.problems = [dict(kind=row["kind"], count=row["count"], example=row["first"]["reason"])
                       for row in problems.groupBy("kind").agg(
                           F.count("*").alias("count"), earliest.alias("first")).collect()]

    outcomes = (AUTHENTICATED, FAILED, INCOMPLETE)
    report.authentications = [
        dict(mechanism=row["sasl_mechanism"], user=row["sasl_user"], **{outcome: row[outcome] for outcome in outcomes})
        for row in connections.where(F.col("authentication").isNotNull()).groupBy("sasl_mechanism", "sasl_user").agg(
            *[F.sum((F.col("authentication") == outcome).cast("long")).alias(outcome) for outcome in outcomes]
        ).collect()]
    report.tls = [dict(server_name=row["tls_server_name"], version=row["tls_version"], connections=row["count"])
                  for row in connections.where(F.col("tls")).groupBy("tls_server_name", "tls_version").count().collect()]

    answered = fetches.where(F.col("response_size").isNotNull())
    first_batch = F.coalesce(F.col("first_batch_bytes"), F.lit(0))
    in_order = Window.partitionBy("connection", "correlation_id").orderBy(
        *[F.asc_nulls_first(name) for name in ("request_index", "topic", "topic_id", "partition",
                                               "first_batch_bytes")])
    with_data = answered.where(F.col("records_bytes") > 0).withColumn("rank", F.row_number().over(in_order))
    per_response = with_data.groupBy("connection", "correlation_id").agg(
        F.sum("records_bytes").alias("bytes"), F.max("max_bytes").alias("max_bytes"),
        F.max(F.when(F.col("rank") == 1, first_batch)).alias("first_batch"))
    report.oversized_responses = [row.asDict() for row in per_response.where(
        F.col("bytes") > F.greatest("max_bytes", "first_batch")).collect()]
    report.oversized_partitions = [row.asDict() for row in answered.where(
        F.col("partition_max_bytes").isNotNull()
        & (F.col("records_bytes") > F.greatest("partition_max_bytes", first_batch))).select(
        "connection", "correlation_id", "topic", "partition", "records_bytes", "partition_max_bytes",
        "topic_id").collect()]

    # Runs of consecutive starved fetches per (connection, partition): a fetch that brought data, or
    # found none waiting, ends a run.
    key = ["connection", F.coalesce("topic", "topic_id").alias("topic"), "partition"]
    fetched = answered.select(*key, "ts", "correlation_id", (
        (F.col("records_bytes") == 0) & (F.col("high_watermark") > F.col("fetch_offset"))).alias("starved"))
    by_time = Window.partitionBy("connection", "topic", "partition").orderBy("ts", "correlation_id")
    runs = fetched.withColumn("run", F.sum(F.when(F.col("starved"), 0).otherwise(1)).over(by_time))
    starved = runs.where("starved").groupBy("connection", "topic", "partition", "run").agg(
        F.count("*").alias("length")).groupBy("connection", "topic", "partition").agg(
        F.max("length").alias("longest")).where(F.col("longest") >= starved_after)
    report.starved = [row.asDict() for row in starved.collect()]

    report.transactions, problems_of_transactions = _transactions(spark, F, out, frames, produces)
    report.problems += problem_summary(problems_of_transactions)
    report.share_groups, report.share_records, problems_of_shares = _shares(spark, F, out, frames, delivery_limit)
    report.problems += problem_summary(problems_of_shares)

    counts = frames.groupBy("direction").count().collect()
    report.totals = {"frames": sum(r["count"] for r in counts),
                     "requests": sum(r["count"] for r in counts if r["direction"] == "request"),
                     "responses": sum(r["count"] for r in counts if r["direction"] == "response"),
                     "fetches": fetches.count(), "produces": produces.count(), "connections": connections.count()}
    if _exists(spark, f"{out}/records"):  # the records table exists only with --records
        report.totals["records"] = spark.read.parquet(f"{out}/records").count()
    return report


def _transactions(spark, F, out, frames, produces) -> tuple[list[dict], list[dict]]:
    """The transactions view and its problems (``transactions.follow``) from the transaction APIs'
    frames with their typed bodies (``bodies/<message>`` tables) and the transactional produces, one row
    per Produce request and producer (few, next to the frames: they are collected to the driver)."""
    def micros(names):
        return [F.unix_micros("ts").alias("ts") if name == "ts" else F.col(name) for name in names]

    txn = frames.where(F.col("api_key").isin(*TXN_API_KEYS)).select(*micros(FRAME_COLUMNS)).collect()
    written = produces.where(F.col("is_transactional")).groupBy(*micros(PRODUCE_COLUMNS[:-1])).agg(
        F.count("*").alias("partitions"), F.array_sort(F.collect_set("error_code")).alias("error_codes")).collect()
    if not txn and not written:
        return [], []
    bodies = [row.asDict(recursive=True) for message in TXN_MESSAGES if txn and _exists(spark, f"{out}/{BODIES}/{message}")
              for row in spark.read.parquet(f"{out}/{BODIES}/{message}").select(*micros([*FRAME_KEY, "body"])).collect()]
    end = frames.agg(F.max(F.unix_micros("ts"))).first()[0]
    return follow(frame_rows([row.asDict() for row in txn], bodies), [row.asDict(recursive=True) for row in written], end)


def _shares(spark, F, out, frames, delivery_limit: int) -> tuple[list[dict], list[dict], list[dict]]:
    """The share-group view (``shares.share_view``) from the share tables' rows (absent from table sets
    that older versions wrote), collected to the driver: one per acquired or acknowledged range."""
    rows = []
    for name, columns in (("share_acquisitions", ACQUISITION_COLUMNS),
                          ("share_acknowledgements", ACKNOWLEDGEMENT_COLUMNS)):
        found = []
        if _exists(spark, f"{out}/{name}"):
            found = [row.asDict() for row in spark.read.parquet(f"{out}/{name}").select(
                *[F.unix_micros("ts").alias("ts") if column == "ts" else F.col(column) for column in columns]
            ).collect()]
        rows.append(found)
    if not rows[0] and not rows[1]:
        return [], [], []
    end = frames.agg(F.max(F.unix_micros("ts"))).first()[0]
    return share_view(rows[0], rows[1], end, delivery_limit)


def _any(F, conditions):
    result = F.lit(False)
    for condition in conditions:
        result = result | condition
    return result


def _exists(spark, path: str) -> bool:
    """Whether ``path`` exists, on the file system Hadoop's configuration gives for it."""
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).exists(hadoop_path)
