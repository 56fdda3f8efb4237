"""`kafkawire show` benchmark (issue 25): a quick look at a capture, against tshark's one-line summary.

    .venv/bin/python bench/show.py                       # 100 MiB capture, and 300 MiB for memory
    .venv/bin/python bench/show.py --size-mb 100 --memory-sizes 100,200,400

1. The captures: bench/capture_fixture.py's realistic broker capture (the one bench/capture.py decodes),
   of --size-mb, and of each --memory-sizes size; generated once under --work and reused.
2. Runs, one after the other, on a file already in the page cache, each --repeat times (the smallest CPU
   time is kept: the machine is shared):
   - `kafkawire show FILE > out` (every frame decoded; a line per request and response)
   - `tshark -n -r FILE -d tcp.port==9092,kafka > out` (tshark's one-line summary, a line per packet)
   CPU time is user+sys of the process (bench/capture.py's subreaper helper and sampler).
3. First line: the wall time from starting `kafkawire show FILE` to its first line on a pseudo-terminal
   (what a person at a terminal waits for), the median of --repeat.
4. Memory as the capture grows: `kafkawire show` on each --memory-sizes capture; the peak of Python's
   heap (tracemalloc, in a child process) and ru_maxrss (which counts the capture's mmap-ed pages the
   reader touched, so it grows with the file even when the heap does not).
5. Checks: show prints exactly the capture's frames; tshark shows as many Kafka PDUs.

Target (issue 25): show >= 3x tshark's MB per CPU-second on the 100 MB capture; the heap flat across sizes.
This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import json
import os
import pty
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

from capture import KAFKAWIRE, PORT, TSHARK, RunFailed, Usage, _compile_bytecode, _warm, run_measured
from capture_fixture import CaptureSpec, ensure_capture
from common import machine_line

TARGET_RATIO = 3.0

HEAP = r"""
import io, json, resource, sys, tracemalloc
tracemalloc.start()
from kafkawire.capture.terminal.show import run
from argparse import Namespace
args = Namespace(captures=[sys.argv[1]], filter=[], json=False, detail=None, ports=None)
sink = open("/dev/null", "w")
status = run(args, out=sink)
current, peak = tracemalloc.get_traced_memory()
print(json.dumps({"status": status, "peak_heap": peak, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def first_line_seconds(capture: Path) -> float:
    """Wall seconds from starting `kafkawire show` to its first line on a pseudo-terminal."""
    leader, follower = pty.openpty()
    started = time.perf_counter()
    child = subprocess.Popen([str(KAFKAWIRE), "show", str(capture)], stdout=follower, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    try:
        while b"\n" not in seen:
            ready, _, _ = select.select([leader], [], [], 30)
            if not ready:
                raise RunFailed("no line from kafkawire show in 30 s")
            seen += os.read(leader, 4096)
        return time.perf_counter() - started
    finally:
        child.kill()
        child.wait()
        os.close(leader)


def heap_run(capture: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", HEAP, str(capture)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def best(runs: list[Usage]) -> Usage:
    return min(runs, key=lambda usage: usage.cpu)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/kafkawire-bench-capture",
                        help="directory for the captures, reused across runs (bench/capture.py's)")
    parser.add_argument("--size-mb", type=int, default=100, help="the capture compared with tshark (MiB)")
    parser.add_argument("--memory-sizes", default="100,300", help="capture sizes (MiB) for the memory check")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each tool (default 3)")
    args = parser.parse_args(argv)
    work = Path(args.work)
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    print("# kafkawire show benchmark\n")
    print(machine_line())
    print(_compile_bytecode())

    facts, _ = ensure_capture(CaptureSpec(args.size_mb, 48, "mixed", False, "pcapng", 1), work)
    capture = Path(facts.path)
    input_mb = facts.file_bytes / 1e6
    print(f"\nCapture: {capture.name}, {input_mb:.1f} MB, {facts.packets:,} packets, {facts.connections} "
          f"connections, {facts.frames:,} frames\n")
    _warm(capture)
    shows, tsharks = [], []
    for _ in range(args.repeat):
        out = logs / "show.txt"
        shows.append(run_measured("kafkawire show", [str(KAFKAWIRE), "show", str(capture)], out,
                                  out.with_suffix(".err"), 600))
        lines = sum(1 for _ in open(out))
        if TSHARK:
            out = logs / "tshark-summary.txt"
            tsharks.append(run_measured("tshark summary", [TSHARK, "-n", "-r", str(capture), "-d",
                                                           f"tcp.port=={PORT},kafka"], out,
                                        out.with_suffix(".err"), 600))
            kafka_lines = sum(1 for line in open(out, errors="replace") if " Kafka " in line)
    firsts = [first_line_seconds(capture) for _ in range(args.repeat)]

    print("| tool | wall s | CPU s | MB per CPU-s | vs tshark | lines |")
    print("|---|---|---|---|---|---|")
    show_usage = best(shows)
    show_rate = input_mb / show_usage.cpu
    tshark_rate = None
    if tsharks:
        tshark_usage = best(tsharks)
        tshark_rate = input_mb / tshark_usage.cpu
    ratio = show_rate / tshark_rate if tshark_rate else None
    print(f"| kafkawire show | {show_usage.wall:.2f} | {show_usage.cpu:.2f} | {show_rate:.0f} | "
          f"{f'{ratio:.2f}x' if ratio else '-'} | {lines:,} |")
    if tsharks:
        print(f"| tshark -r FILE -d tcp.port=={PORT},kafka | {tshark_usage.wall:.2f} | {tshark_usage.cpu:.2f} | "
              f"{tshark_rate:.0f} | 1.00x | {kafka_lines:,} Kafka of {facts.packets:,} |")
    print(f"\nFirst line on a terminal: median {statistics.median(firsts):.3f} s "
          f"(runs: {', '.join(f'{s:.3f}' for s in firsts)})")

    print("\nMemory as the capture grows (kafkawire show, peak Python heap by tracemalloc; ru_maxrss counts the "
          "capture's mmap-ed pages too):\n")
    print("| capture MB | peak heap MB | max RSS MB |")
    print("|---|---|---|")
    heaps = []
    for size in [int(s) for s in args.memory_sizes.split(",") if s]:
        more, _ = ensure_capture(CaptureSpec(size, 48, "mixed", False, "pcapng", 1), work)
        found = heap_run(Path(more.path))
        heaps.append(found["peak_heap"])
        print(f"| {more.file_bytes / 1e6:.0f} | {found['peak_heap'] / 1e6:.1f} | {found['maxrss_kb'] / 1024:.0f} |")

    checks = [(lines == facts.frames, f"show printed {lines:,} lines for {facts.frames:,} frames")]
    if tsharks:
        checks.append((kafka_lines == facts.frames, f"tshark showed {kafka_lines:,} Kafka PDUs"))
        checks.append((ratio >= TARGET_RATIO, f"show at {ratio:.2f}x tshark per CPU-second (target >= "
                                              f"{TARGET_RATIO:.0f}x)"))
    if len(heaps) > 1:
        checks.append((max(heaps) <= 1.5 * min(heaps), f"peak heap {min(heaps) / 1e6:.1f}-{max(heaps) / 1e6:.1f} MB "
                                                       f"across the sizes (flat: within 1.5x)"))
    checks.append((statistics.median(firsts) <= 0.5, f"first line in {statistics.median(firsts):.3f} s "
                                                     f"(target <= 0.5 s)"))
    print()
    for ok, text in checks:
        print(f"- {'PASS' if ok else 'MISS'}: {text}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
