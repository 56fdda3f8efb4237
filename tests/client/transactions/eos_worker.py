"""A consume-transform-produce worker, run as its own process by test_client_exactly_once (which kills
it with SIGKILL mid-transaction and starts it again): reads ``source`` (read_committed, from the group's
committed offsets), writes each value with ``-out`` appended to the same partition of ``sink``, and
commits the consumer's offsets in the same transaction. Says ``begun N`` once a transaction's N records
are in the broker's log and ``committed`` after each commit; exits once it has read ``end`` records of
every partition. With HOLD, it stops after the HOLD-th ``begun`` (that transaction open, its records
written) until its stdin closes, so that it is killed there and never a moment later.

Usage: python eos_worker.py BOOTSTRAP SOURCE SINK PARTITIONS END [HOLD]
"""
from __future__ import annotations

import sys

from kafkawire.client import Consumer, Producer, TopicPartition

TIMEOUT_S = 60  # a bound for a loaded machine; each run takes a few seconds


def main() -> None:
    bootstrap, source, sink, partition_count, end = sys.argv[1], sys.argv[2], sys.argv[3], *map(int, sys.argv[4:6])
    hold = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    begun = 0
    partitions = [TopicPartition(source, p) for p in range(partition_count)]
    with Producer(bootstrap_servers=bootstrap, transactional_id=f"eos-{source}", linger_ms=1) as producer, \
            Consumer(bootstrap_servers=bootstrap, group_id=f"eos-{source}", isolation_level="read_committed",
                     enable_auto_commit=False, auto_offset_reset="earliest") as consumer:
        producer.init_transactions(TIMEOUT_S)  # fences a killed predecessor and aborts what it left open
        consumer.assign(partitions)  # positions from the offsets committed with the transactions
        while any(consumer.position(tp) < end for tp in partitions):
            records = consumer.poll(timeout_ms=100, max_records=25)
            if not records:
                continue
            producer.begin_transaction()
            for record in records:
                producer.send(sink, record.value + b"-out", key=record.key, partition=record.partition)
            producer.flush()
            print(f"begun {len(records)}", flush=True)
            begun += 1
            if begun == hold:
                sys.stdin.read()  # until the test kills the process (or closes stdin)
            offsets = {TopicPartition(r.topic, r.partition): r.offset + 1 for r in records}
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT_S)
            producer.commit_transaction(TIMEOUT_S)
            print("committed", flush=True)


if __name__ == "__main__":
    main()
