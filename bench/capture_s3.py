"""Capture decoding from an object store (issue 25): `kafkawire decode s3://...` against the same capture
decoded from local disk, in the same run.

    .venv/bin/python bench/capture_s3.py                  # 256 MiB capture, as a rotated series of 32 MiB files
    .venv/bin/python bench/capture_s3.py --size-mb 64 --file-mb 0    # smoke run, one file

1. The capture: bench/capture_fixture.py's realistic broker capture (the one bench/capture.py decodes),
   generated once under --work and reused. With --file-mb N it is cut into a rotated series of files of
   about N MiB at packet boundaries (what tcpdump -C N leaves), each a whole pcapng file; 0 keeps one file.
2. The object store: moto's S3-compatible server (the one the tests start), in this process on 127.0.0.1,
   the files put in a bucket. moto copies the whole object out of its buffer for every ranged GET (a
   cost per request that grows with the object, which no real store has): the bench keeps each object's
   bytes once and slices ranges from them (``serve_ranges_without_copying_objects``).
3. Runs, one after the other, each --repeat times (the shortest wall time kept: the machine is shared):
   - `kafkawire decode FOLDER --out DIR` on the local files (in the page cache)
   - `kafkawire decode s3://bench/series/ --fs-option endpoint_override=... --fs-option scheme=http
     --out DIR` (tables to local disk, so that only where the captures are read from differs)
   CPU time is user+sys of the whole process tree (bench/capture.py's subreaper helper and sampler); the
   server's CPU is this process's, printed apart.
4. Reported: wall s, CPU s, MB/s per machine (wall), and the ratio of the local rate to the S3 rate
   (wall time: what a person waits for); CPU per MB of both and of the server (this process), as a
   check on a loaded machine, where wall times follow the other tenants.
5. Checks: both runs write the same row counts per table, and as many frames as the capture has.

Target (issue 25): decoding from the S3-compatible server within 1.5x of the local rate (local MB/s
divided by S3 MB/s <= 1.5). This is a benchmark script, not a test.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import shutil
import sys
from pathlib import Path

from capture import KAFKAWIRE, RunFailed, _compile_bytecode, _warm, run_measured, table_counts
from capture_fixture import CaptureSpec, ensure_capture
from common import machine_line

TARGET_RATIO = 1.5
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "kafkawire-bench", "AWS_SECRET_ACCESS_KEY": "kafkawire-bench-secret",
               "AWS_DEFAULT_REGION": "us-east-1"}


def rotated(capture: Path, folder: Path, file_mb: int) -> list[Path]:
    """``capture`` cut into whole pcapng files of about ``file_mb`` MiB (its section and interface blocks
    first in each), as tcpdump -C leaves a long capture; kept under ``folder`` and reused."""
    import struct

    done = folder / "done"
    if done.exists():
        return sorted(path for path in folder.iterdir() if path.name.startswith("series"))
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    data = memoryview(capture.read_bytes())
    head_end, pos = 0, 0
    while pos < len(data):  # the header blocks: everything before the first packet block
        block_type, length = struct.unpack_from("<II", data, pos)
        if block_type in (6, 3, 2):
            break
        pos += length
    head_end = pos
    limit, number, start, paths = file_mb << 20, 0, head_end, []
    while start < len(data):
        pos = start
        while pos < len(data) and pos - start < limit:
            pos += struct.unpack_from("<I", data, pos + 4)[0]
        path = folder / f"series.pcapng{number or ''}"
        path.write_bytes(bytes(data[:head_end]) + bytes(data[start:pos]))
        paths.append(path)
        number, start = number + 1, pos
    done.touch()
    return paths


def serve_ranges_without_copying_objects() -> None:
    """moto answers a ranged GET by copying the whole object out of its buffer, then slicing the range:
    a cost per request that grows with the object (about 1.6 ms per MB here) and that no real store has.
    The bench keeps each object's bytes once and slices the range from them, so that it measures the
    reader's requests and bytes, not moto's copies."""
    from moto.s3.models import FakeKey

    def value(self) -> bytes:
        kept = self.__dict__.get("_bench_bytes")
        if kept is None:
            with self.lock:
                self._value_buffer.seek(0)
                kept = self.__dict__["_bench_bytes"] = self._value_buffer.read()
        return kept

    FakeKey.value = property(value, FakeKey.value.fset)


def decode(label: str, source: str, out: Path, logs: Path, options: list[str], env: dict) -> tuple:
    command = [str(KAFKAWIRE), "decode", source, "--out", str(out), "--overwrite",
               *[word for option in options for word in ("--fs-option", option)]]
    stdout = logs / f"decode-{label}.out"
    usage = run_measured(label, command, stdout, stdout.with_suffix(".err"), 1800, env)
    found = re.search(r"in ([\d.]+) s(?: on \S+)?, into", stdout.read_text())
    return usage, float(found.group(1)) if found else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", default="/tmp/kafkawire-bench-capture",
                        help="directory for the captures, reused across runs (bench/capture.py's)")
    parser.add_argument("--size-mb", type=int, default=256, help="the capture (MiB)")
    parser.add_argument("--file-mb", type=int, default=32, help="rotated files of this size (MiB); 0: one file")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each (default 2)")
    args = parser.parse_args(argv)
    import boto3
    from moto.server import ThreadedMotoServer

    work = Path(args.work)
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    print("# kafkawire decode from an S3-compatible server\n")
    print(machine_line())
    print(_compile_bytecode())
    facts, _ = ensure_capture(CaptureSpec(args.size_mb, 48, "mixed", False, "pcapng", 1), work)
    capture = Path(facts.path)
    if args.file_mb:
        files = rotated(capture, work / f"series-{capture.stem}-{args.file_mb}mb", args.file_mb)
        local = str(files[0].parent)
    else:
        files, local = [capture], str(capture)
    input_mb = sum(path.stat().st_size for path in files) / 1e6
    print(f"\nCapture: {capture.name}, {input_mb:.1f} MB in {len(files)} file(s), {facts.packets:,} packets, "
          f"{facts.connections} connections, {facts.frames:,} frames\n")

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    serve_ranges_without_copying_objects()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    failures = []
    try:
        host, port = server.get_host_and_port()
        client = boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                              aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                              aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
        client.create_bucket(Bucket="bench")
        for path in files:
            client.upload_file(str(path), "bench", f"series/{path.name}")
        options = [f"endpoint_override={host}:{port}", "scheme=http"]
        env = dict(os.environ, **CREDENTIALS)
        for path in files:
            _warm(path)
        runs: dict[str, list] = {"local disk": [], "S3 server": []}
        server_cpu = []
        for _ in range(args.repeat):
            for label, source, opts in (("local disk", local, []), ("S3 server", "s3://bench/series/", options)):
                before = resource.getrusage(resource.RUSAGE_SELF)
                runs[label].append(decode(label.replace(" ", "-"), source, work / f"out-{label.split()[0]}", logs,
                                          opts, env))
                after = resource.getrusage(resource.RUSAGE_SELF)
                if label == "S3 server":
                    server_cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    except RunFailed as error:
        print(f"FAILED: {error}")
        return 1
    finally:
        server.stop()

    print("| input | wall s | job s | CPU s | MB/s (wall) |")
    print("|---|---|---|---|---|")
    best = {}
    for label, found in runs.items():
        usage, job_s = min(found, key=lambda run: run[0].wall)
        best[label] = usage
        print(f"| {label} | {usage.wall:.1f} | {job_s if job_s is not None else '-'} | {usage.cpu:.1f} | "
              f"{input_mb / usage.wall:.1f} |")
    ratio = best["S3 server"].wall / best["local disk"].wall
    cheapest = {label: min(run[0].cpu for run in found) for label, found in runs.items()}
    print(f"\nCPU per MB (least of the runs): local {cheapest['local disk'] / input_mb * 1000:.0f} ms, S3 "
          f"{cheapest['S3 server'] / input_mb * 1000:.0f} ms, and the server's own (this process) "
          f"{min(server_cpu) / input_mb * 1000:.0f} ms; CPU ratio {cheapest['S3 server'] / cheapest['local disk']:.2f}x")
    ok = ratio <= TARGET_RATIO
    print(f"Local rate / S3 rate: {ratio:.2f}x (target <= {TARGET_RATIO}x): {'PASS' if ok else 'FAIL'}")
    counts = {label: table_counts(work / f"out-{label.split()[0]}", False) for label in runs}
    same = counts["local disk"] == counts["S3 server"] and counts["local disk"]["frames"] == facts.frames
    print(f"Tables: {json.dumps({k: v for k, v in counts['S3 server'].items() if k != 'frames_by_api'})}, "
          f"{'the same from both' if same else 'DIFFERENT: ' + json.dumps(counts)}")
    return 0 if ok and same and not failures else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
