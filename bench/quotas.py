"""Client quota accuracy benchmark (issue 35): the rate clients achieve under a producer_byte_rate or a
consumer_byte_rate quota, against the quota, through kafkawire's broker.

    .venv/bin/python bench/quotas.py                          # about 5 minutes
    .venv/bin/python bench/quotas.py --seconds 8 --window-num 2   # smoke run

For each quota (--quotas, MiB/s: 0.5, 1 and 4) and each number of clients (1 and 4), a fresh client id
gets the quota (AlterClientQuotas through kafkawire's AdminClient), and that many confluent-kafka
clients with that client id (so they share the quota, as Kafka counts it per client id) run on threads
for --seconds:

* produce: each sends 10 KB records as fast as the producer takes them (linger.ms 5, batch.size
  --batch-size: a request's bytes are counted whole, and one much larger than a window's quota
  overshoots it), the bytes acknowledged counted;
* consume: each reads its own partition of a topic loaded beforehand (batches of 32 KiB,
  max.partition.fetch.bytes 64 KiB), the bytes read counted.

Two rates against the quota: from the end of the burst the windows allow ((quota.window.num - 1)
windows of the quota at once: the broker's rate divides by at least that span) to the end of the run;
and over the whole run from the first byte. A client over its quota moves in cycles as long as the
windows (a burst, then throttled until the oldest window ends), so a run of a few cycles reads the rate
well; with Kafka's 11 windows that takes minutes a cell. Target: the whole run's rate within 25%.

The broker is ``kafkawire broker`` in a subprocess with ``quota.window.num`` (--window-num, Kafka's 11)
windows of one second. This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import itertools
import tempfile
import threading
import time
from pathlib import Path

from common import BrokerProcess, machine_line, print_targets  # noqa: E402

MIB = 1 << 20
VALUE = b"q" * 10_000
_ids = itertools.count()


def set_quota(bootstrap: str, client_id: str, key: str, rate: float) -> None:
    from kafkawire.client.admin import AdminClient, ClientQuotaAlteration, ClientQuotaEntity
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for future in admin.alter_client_quotas([ClientQuotaAlteration(
                ClientQuotaEntity.of(client_id=client_id), {key: rate})]).values():
            future.result(30)
    finally:
        admin.close()


def produce(bootstrap: str, client_id: str, topic: str, seconds: float, batch_size: int, acked: list) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "batch.size": batch_size})
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            producer.produce(topic, VALUE, on_delivery=lambda e, m: e is None and acked.append(
                (time.monotonic(), len(m.value()))))
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.purge()
    producer.flush(10)


def consume(bootstrap: str, client_id: str, topic: str, partition: int, seconds: float, read: list) -> None:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"bench-{client_id}",
                         "enable.auto.commit": False, "max.partition.fetch.bytes": 64 * 1024})
    consumer.assign([TopicPartition(topic, partition, 0)])
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            read.append((time.monotonic(), len(message.value())))
    consumer.close()


def load(bootstrap: str, topic: str, partitions: int, megabytes: float) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})  # (kept: a dropped client fails its futures)
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 32 * 1024})
    for i in range(int(megabytes * MIB / len(VALUE)) + 1):
        while True:
            try:
                producer.produce(topic, VALUE, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("loading the topic did not finish")


def cell(bootstrap: str, kind: str, quota_mib: float, clients: int, seconds: float, window_num: int,
         batch_size: int) -> tuple[float, float]:
    """The achieved rate over the quota's: after the windows' burst, and over the whole run."""
    client_id = f"bench-{kind}-{next(_ids)}"
    quota = quota_mib * MIB
    topic = f"quota-bench-{kind}-{client_id}"
    if kind == "consume":  # enough that no reader runs dry: the burst and the quota over the run
        load(bootstrap, topic, clients, quota_mib * (seconds + window_num) * 1.5)
    set_quota(bootstrap, client_id, "producer_byte_rate" if kind == "produce" else "consumer_byte_rate", quota)
    events: list[list] = [[] for _ in range(clients)]
    threads = [threading.Thread(target=produce, args=(bootstrap, client_id, topic, seconds, batch_size, events[i]))
               if kind == "produce" else
               threading.Thread(target=consume, args=(bootstrap, client_id, topic, i, seconds, events[i]))
               for i in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first = min((at for run in events for at, _ in run), default=started)
    burst = (window_num - 1) * 1.0  # seconds of the quota the windows allow at once
    stop = started + seconds
    after_burst = sum(size for run in events for at, size in run if first + burst <= at < stop)
    whole = sum(size for run in events for at, size in run if at < stop)
    return after_burst / max(stop - first - burst, 1e-9) / quota, whole / max(stop - first, 1e-9) / quota


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quotas", default="0.5,1,4", help="quotas in MiB/s")
    parser.add_argument("--clients", default="1,4")
    parser.add_argument("--seconds", type=float, default=20.0, help="each cell's run")
    parser.add_argument("--window-num", type=int, default=11, help="quota.window.num")
    parser.add_argument("--batch-size", type=int, default=16384,
                        help="the producers' batch.size (Java's default; librdkafka's is 1 MB)")
    args = parser.parse_args()
    if args.seconds <= args.window_num - 1:
        parser.error("--seconds must outlast the windows' burst (--window-num - 1 seconds)")
    out = [f"# client quota accuracy: {machine_line()}",
           f"quota.window.num {args.window_num} of 1 s; producers' batch.size {args.batch_size}; "
           f"each cell {args.seconds:.0f} s, "
           f"the burst {args.window_num - 1} s of the quota", "",
           "| quota MiB/s | clients | produce: after the burst | produce: whole run "
           "| consume: after the burst | consume: whole run |", "|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        broker = BrokerProcess(Path(folder) / "data", Path(folder) / "broker.log",
                               "--override", f"quota.window.num={args.window_num}")
        try:
            for quota in (float(q) for q in args.quotas.split(",")):
                for clients in (int(c) for c in args.clients.split(",")):
                    produced = cell(broker.bootstrap, "produce", quota, clients, args.seconds, args.window_num,
                                    args.batch_size)
                    consumed = cell(broker.bootstrap, "consume", quota, clients, args.seconds, args.window_num,
                                    args.batch_size)
                    out.append(f"| {quota:g} | {clients} | {produced[0]:.2f} | {produced[1]:.2f} | {consumed[0]:.2f} "
                               f"| {consumed[1]:.2f} |")
                    print(out[-1], flush=True)
                    verdicts.append((f"{quota:g} MiB/s x{clients}: the whole run's rate within 25% of the "
                                     f"quota", 0.75 <= produced[1] <= 1.25 and 0.75 <= consumed[1] <= 1.25))
        finally:
            broker.stop()
    print_targets(out, verdicts, started)


if __name__ == "__main__":
    main()
