"""The package's types, as a user's type checker sees them.

mypy (pinned in the test extras, configured in pyproject.toml: strict on the public API and on user
code) checks the package and the two scripts in tests/typing/ in one run: ``user_code.py``, a typed
program using the Producer, Consumer, messages, records and framing, must check clean (and it runs,
against a broker of its own); ``user_errors.py`` holds mistakes that must each be reported, exactly
where its ``# E: <code>`` comments say. mypy's cache (.mypy_cache, incremental) keeps reruns short.

The generated messages' types are stubs (.pyi) beside their modules: mypy's stubtest checks them
against the classes at run time (names, constructor parameters and defaults), for kafkawire.messages
and for a package of its own generated with ``python -m codegen --specs DIR --out DIR``.
"""
from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO as ROOT
SCRIPTS = ROOT / "tests" / "typing"
MESSAGES = ROOT / "kafkawire" / "messages"
CACHE = ROOT / ".mypy_cache"
_ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)\s+\[(?P<code>[a-z-]+)\]$")
_EXPECTED = re.compile(r"#\s*E:\s*([a-z-]+(?:,\s*[a-z-]+)*)$")


def _run(args: list[str], env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def _errors(output: str) -> list[dict[str, str]]:
    return [match.groupdict() for line in output.splitlines() if (match := _ERROR.match(line))]


@pytest.fixture(scope="module")
def checked():
    """One mypy run over the package and both scripts: (result, errors as dicts)."""
    result = _run(["-m", "mypy", "--config-file", "pyproject.toml", "--cache-dir", str(CACHE),
                   "kafkawire", "tests/typing/user_code.py", "tests/typing/user_errors.py"])
    assert "Traceback" not in result.stderr, result.stderr
    return result, _errors(result.stdout)


def test_package_and_user_code_check_clean(checked):
    result, errors = checked
    elsewhere = [e for e in errors if not e["path"].endswith("user_errors.py")]
    assert elsewhere == [], result.stdout
    assert "user_errors.py" in result.stdout  # the run did reach the scripts
    assert not [line for line in result.stdout.splitlines() if "note: unused section" in line], result.stdout


def test_every_deliberate_mistake_is_reported(checked):
    result, errors = checked
    expected = set()
    for number, line in enumerate((SCRIPTS / "user_errors.py").read_text().splitlines(), start=1):
        match = _EXPECTED.search(line)
        if match:
            expected |= {(number, code.strip()) for code in match.group(1).split(",")}
    reported = {(int(e["line"]), e["code"]) for e in errors if e["path"].endswith("user_errors.py")}
    assert len(expected) >= 15
    assert reported == expected, result.stdout


def test_mistakes_are_reported_with_the_types_involved(checked):
    _, errors = checked
    messages = {int(e["line"]): e["message"] for e in errors if e["path"].endswith("user_errors.py")}
    lines = (SCRIPTS / "user_errors.py").read_text().splitlines()

    def message(fragment: str) -> str:
        return messages[next(n for n, line in enumerate(lines, start=1) if fragment in line)]

    assert '"max_wait_ms" to "FetchRequest" has incompatible type "str"; expected "int"' in message('"oops"')
    assert 'has type "FetchResponse", variable has type "MetadataResponse"' in message("response: MetadataResponse")
    assert 'expected "FetchPartition"' in message("partitions=[1]")
    assert 'expected "UUID"' in message('topic_id="not a uuid"')
    assert '"topic" to "send" of "Producer" has incompatible type "int"; expected "str"' in message("topic=1")
    assert 'Item "None" of "bytes | None"' in message("record.value.decode()")


def test_user_code_runs():
    result = _run([str(SCRIPTS / "user_code.py")], env={"PYTHONPATH": str(ROOT)}, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["offsets"] == "[0, 1, 2]"
    assert lines["values"] == "['value 0', 'value 1', 'value 2']"
    assert lines["batch"] == "[b'record 0', b'record 1', b'record 2']"
    assert lines["fetch"] == "500" and lines["frames"] == "1"


def _stubtest(package: str, tmp_path: Path, path: Path | None = None) -> subprocess.CompletedProcess:
    # The generated Python readers: in the native decoder's place each class's decode is a C object,
    # which stubtest would report as not a classmethod.
    env = {"KAFKAWIRE_PURE_PYTHON": "1", "MYPY_CACHE_DIR": str(CACHE)}
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(path), str(ROOT)])
        env["MYPYPATH"] = str(path)
    # mypy's defaults: the project's configuration names modules outside the stubs checked here.
    config = tmp_path / "stubtest.ini"
    config.write_text("[mypy]\n")
    return _run(["-m", "mypy.stubtest", package, "--mypy-config-file", str(config)], env=env)


def test_stubs_match_the_classes_at_run_time(tmp_path):
    result = _stubtest("kafkawire.messages", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout


def test_stub_attributes_are_the_fields():
    """stubtest checks constructors; this checks each stub class declares exactly the fields (``_FIELDS``)."""
    messages = importlib.import_module("kafkawire.messages")
    checked = 0
    for stub in sorted(MESSAGES.glob("*.pyi")):
        if stub.name == "__init__.pyi":
            continue
        module = importlib.import_module(f"kafkawire.messages.{stub.stem}")
        top = next(node for node in ast.parse(stub.read_text()).body if isinstance(node, ast.ClassDef))
        for node, cls in [(top, getattr(module, top.name))] + [
                (inner, getattr(getattr(module, top.name), inner.name))
                for inner in top.body if isinstance(inner, ast.ClassDef)]:
            declared = tuple(item.target.id for item in node.body
                             if isinstance(item, ast.AnnAssign) and item.target.id != "API_KEY")
            assert declared == cls._FIELDS, f"{stub.name}: {node.name}"
            checked += 1
    assert checked > len(messages._MODULES)  # every message and its structs


def test_a_package_generated_elsewhere_is_typed(tmp_path):
    """``python -m codegen --specs DIR --out DIR``: a package of its own, typed as kafkawire.messages is."""
    specs = tmp_path / "specs"
    specs.mkdir()
    for name in ("RequestHeader", "ResponseHeader", "FetchRequest", "FetchResponse"):
        (specs / f"{name}.json").write_text((ROOT / "schemas" / f"{name}.json").read_text())
    package = tmp_path / "site" / "fetch_messages"
    result = _run(["-m", "codegen", "--specs", str(specs), "--out", str(package)])
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in package.glob("*.pyi")) == [
        "__init__.pyi", "fetch_request.pyi", "fetch_response.pyi", "request_header.pyi", "response_header.pyi"]
    stubs = _stubtest("fetch_messages", tmp_path, package.parent)
    assert stubs.returncode == 0, stubs.stdout + stubs.stderr
    script = tmp_path / "use_fetch_messages.py"
    script.write_text("from fetch_messages import FetchRequest\n"
                      "request: FetchRequest = FetchRequest.decode(FetchRequest(max_wait_ms=1).encode(12), 12)\n"
                      "FetchRequest(max_wait_ms='oops')\n")
    checked = _run(["-m", "mypy", "--config-file", str(tmp_path / "stubtest.ini"), "--strict",
                    "--cache-dir", str(CACHE), str(script)], env={"MYPYPATH": str(package.parent)})
    assert [(e["line"], e["code"]) for e in _errors(checked.stdout)] == [("3", "arg-type")], checked.stdout
