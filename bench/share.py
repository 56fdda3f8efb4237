"""Share consumption benchmark (issue 34): share groups (KIP-932) through kafkawire's broker, kafkawire's
share consumers beside confluent-kafka's, and classic consumption of the same topic in the same run.

    .venv/bin/python bench/share.py                        # about 2 minutes
    .venv/bin/python bench/share.py --records 20000 --repeats 1    # smoke run

One topic of one partition is loaded once with --records (100k) records of --value-size (100) random
bytes by confluent-kafka's producer (acks=1, --linger-ms 5). The batches it makes depend on the
machine's speed, and they matter to share consumption: a ShareFetch acquires at most the share
partition's window of record locks (2,000) but sends every batch it touches whole, so batches much
larger than the window are sent several times, and batches smaller than max.poll.records mean fewer
records a round trip. The layout is printed with the results. Then each cell reads every record, timed from the
consumers' construction to the last record (wall), best of --repeats with the cells' order rotated:

* classic: kafkawire's AsyncConsumer and confluent-kafka's Consumer, assign() from offset 0, no group;
* share, 1 and 4 consumers in one fresh share group each run (the broker starts share partitions at
  the log start: share.auto.offset.reset=earliest), implicit acknowledgement (every record ACCEPTed by
  the next poll), 500 records a poll: kafkawire's AsyncShareConsumer (the 4 on one event loop) and
  confluent-kafka's ShareConsumer (the 4 on threads of their own);
* kafkawire's AsyncShareConsumer in explicit mode, acknowledging each record ACCEPT itself.

Beside each cell's wall time, the CPU seconds of this process (the consumers) and of the broker process
in that best run: on a loaded machine the wall time is mostly waiting for a core, the CPU is not.
The acknowledgement overhead per record is (share wall - classic wall) / records for one consumer; the
client cores' own CPU per record (the share fetcher fed made-up responses, against the classic
consumer's CompletedFetch on the same batches, no broker) is printed beside it (``--core-only``: just that).
Target: one kafkawire share consumer at least 0.5x kafkawire's classic records/s.
The broker is ``kafkawire broker`` in a subprocess. This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from common import BrokerProcess, machine_line, print_targets  # noqa: E402

TOPIC = "share-bench"
MAX_POLL_RECORDS = 500
_groups = itertools.count()


def batch_layout(data_dir: Path) -> str:
    """How the loaded log is batched: a share fetch acquires whole batches once it starts one (as
    Kafka's batch-optimized acquisition), so the layout decides the records per round trip."""
    from kafkawire.records import iter_batches
    sizes = sorted(batch.last_offset - batch.base_offset + 1 for segment in sorted(data_dir.rglob("*.log"))
                   for batch in iter_batches(segment.read_bytes(), verify_crc=False))
    if not sizes:
        return "no batches"
    return f"{len(sizes)} batches, records per batch: median {sizes[len(sizes) // 2]:,}, least {sizes[0]:,}, most {sizes[-1]:,}"


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (Linux's /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(bootstrap: str, records: int, value_size: int, linger_ms: int = 5) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": linger_ms, "acks": 1})
    value = os.urandom(value_size)
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


# ---- classic --------------------------------------------------------------------------------------

def classic_kafkawire(bootstrap: str, records: int) -> float:
    from kafkawire.client import AsyncConsumer, TopicPartition

    async def run() -> float:
        started = time.perf_counter()
        consumer = AsyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                 max_poll_records=MAX_POLL_RECORDS)
        consumer.assign([TopicPartition(TOPIC, 0)])
        seen = 0
        while seen < records:
            for record in await consumer.poll(1000):
                record.value  # noqa: B018 (touched, as an application would)
                seen += 1
        elapsed = time.perf_counter() - started
        await consumer.close()
        return elapsed
    return asyncio.run(run())


def classic_confluent(bootstrap: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition
    started = time.perf_counter()
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"classic-{next(_groups)}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = 0
    while seen < records:
        for message in consumer.consume(MAX_POLL_RECORDS, 1.0):
            if message.error() is None:
                message.value()
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


# ---- share ----------------------------------------------------------------------------------------

def share_kafkawire(bootstrap: str, records: int, members: int, explicit: bool = False) -> float:
    from kafkawire.client import AsyncShareConsumer

    group = f"share-{next(_groups)}"
    mode = "explicit" if explicit else "implicit"

    async def run() -> float:
        started = time.perf_counter()
        consumers = [AsyncShareConsumer(bootstrap_servers=bootstrap, group_id=group, max_poll_records=MAX_POLL_RECORDS,
                                        share_acknowledgement_mode=mode) for _ in range(members)]
        for consumer in consumers:
            consumer.subscribe([TOPIC])
        seen = [0]

        async def consume(consumer: AsyncShareConsumer) -> None:
            while seen[0] < records:
                batch = await consumer.poll(200)
                for record in batch:
                    record.value  # noqa: B018
                    if explicit:
                        consumer.acknowledge(record)
                seen[0] += len(batch)
        await asyncio.gather(*(consume(consumer) for consumer in consumers))
        for consumer in consumers:
            await consumer.commit_sync(30000)
        elapsed = time.perf_counter() - started
        for consumer in consumers:
            await consumer.close()
        return elapsed
    return asyncio.run(run())


def share_confluent(bootstrap: str, records: int, members: int) -> float:
    from confluent_kafka import ShareConsumer

    group = f"share-{next(_groups)}"
    lock = threading.Lock()
    seen = [0]
    started = time.perf_counter()
    consumers = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}) for _ in range(members)]

    def consume(consumer) -> None:
        consumer.subscribe([TOPIC])
        while seen[0] < records:
            count = 0
            for message in consumer.poll(0.2):
                if message.error() is None:
                    message.value()
                    count += 1
            with lock:
                seen[0] += count
        consumer.commit_sync(30)
    threads = [threading.Thread(target=consume, args=(consumer,)) for consumer in consumers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    for consumer in consumers:
        consumer.close()
    return elapsed


def core_cost(batches: int = 50, per_batch: int = 2000, value_size: int = 100) -> tuple[float, float]:
    """CPU µs per record of the client's sans-IO cores alone, no broker: the share fetcher handed made-up
    ShareFetch responses (a log batch each, acquired in ranges of MaxRecords as the broker splits them at
    BatchSize) and polled, implicit mode (so acknowledging), against the classic consumer's
    CompletedFetch on the same batches."""
    import uuid

    from kafkawire import messages as m
    from kafkawire.client.core.consumer.completed_fetch import CompletedFetch
    from kafkawire.client.core.consumer.memory import Lease, MemoryPool
    from kafkawire.client.core.share.config import ShareConsumerConfig
    from kafkawire.client.core.share.fetcher import ShareFetcher
    from kafkawire.client.core.topic_partition import TopicPartition
    from kafkawire.records import RecordBatchBuilder

    value, topic_id, tp = os.urandom(value_size), uuid.uuid4(), TopicPartition(TOPIC, 0)
    logs = []
    for index in range(batches):
        builder = RecordBatchBuilder(base_offset=index * per_batch)
        for _ in range(per_batch):
            builder.append(value, key=b"user-00000001")
        logs.append(builder.build())
    fetcher = ShareFetcher(ShareConsumerConfig(bootstrap_servers=("unused:9092",), group_id="core"), "member")
    fetcher.set_topic_ids({TOPIC: topic_id})
    fetcher.set_assignment({topic_id: (0,)})
    fetcher.update_leaders({tp: 0})
    Response = m.ShareFetchResponse
    started = time.process_time()
    for index, data in enumerate(logs):
        assert not fetcher.poll(per_batch)  # accepts the last batch: the next fetch carries that
        (request,) = fetcher.prepare_requests()
        first = index * per_batch
        fetcher.handle_fetch_response(request, Response(responses=[Response.ShareFetchableTopicResponse(
            topic_id=topic_id, partitions=[Response.PartitionData(partition_index=0, records=data, acquired_records=[
                Response.AcquiredRecords(first_offset=start, last_offset=min(start + MAX_POLL_RECORDS, first + per_batch) - 1,
                                         delivery_count=1)
                for start in range(first, first + per_batch, MAX_POLL_RECORDS)])])]))
        for record in fetcher.poll(per_batch):
            record.value  # noqa: B018
    share = (time.process_time() - started) / (batches * per_batch) * 1e6
    pool = MemoryPool(1 << 30)
    started = time.process_time()
    for index, data in enumerate(logs):
        for record in CompletedFetch(tp, index * per_batch, data, Lease(pool, 0)).take(per_batch):
            record.value  # noqa: B018
    return share, (time.process_time() - started) / (batches * per_batch) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--linger-ms", type=int, default=5,
                        help="the loading producer's linger.ms (5, the clients' default): the batches it makes "
                             "depend on the machine's speed; 100 fills them to batch.size (1 MB) every time")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--core-only", action="store_true", help="only the client cores' CPU per record")
    args = parser.parse_args()
    share_core, classic_core = min(core_cost() for _ in range(3))
    core_line = (f"Client cores alone, CPU per record (best of 3): share fetcher {share_core:.2f} µs (records, "
                 f"delivery counts, implicit acknowledgements), classic CompletedFetch {classic_core:.2f} µs.")
    if args.core_only:
        print(core_line)
        return
    started = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="share-bench-"))
    broker = BrokerProcess(workdir / "data", workdir / "broker.log", "--override", "share.auto.offset.reset=earliest")
    try:
        load(broker.bootstrap, args.records, args.value_size, args.linger_ms)
        layout = batch_layout(workdir / "data")
        cells = {
            "classic: kafkawire AsyncConsumer": lambda: classic_kafkawire(broker.bootstrap, args.records),
            "classic: confluent-kafka Consumer": lambda: classic_confluent(broker.bootstrap, args.records),
            "share x1: kafkawire AsyncShareConsumer": lambda: share_kafkawire(broker.bootstrap, args.records, 1),
            "share x4: kafkawire AsyncShareConsumer": lambda: share_kafkawire(broker.bootstrap, args.records, 4),
            "share x1: kafkawire, explicit ACCEPT per record":
                lambda: share_kafkawire(broker.bootstrap, args.records, 1, explicit=True),
            "share x1: confluent-kafka ShareConsumer": lambda: share_confluent(broker.bootstrap, args.records, 1),
            "share x4: confluent-kafka ShareConsumer": lambda: share_confluent(broker.bootstrap, args.records, 4),
        }
        best: dict[str, float] = {}
        cpu: dict[str, tuple[float, float]] = {}  # of the best run: (consumers, broker)
        names = list(cells)
        for repeat in range(args.repeats):
            for name in names[repeat % len(names):] + names[:repeat % len(names)]:
                client_cpu, broker_cpu = time.process_time(), cpu_seconds(broker.proc.pid)
                elapsed = cells[name]()
                if elapsed < best.get(name, float("inf")):
                    best[name] = elapsed
                    cpu[name] = (time.process_time() - client_cpu, cpu_seconds(broker.proc.pid) - broker_cpu)
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    records = args.records
    out = [f"# Share consumption ({records:,} records of {args.value_size} B, one partition, best of "
           f"{args.repeats})", "", machine_line(), "", f"Log loaded with linger.ms {args.linger_ms}: {layout}.", "",
           "| consumer | wall s | records/s | consumers' CPU s | broker CPU s |", "|---|---:|---:|---:|---:|"]
    for name in names:
        out.append(f"| {name} | {best[name]:.2f} | {records / best[name]:,.0f} | {cpu[name][0]:.2f} | "
                   f"{cpu[name][1]:.2f} |")
    classic = best["classic: kafkawire AsyncConsumer"]
    share = best["share x1: kafkawire AsyncShareConsumer"]
    explicit = best["share x1: kafkawire, explicit ACCEPT per record"]
    out += ["", f"Acknowledgement overhead per record, kafkawire (share x1 - classic): "
                f"{(share - classic) / records * 1e6:.2f} µs implicit, {(explicit - classic) / records * 1e6:.2f} µs "
                f"explicit; confluent-kafka: {(best['share x1: confluent-kafka ShareConsumer'] - best['classic: confluent-kafka Consumer']) / records * 1e6:.2f} µs."]
    out += ["", core_line]
    ratio = classic / share
    print_targets(out, [(f"one kafkawire share consumer at least 0.5x classic records/s ({ratio:.2f}x)", ratio >= 0.5)],
                  started)


if __name__ == "__main__":
    main()
