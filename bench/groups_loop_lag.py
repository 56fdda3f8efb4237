"""ListGroups and DescribeGroups over thousands of groups, under the loop probe (issue 33).

    PYTHONPATH=. .venv/bin/python bench/groups_loop_lag.py --groups 10000

A broker in process (heap frozen, as the ``kafkawire broker`` process has it) gets --groups empty
classic groups (one offset commit each, generation -1, as Kafka's admin tools commit), then answers
ListGroups and DescribeGroups of --describe groups three times each while the loop probe of
tests/support/loop_lag.py measures the most CPU the loop's thread spent between two wakeups of a
1 ms task. Target: no request holds the loop for more than about 50 ms.

This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.broker_harness import BrokerThread, RawClient  # noqa: E402
from support.loop_lag import LoopLagProbe  # noqa: E402

from kafkawire import messages as m  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--describe", type=int, default=1_000, help="groups in each DescribeGroups")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f}")
    commit = m.OffsetCommitRequest
    topic, partition = commit.OffsetCommitRequestTopic, commit.OffsetCommitRequestPartition
    with tempfile.TemporaryDirectory() as folder, BrokerThread(data_dir=folder, freeze_heap=True) as running:
        started = time.perf_counter()
        with RawClient(running.port) as client:
            client.request(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
                name="t", num_partitions=1, replication_factor=1)], timeout_ms=5000), 7)
            for first in range(0, args.groups, 100):  # a hundred in flight at a time
                count = min(100, args.groups - first)
                for i in range(first, first + count):
                    client.send(m.OffsetCommitRequest(
                        group_id=f"g-{i:05d}", generation_id_or_member_epoch=-1, member_id="",
                        topics=[topic(name="t", partitions=[partition(partition_index=0, committed_offset=1)])]), 8)
                for _ in range(count):
                    client.receive()
        print(f"{args.groups:,} groups made in {time.perf_counter() - started:.1f} s")
        describe = [f"g-{i:05d}" for i in range(min(args.describe, args.groups))]
        requests = [("ListGroups v4", m.ListGroupsRequest(), 4),
                    (f"DescribeGroups v5 of {len(describe):,}", m.DescribeGroupsRequest(groups=describe), 5)]
        for name, body, version in requests:
            with RawClient(running.port) as client, LoopLagProbe(running.loop) as probe:
                client.request(body, version)
                while probe.ticks < 3:
                    time.sleep(0.01)
                probe.reset()
                started = time.perf_counter()
                for _ in range(3):
                    answer = client.request(body, version)
                each = (time.perf_counter() - started) / 3
                print(f"{name}: {len(answer.groups):,} groups, {each * 1000:.0f} ms a round trip (the client's "
                      f"decode included), loop held at most {probe.worst_cpu * 1000:.0f} ms CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
