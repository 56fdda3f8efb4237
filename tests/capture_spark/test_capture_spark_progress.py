"""The decode's live progress line (kafkawire.capture_spark.progress): drawn on a pseudo-terminal from
Spark's status tracker, ended with the job; nothing on a stream that is not a terminal."""
from __future__ import annotations

import io
import os
import pty
import re
import select
import threading

import pytest

pytest.importorskip("pyspark")

from support.capture_synthetic import build_synthetic  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    return build_synthetic(tmp_path_factory.mktemp("progress")).path


def read_all(fd: int, into: list, done: threading.Event) -> None:
    while True:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:  # the other end closed
                return
            if not data:
                return
            into.append(data)
        elif done.is_set():
            return


def test_progress_on_a_terminal(spark, capture, tmp_path):
    leader, follower = pty.openpty()
    terminal = os.fdopen(follower, "w", buffering=1)
    assert terminal.isatty()
    seen: list[bytes] = []
    finished = threading.Event()
    reader = threading.Thread(target=read_all, args=(leader, seen, finished))
    reader.start()
    try:
        result = job.decode(spark, [str(capture)], str(tmp_path / "tables"), progress=terminal)
    finally:
        terminal.flush()
        finished.set()
        reader.join()
        terminal.close()
        os.close(leader)
    text = b"".join(seen).decode()
    lines = [line.strip() for line in re.split(r"[\r\n]+", text) if line.strip()]
    total = f"{result.input_bytes / 1e6:,.1f}"  # a small capture: MB with a decimal
    assert lines[0] == f"decode: read 0 tasks, decode 0 tasks: 0.0 of {total} MB"
    # the last line: both stages' tasks all done, the whole capture, a rate
    assert re.fullmatch(rf"decode: read (\d+)/\1 tasks, decode (\d+)/\2 tasks: {total} of {total} MB, [\d.,]+ MB/s",
                        lines[-1]), lines[-1]
    assert text.endswith("\n") and all(line.startswith("decode: ") for line in lines)


def test_no_progress_when_not_a_terminal(spark, capture, tmp_path):
    stream = io.StringIO()
    job.decode(spark, [str(capture)], str(tmp_path / "tables"), progress=stream)
    assert stream.getvalue() == ""
