"""TLS captures decrypted with a key log (``capture.tls``), by the capture job on Spark, by its stage-2
body in this process and by ``kafkawire show``: real clients over TLS 1.3 and TLS 1.2 (AES-256-GCM,
AES-128-GCM, ChaCha20-Poly1305), SASL_SSL with SCRAM (``support.tls_capture``).

The oracle: the broker's own plaintext tap of the same connections. Decrypted, the wire capture's
frames, produces, fetches and records tables equal the tap's, row for row (less the times, which are
the packets'); without the key log every connection is "encrypted, no key" with its server name; a key
log cut short or of other connections fails each connection with the reason.
"""
from __future__ import annotations

import io
import json
from argparse import Namespace
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("cryptography")
import pyarrow.parquet as pq  # noqa: E402

from support.capture_in_process import decode_in_process  # noqa: E402
from support.tls_capture import PASSWORD, tls_capture  # noqa: E402
from kafkawire.capture.terminal import show  # noqa: E402
from kafkawire.capture.tls.key_log import load_key_log, parse_key_log  # noqa: E402
from kafkawire.capture_spark import job  # noqa: E402

pytestmark = [pytest.mark.xdist_group("spark"),
              pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")]

_TIMES = {"ts", "ts_first", "latency_ms", "timestamp"}
_COMPARED = ("frames", "produces", "fetches", "records")
NO_KEY = "encrypted, no key: a TLS {} ClientHello for server name localhost (--keylog FILE with its secrets decrypts it)"


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    return tls_capture(tmp_path_factory.mktemp("tls_capture"))


@pytest.fixture(scope="module")
def decoded(spark, captured, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("tls_tables")
    keys = load_key_log(str(captured.keys))
    outs = {"tap": decode_in_process(captured.tap, folder / "tap"),
            "local": decode_in_process(captured.wire, folder / "local", keys=keys),
            "plain": decode_in_process(captured.wire, folder / "plain")}
    outs["spark"] = folder / "spark"
    job.decode(spark, [str(captured.wire)], str(outs["spark"]), records=True, keys=str(captured.keys))
    return outs


def rows(out: Path, table: str) -> list[dict]:
    return pq.read_table(out / table).to_pylist()


def comparable(out: Path, table: str, leaving: set[tuple] = frozenset()) -> list[tuple]:
    """The table's rows without their times, sorted (the connections' order is the packets'). The tap
    writes a SaslAuthenticate request with its secrets already cut out (a shorter frame): its size, and
    the offsets of the requests after it, aside."""
    sasl = {row["connection"] for row in rows(out, "frames") if row["api_name"] == "SaslAuthenticate"}

    def kept(key: str, row: dict) -> bool:
        if key == "size" and row.get("api_name") == "SaslAuthenticate":
            return False
        return key not in _TIMES and not (key == "stream_offset" and row.get("connection") in sasl
                                          and row.get("direction") == "request")
    return sorted(tuple((k, repr(v)) for k, v in row.items() if kept(k, row)) for row in rows(out, table)
                  if (row["connection"], row["correlation_id"]) not in leaving)


def unanswered(out: Path) -> set[tuple]:
    """(connection, correlation id) of the requests whose response the wire capture has not: a client that
    closes its connection leaves the broker's last answers unsent (RST), the tap still records them."""
    return {(p["connection"], p["correlation_id"]) for p in rows(out, "problems") if p["kind"] == "unanswered_request"}


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_decrypted_tables_equal_the_brokers_tap(captured, decoded, engine):
    out = decoded[engine]
    leaving = unanswered(out)
    for table in _COMPARED:
        assert comparable(out, table, leaving) == comparable(decoded["tap"], table, leaving), table
    assert {(r["connection"], r["correlation_id"]) for r in rows(decoded["tap"], "frames")
            if r["direction"] == "response"} - {(r["connection"], r["correlation_id"]) for r in rows(out, "frames")
                                                if r["direction"] == "response"} == leaving
    frames = rows(out, "frames")
    clients = {row["client_id"] for row in frames if row["direction"] == "request"}
    assert {"ck-tls13", "ck-tls13-consumer", "ck-sasl-ssl", "kw-tls12", "kp-tls12-aes128",
            "kp-tls12-chacha"} <= clients
    assert {row["api_name"] for row in frames} >= {"Produce", "Fetch", "JoinGroup", "SaslAuthenticate"}
    assert sum(1 for _ in rows(out, "records")) >= 20
    connections = rows(out, "connections")
    assert len(connections) == len(captured.clients)
    assert all(c["tls"] and c["tls_decrypted"] and c["tls_server_name"] == "localhost" for c in connections)
    assert {c["tls_version"] for c in connections} == {"TLS 1.3", "TLS 1.2"}
    sasl = [c for c in connections if c["sasl_mechanism"]]
    assert sasl and {(c["sasl_mechanism"], c["sasl_user"], c["authentication"]) for c in sasl} == {
        ("SCRAM-SHA-512", "bob", "authenticated")}
    assert PASSWORD not in str(rows(out, "frames"))  # redacted as in plaintext captures
    assert {p["kind"] for p in rows(out, "problems")} <= {"unanswered_request"}


def test_without_the_key_log_every_connection_is_encrypted_no_key(captured, decoded):
    connections = rows(decoded["plain"], "connections")
    assert len(connections) == len(captured.clients)
    assert all(c["tls"] and c["tls_decrypted"] is False and c["requests"] == 0 for c in connections)
    problems = rows(decoded["plain"], "problems")
    versions = {c["connection"]: c["tls_version"] for c in connections}
    assert sorted((p["connection"], p["reason"]) for p in problems) == sorted(
        (connection, NO_KEY.format(version.split()[1])) for connection, version in versions.items())
    assert rows(decoded["plain"], "frames") == []


def _show(capture: Path, keylog: Path | None, *filters: str) -> list[dict]:
    out = io.StringIO()
    args = Namespace(captures=[str(capture)], filter=list(filters), json=True, detail=None, ports=None,
                     fs_options=[], keylog=str(keylog) if keylog else None)
    assert show.run(args, out) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_show_decrypts_as_it_shows_the_tap(captured):
    def lines(capture, keylog):
        shown = _show(capture, keylog)
        leaving = {(line["connection"], line["correlation_id"]) for line in shown
                   if line.get("problem") == "unanswered_request"}
        return [(line["connection"], line["direction"], line["api_name"], line["correlation_id"])
                for line in shown if "frame" in line], leaving
    decrypted, leaving = lines(captured.wire, captured.keys)
    tap, _ = lines(captured.tap, None)
    assert decrypted and sorted(decrypted) == sorted(line for line in tap if line[::3] not in leaving
                                                     or line[1] == "request")


def test_a_key_log_cut_short_or_of_other_connections_fails_each_connection_with_why(captured, tmp_path):
    text = captured.keys.read_text()
    # cut short: the TLS 1.3 application secrets gone, and the last line cut in its secret
    kept = [line for line in text.splitlines() if not line.startswith(("CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC"))]
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(kept)[:-7])
    assert parse_key_log(cut.read_text()).malformed == 1
    problems = [line for line in _show(captured.wire, cut, "problems") if line.get("problem") == "tls"]
    tls13 = [p for p in problems if "TRAFFIC_SECRET_0" in p["reason"]]
    assert len(tls13) >= 4, problems
    assert all(p["reason"].startswith("encrypted, cannot decrypt: key log cut.log has no ")
               and "did not parse, the first at line" in p["reason"] for p in tls13)
    # wrong: every secret flipped
    wrong = tmp_path / "wrong.log"
    wrong.write_text("".join(f"{label} {random} {bytes(b ^ 1 for b in bytes.fromhex(secret)).hex()}\n"
                             for label, random, secret in (line.split() for line in text.splitlines()
                                                           if line and not line.startswith("#"))))
    problems = [line for line in _show(captured.wire, wrong, "problems") if line.get("problem") == "tls"]
    assert len(problems) == len(captured.clients)
    assert all(p["reason"].startswith("encrypted, cannot decrypt: the ") and "'s record 0 under these keys failed "
               "authentication" in p["reason"] and p["reason"].endswith("are wrong") for p in problems), problems
    assert [line for line in _show(captured.wire, wrong) if "frame" in line] == []
