"""Crash safety of the broker process (issue 4, "Crash"): kill -9 the broker during a produce load with
acks=all; after a restart on the same data directory every acknowledged record is fetchable at its
acknowledged offset, every batch served passes its CRC, and offsets continue at the log end. A second
group of tests tears the last segment's tail while the broker is down (a torn write) and checks that
the restart truncates it and serves no torn batch.

The broker runs as a real process (``kafkawire broker``); the load uses RawClient Produce requests with
acks=-1, so the test knows exactly which batches were acknowledged and at which base offsets."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from support.broker_harness import RawClient
from kafkawire.records import RecordBatchBuilder, iter_batches
from support.broker_wire import by_partition, create_topic, fetch, produce

TOPIC = "crash"
PARTITIONS = 3
SEGMENT_BYTES = 64 * 1024  # small, so the load rolls segments (and the kill may land near a roll)
def make_batch(tag: str, count: int) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    now = time.time_ns() // 1_000_000
    builder, records = RecordBatchBuilder(), []
    for i in range(count):
        key, value = f"{tag}-{i}".encode(), (f"{tag}-{i}:".encode() * 20)[: 100 + i * 7 % 300]
        builder.append(value, key=key, timestamp=now)
        records.append((key, value))
    return builder.build(), records


def run_load(port: int, workers: int, acked: list, stop: threading.Event) -> list[threading.Thread]:
    """``workers`` connections, each producing batches of 1-20 records (acks=-1) round-robin over the
    partitions until the connection breaks. Acknowledged batches go to ``acked`` as
    (partition, base_offset, [(key, value)])."""
    lock = threading.Lock()

    def worker(n: int) -> None:
        try:
            client = RawClient(port, client_id=f"load-{n}")
        except OSError:
            return
        with client:
            i = 0
            while not stop.is_set():
                partition = (n + i) % PARTITIONS
                data, records = make_batch(f"w{n}-b{i}", 1 + (n * 7 + i) % 20)
                try:
                    response = produce(client, TOPIC, partition, data)
                except (OSError, ConnectionError, EOFError):
                    return  # the broker died with this request in flight: not acknowledged
                assert response.error_code == 0, response
                with lock:
                    acked.append((partition, response.base_offset, records))
                i += 1

    threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(workers)]
    for t in threads:
        t.start()
    return threads


def read_log(client, partition: int) -> tuple[dict[int, tuple[bytes, bytes]], list, int]:
    """Everything in ``partition``: {offset: (key, value)}, the batches' (base, next) offsets, the high
    watermark. Every batch's CRC is checked; a response must hold whole batches only (the limits are
    far above what is there), and batches must be contiguous from offset 0."""
    records, spans, offset = {}, [], 0
    while True:
        got = by_partition(fetch(client, [(TOPIC, partition, offset, 64 << 20)], max_bytes=64 << 20))[TOPIC, partition]
        assert got.error_code == 0, got
        blob = bytes(got.records or b"")
        served = 0
        for batch in iter_batches(blob, verify_crc=True):
            assert batch.base_offset == offset, f"gap or overlap at {offset}: batch at {batch.base_offset}"
            for record in batch:
                assert record.offset not in records
                records[record.offset] = (record.key, record.value)
            spans.append((batch.base_offset, batch.next_offset))
            offset = batch.next_offset
            served += batch.size
        assert served == len(blob), f"partition {partition}: {len(blob) - served} bytes of a torn batch served"
        if not blob:
            assert offset == got.high_watermark, (offset, got.high_watermark)
            return records, spans, got.high_watermark


def check_acknowledged(client, acked) -> dict[int, int]:
    """Every acknowledged record is at its acknowledged offset with its key and value; returns the
    high watermark of each partition."""
    ends = {}
    for partition in range(PARTITIONS):
        records, _, ends[partition] = read_log(client, partition)
        mine = [a for a in acked if a[0] == partition]
        for _, base, batch in mine:
            for i, (key, value) in enumerate(batch):
                assert records.get(base + i) == (key, value), f"acknowledged record {partition}@{base + i} lost"
        if mine:
            assert ends[partition] >= max(base + len(batch) for _, base, batch in mine)
    return ends


def check_offsets_continue(client, ends: dict[int, int]) -> None:
    for partition in range(PARTITIONS):
        data, _ = make_batch(f"after-{partition}", 3)
        response = produce(client, TOPIC, partition, data)
        assert response.error_code == 0 and response.base_offset == ends[partition], (response, ends[partition])
        records, _, end = read_log(client, partition)
        assert end == ends[partition] + 3
        assert records[ends[partition]][0] == f"after-{partition}-0".encode()


def crash_under_load(start, data_dir: Path, *extra: str, min_acked: int = 600, workers: int = 4) -> list:
    """Start a broker (with ``extra`` options), create the topic, run the load, kill -9 the broker once
    ``min_acked`` batches (at least) were acknowledged, with requests in flight. Returns the acknowledged
    batches."""
    broker = start(data_dir, *extra)
    with RawClient(broker.port) as admin:
        create_topic(admin, TOPIC, PARTITIONS)
    acked, stop = [], threading.Event()
    threads = run_load(broker.port, workers, acked, stop)
    deadline = time.monotonic() + 15
    while len(acked) < min_acked and time.monotonic() < deadline:
        assert any(t.is_alive() for t in threads), "every load connection ended before the kill"
        time.sleep(0.01)
    assert len(acked) >= min_acked, f"only {len(acked)} batches acknowledged in 15 s"
    broker.kill()  # mid-load: the workers have requests in flight
    stop.set()
    for t in threads:
        t.join(10)
    return list(acked)


def test_kill_9_during_acks_all_load_loses_no_acknowledged_record(tmp_path, processes):
    data_dir = tmp_path / "data"
    acked = crash_under_load(processes, data_dir)
    assert len({(p, b) for p, b, _ in acked}) == len(acked)  # distinct offsets were acknowledged
    assert len(list(data_dir.glob(f"{TOPIC}-0/*.log"))) > 1  # the load rolled segments
    broker = processes(data_dir)
    with RawClient(broker.port) as client:
        ends = check_acknowledged(client, acked)
        check_offsets_continue(client, ends)
    # and a second crash and restart changes nothing that was acknowledged
    broker.kill()
    with RawClient(processes(data_dir).port) as client:
        assert check_acknowledged(client, acked) == {p: e + 3 for p, e in ends.items()}


def last_segment(data_dir: Path, partition: int) -> Path:
    return sorted((data_dir / f"{TOPIC}-{partition}").glob("*.log"))[-1]


@pytest.mark.parametrize("tear", ["mid-batch", "mid-header", "zero-filled-tail", "garbage-tail"])
def test_torn_tail_written_while_down_is_truncated_on_restart(tmp_path, processes, tear):
    data_dir = tmp_path / "data"
    # One segment holds the whole load: with small ones the kill could land just after a roll and leave
    # a last segment of a single batch, with no earlier batch for the tear to fall back to.
    one_segment = ("--segment-bytes", str(8 << 20))
    acked = crash_under_load(processes, data_dir, *one_segment, min_acked=150, workers=2)
    segment = last_segment(data_dir, 0)
    blob = segment.read_bytes()
    positions, pos = [], 0
    for batch in iter_batches(blob, verify_crc=True):
        positions.append((pos, batch.size, batch.base_offset, batch.next_offset))
        pos += batch.size
    if pos != len(blob):
        # the kill itself tore the last write (a write(2) is not atomic): drop that tail, so the tear below
        # is the only one and the expected log end is known
        with open(segment, "r+b") as f:
            f.truncate(pos)
        blob = blob[:pos]
    assert len(positions) >= 2
    last_pos, last_size, last_base, _ = positions[-1]
    survivors_end = last_base  # where the log must end after recovery (when the last batch is torn)
    if tear == "mid-batch":
        cut = last_pos + last_size // 2
    elif tear == "mid-header":
        cut = last_pos + 10  # inside the 12-byte offset + size prefix
    else:
        cut, survivors_end = len(blob), positions[-1][3]  # every batch whole; junk after it
    with open(segment, "r+b") as f:
        f.truncate(cut)
        if tear == "zero-filled-tail":
            f.seek(cut)
            f.write(bytes(4096))  # what a preallocated or partially flushed file can hold after a crash
        elif tear == "garbage-tail":
            f.seek(cut)
            f.write(bytes([0, 0, 0, 0, 0, 0, 0, 99]) + (500).to_bytes(4, "big") + os.urandom(200))

    broker = processes(data_dir, *one_segment)
    with RawClient(broker.port) as client:
        records, spans, end = read_log(client, 0)
        assert end == survivors_end
        first_in_segment = int(segment.stem)
        expected_spans = [(b, n) for _, _, b, n in positions if n <= survivors_end]
        assert [s for s in spans if s[0] >= first_in_segment] == expected_spans
        for partition, base, batch in acked:
            if partition == 0 and base + len(batch) <= survivors_end:
                for i, (key, value) in enumerate(batch):
                    assert records[base + i] == (key, value)
        # the other partitions were not touched and keep every acknowledged record
        ends = {0: end}
        for partition in range(1, PARTITIONS):
            got, _, ends[partition] = read_log(client, partition)
            for p, base, batch in acked:
                if p == partition:
                    assert all(got[base + i] == kv for i, kv in enumerate(batch))
        assert segment.stat().st_size == sum(s for p, s, b, n in positions if n <= survivors_end)
        check_offsets_continue(client, ends)


def test_a_topic_created_just_before_a_kill_9_survives_with_every_partition(tmp_path, processes):
    """A creation answers before its partitions' folders are all made (a worker thread makes them
    afterwards); a kill -9 right after the answer keeps the topic, and each partition works, its folder
    made on first use if the worker had not got to it."""
    data_dir = tmp_path / "data"
    broker = processes(data_dir)
    with RawClient(broker.port) as client:
        create_topic(client, "fresh", 500)
    broker.kill()
    restarted = processes(data_dir)
    with RawClient(restarted.port) as client:
        for partition in (0, 499):
            builder = RecordBatchBuilder()
            builder.append(b"after")
            assert produce(client, "fresh", partition, builder.build()).error_code == 0
            (answer,) = by_partition(fetch(client, [("fresh", partition, 0, 1 << 20)])).values()
            assert answer.error_code == 0 and answer.high_watermark == 1
