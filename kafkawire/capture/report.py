"""``kafkawire report DIR``: a summary of decoded tables, computed with Spark SQL.

Sections: frames and latency percentiles per API, bytes per client, problems by kind, and the
fetch-limits check (KIP-74):

- a fetch response whose record bytes exceed ``max(MaxBytes, first batch)``, where the first batch
  is the first batch of the first partition that returned data (the one overshoot KIP-74 allows);
- a partition whose record bytes exceed ``max(PartitionMaxBytes, its first batch)``;
- a partition starved across consecutive fetches: data was waiting (high watermark above the fetch
  offset) yet nothing came back, ``starved_after`` fetches in a row on one connection.
"""
from __future__ import annotations

from dataclasses import dataclass, field

STARVED_AFTER = 3


@dataclass
class Report:
    apis: list[dict] = field(default_factory=list)
    clients: list[dict] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)
    oversized_responses: list[dict] = field(default_factory=list)
    oversized_partitions: list[dict] = field(default_factory=list)
    starved: list[dict] = field(default_factory=list)
    totals: dict = field(default_factory=dict)

    def text(self) -> str:
        lines = [f"frames {self.totals.get('frames', 0):,}  requests {self.totals.get('requests', 0):,}  "
                 f"responses {self.totals.get('responses', 0):,}  fetched partitions "
                 f"{self.totals.get('fetches', 0):,}  produced partitions {self.totals.get('produces', 0):,}"
                 + (f"  records {self.totals['records']:,}" if "records" in self.totals else "")]
        lines += ["", "per API (latency in ms, responses)",
                  f"  {'api':<24}{'ver':>8}{'requests':>10}{'responses':>10}{'errors':>8}"
                  f"{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}"]
        for row in self.apis:
            lines.append(f"  {row['api_name'] or '(unknown)':<24}{row['versions']:>8}{row['requests']:>10,}"
                         f"{row['responses']:>10,}{row['errors']:>8,}" + "".join(
                             f"{_ms(row[k]):>9}" for k in ("p50", "p90", "p99", "max")))
        lines += ["", "per client", f"  {'client':<28}{'client id':<24}{'sent':>14}{'received':>14}"]
        for row in self.clients:
            lines.append(f"  {row['client']:<28}{(row['client_id'] or '')[:23]:<24}"
                         f"{row['sent']:>14,}{row['received']:>14,}")
        lines += ["", "problems"] + ([f"  {row['kind']:<26}{row['count']:>8,}  e.g. {row['example']}"
                                      for row in self.problems] or ["  none"])
        lines += ["", "fetch limits (KIP-74)",
                  f"  responses over max(MaxBytes, first batch): {len(self.oversized_responses)}",
                  f"  partitions over max(PartitionMaxBytes, first batch): {len(self.oversized_partitions)}",
                  f"  partitions starved for {STARVED_AFTER}+ consecutive fetches with data waiting: "
                  f"{len(self.starved)}"]
        for row in self.oversized_responses[:5]:
            lines.append(f"    response {row['connection']} #{row['correlation_id']}: {row['bytes']:,} bytes, "
                         f"MaxBytes {row['max_bytes']:,}, first batch {row['first_batch']:,}")
        for row in self.oversized_partitions[:5]:
            lines.append(f"    partition {row['topic']}-{row['partition']} #{row['correlation_id']}: "
                         f"{row['records_bytes']:,} bytes, PartitionMaxBytes {row['partition_max_bytes']:,}")
        for row in self.starved[:5]:
            lines.append(f"    {row['topic']}-{row['partition']} on {row['connection']}: "
                         f"{row['longest']} fetches in a row")
        return "\n".join(lines)


def _ms(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def build(spark, out_dir: str, starved_after: int = STARVED_AFTER) -> Report:
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    out = str(out_dir).rstrip("/")
    frames = spark.read.parquet(f"{out}/frames")
    fetches = spark.read.parquet(f"{out}/fetches")
    produces = spark.read.parquet(f"{out}/produces")
    problems = spark.read.parquet(f"{out}/problems")
    report = Report()

    is_request = F.col("direction") == "request"
    per_api = frames.groupBy("api_name").agg(
        F.sum(is_request.cast("long")).alias("requests"),
        F.sum((~is_request).cast("long")).alias("responses"),
        F.sum(F.when(~is_request & (F.size(F.coalesce("error_codes", F.array())) > 0), 1).otherwise(0)
              ).alias("errors"),
        F.min("api_version").alias("low"), F.max("api_version").alias("high"),
        F.percentile_approx("latency_ms", [0.5, 0.9, 0.99]).alias("pct"),
        F.max("latency_ms").alias("max"),
    ).orderBy(F.desc("requests"))
    for row in per_api.collect():
        pct = row["pct"] or [None, None, None]
        versions = "-" if row["low"] is None else (
            str(row["low"]) if row["low"] == row["high"] else f"{row['low']}-{row['high']}")
        report.apis.append(dict(api_name=row["api_name"], versions=versions, requests=row["requests"],
                                responses=row["responses"], errors=row["errors"], p50=pct[0], p90=pct[1],
                                p99=pct[2], max=row["max"]))

    per_client = frames.groupBy("client").agg(
        F.max("client_id").alias("client_id"),
        F.sum(F.when(is_request, F.col("size") + 4).otherwise(0)).alias("sent"),
        F.sum(F.when(~is_request, F.col("size") + 4).otherwise(0)).alias("received"),
    ).orderBy(F.desc("received"))
    report.clients = [row.asDict() for row in per_client.collect()]

    report.problems = [row.asDict() for row in problems.groupBy("kind").agg(
        F.count("*").alias("count"), F.first("reason").alias("example")).orderBy(F.desc("count")).collect()]

    answered = fetches.where(F.col("response_size").isNotNull())
    first_batch = F.coalesce(F.col("first_batch_bytes"), F.lit(0))
    in_order = Window.partitionBy("connection", "correlation_id").orderBy("request_index")
    with_data = answered.where(F.col("records_bytes") > 0).withColumn("rank", F.row_number().over(in_order))
    per_response = with_data.groupBy("connection", "correlation_id").agg(
        F.sum("records_bytes").alias("bytes"), F.first("max_bytes").alias("max_bytes"),
        F.max(F.when(F.col("rank") == 1, first_batch)).alias("first_batch"))
    report.oversized_responses = [row.asDict() for row in per_response.where(
        F.col("bytes") > F.greatest("max_bytes", "first_batch")).orderBy("connection", "correlation_id").collect()]
    report.oversized_partitions = [row.asDict() for row in answered.where(
        F.col("partition_max_bytes").isNotNull()
        & (F.col("records_bytes") > F.greatest("partition_max_bytes", first_batch))).select(
        "connection", "correlation_id", "topic", "partition", "records_bytes", "partition_max_bytes").collect()]

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
    report.starved = [row.asDict() for row in starved.orderBy(F.desc("longest")).collect()]

    counts = frames.groupBy("direction").count().collect()
    report.totals = {"frames": sum(r["count"] for r in counts),
                     "requests": sum(r["count"] for r in counts if r["direction"] == "request"),
                     "responses": sum(r["count"] for r in counts if r["direction"] == "response"),
                     "fetches": fetches.count(), "produces": produces.count()}
    try:
        report.totals["records"] = spark.read.parquet(f"{out}/records").count()
    except Exception:  # noqa: BLE001 - the records table exists only with --records
        pass
    return report
