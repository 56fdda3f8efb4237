"""Rebalance time when one member joins a group of 10 consuming 100 partitions (issue 23), for the
three protocols confluent-kafka speaks to kafkawire's broker: classic eager (``range``), classic
cooperative-sticky (KIP-429) and the consumer protocol (KIP-848, ``group.protocol=consumer``); and
kafkawire's own consumer with cooperative-sticky (11 of them, each in a process of its own).

A producer keeps writing to every partition at a steady rate while 10 consumers, each on its own
thread, consume. Once they share the 100 partitions, an 11th joins. Measured: the time from its
subscribe to the group settled again (11 members, every partition owned by exactly one), and the
records/s the group consumed during that time against the records/s before it. Eager rebalancing
stops the world; the incremental protocols should keep most partitions flowing.

    .venv/bin/python bench/rebalance.py [--repeats 3] [--members 10] [--partitions 100] [--only kafkawire]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from common import git_state  # noqa: E402
from kafkawire.broker.background import BrokerThread  # noqa: E402

PROTOCOLS = {  # name: (client, settings)
    "classic eager (range)": ("confluent-kafka", {"partition.assignment.strategy": "range"}),
    "classic cooperative-sticky": ("confluent-kafka", {"partition.assignment.strategy": "cooperative-sticky"}),
    "consumer protocol (KIP-848)": ("confluent-kafka", {"group.protocol": "consumer"}),
    "kafkawire cooperative-sticky": ("kafkawire", {"partition.assignment.strategy": "cooperative-sticky"}),
}


class KafkawireMember:
    """kafkawire's AsyncConsumer in a process of its own (as consumers are deployed: the broker here runs in
    this process, and eleven Python consumers beside it would share its interpreter lock). The child says
    "ready" once imported, subscribes on "go", then prints its record count and partitions as they change,
    until its stdin closes."""

    def __init__(self, bootstrap, group, topic, settings, counter):
        self.counter = counter
        self.assigned: frozenset[int] = frozenset()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--member", json.dumps([bootstrap, group, topic, settings])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            count, partitions = json.loads(line)
            self.counter[0] += count
            self.assigned = frozenset(partitions)

    def start(self):
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    @property
    def running(self):
        return self.process.poll() is None

    @running.setter
    def running(self, value):
        if not value:
            self.process.stdin.close()

    def join(self, timeout):
        self.process.wait(timeout)
        self.reader.join(timeout)


def kafkawire_member(arguments: str) -> None:
    """The child process of KafkawireMember."""
    import asyncio
    import select
    from kafkawire.client import AsyncConsumer
    bootstrap, group, topic, settings = json.loads(arguments)
    print("ready", flush=True)
    sys.stdin.readline()

    async def run():
        consumer = AsyncConsumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
                                  **settings})
        consumer.subscribe([topic])
        reported: frozenset[int] = frozenset()
        while not select.select([sys.stdin], [], [], 0)[0]:  # (stdin closed: time to stop)
            count = len(await consumer.poll(timeout_ms=20))
            partitions = frozenset(tp.partition for tp in consumer.assignment())
            if count or partitions != reported:
                print(json.dumps([count, sorted(partitions)]), flush=True)
                reported = partitions
        await consumer.close(timeout_ms=5000)

    asyncio.run(run())


class Member(threading.Thread):
    def __init__(self, bootstrap, group, topic, settings, counter):
        super().__init__(daemon=True)
        self.consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                                  "auto.offset.reset": "latest", "log_level": 0, **settings})
        self.consumer.subscribe([topic])
        self.counter = counter
        self.assigned: frozenset[int] = frozenset()
        self.running = True

    def run(self):
        while self.running:
            message = self.consumer.poll(0.02)
            if message is not None and not message.error():
                self.counter[0] += 1
            self.assigned = frozenset(tp.partition for tp in self.consumer.assignment())
        self.consumer.close()


def settled(members, partitions) -> bool:
    owned = [p for member in members for p in member.assigned]
    return all(member.assigned for member in members) and len(owned) == len(set(owned)) == partitions


def one_run(broker, protocol, client, settings, members_count, partitions, run):
    topic = group = f"rebalance-{run}-{protocol.split()[0]}-{time.monotonic_ns()}"
    kind = KafkawireMember if client == "kafkawire" else Member
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    producing = True

    def produce():
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "log_level": 0})
        i = 0
        while producing:
            for p in range(partitions):
                while True:
                    try:
                        producer.produce(topic, value=b"x" * 100, partition=p)
                        break
                    except BufferError:  # the broker is behind (a loaded machine): wait for deliveries
                        producer.poll(0.05)
            i += 1
            producer.poll(0)
            time.sleep(0.01)  # about 100 records per partition per second
        producer.flush(5)

    producer_thread = threading.Thread(target=produce, daemon=True)
    producer_thread.start()
    counter = [0]
    members = [kind(broker.bootstrap, group, topic, settings, counter) for _ in range(members_count)]
    for member in members:
        member.start()
    deadline = time.monotonic() + 60
    while not settled(members, partitions):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{protocol}: the first {members_count} members did not settle")
        time.sleep(0.01)
    time.sleep(1.0)  # steady state
    before_start, before_count = time.monotonic(), counter[0]
    time.sleep(1.0)
    steady_rate = (counter[0] - before_count) / (time.monotonic() - before_start)
    # (a kafkawire member's process starts before the clock does: it subscribes on start())
    newcomer = kind(broker.bootstrap, group, topic, settings, counter) if kind is KafkawireMember else None
    joined_at, count_at_join = time.monotonic(), counter[0]
    newcomer = newcomer or kind(broker.bootstrap, group, topic, settings, counter)
    newcomer.start()
    members.append(newcomer)
    while not settled(members, partitions):
        if time.monotonic() > joined_at + 60:
            raise RuntimeError(f"{protocol}: the group did not settle after the join")
        time.sleep(0.005)
    elapsed = time.monotonic() - joined_at
    during_rate = (counter[0] - count_at_join) / elapsed
    producing = False
    for member in members:
        member.running = False
    for member in members:
        member.join(10)
    producer_thread.join(10)
    return elapsed, during_rate, steady_rate


def main() -> None:
    if sys.argv[1:2] == ["--member"]:
        kafkawire_member(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--only", default="", help="run only the protocols whose name contains this")
    args = parser.parse_args()
    print(f"kafkawire {git_state()}, confluent-kafka {confluent_kafka.version()} "
          f"(librdkafka {confluent_kafka.libversion()[0]}); {args.members} members + 1 joining, "
          f"{args.partitions} partitions, median of {args.repeats}")
    results = {}
    with tempfile.TemporaryDirectory() as data, BrokerThread(
            data_dir=data, group_initial_rebalance_delay_ms=0, group_consumer_heartbeat_interval_ms=250) as broker:
        for run in range(args.repeats):
            for protocol, (client, settings) in PROTOCOLS.items():  # interleaved, so drift hits each alike
                if args.only not in protocol:
                    continue
                results.setdefault(protocol, []).append(
                    one_run(broker, protocol, client, settings, args.members, args.partitions, run))
    print(f"{'protocol':32} {'rebalance s':>12} {'records/s during':>17} {'steady records/s':>17} {'flowing':>8}")
    eager_runs = results.get("classic eager (range)")
    eager = statistics.median(r[0] for r in eager_runs) if eager_runs else None
    for protocol, runs in results.items():
        elapsed = statistics.median(r[0] for r in runs)
        during = statistics.median(r[1] for r in runs)
        steady = statistics.median(r[2] for r in runs)
        ratio = f"   ({elapsed / eager:.2f}x eager's time)" if eager else ""
        print(f"{protocol:32} {elapsed:12.2f} {during:17.0f} {steady:17.0f} {during / steady:8.0%}{ratio}")


if __name__ == "__main__":
    main()
