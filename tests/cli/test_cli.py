"""The ``kafkawire`` command: ``apis`` and ``inspect`` (files, stdin, hex, with and without size prefix),
``--version`` and ``python -m kafkawire``, the errors of ``broker``, ``decode`` and ``report`` (one line,
exit status 2, before Spark starts), and ``report`` on the Arrow engine without Spark. (``decode`` and the
Spark engine run in tests/capture_spark/test_capture_spark_job.py, which has a Spark session.)"""
from __future__ import annotations

import base64
import io
import json
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from support.broker_harness import BrokerThread, RawClient
from support.capture_tables import random_tables
from kafkawire import __version__
from kafkawire.broker.dispatch.versions import SUPPORTED_VERSIONS
from kafkawire.capture.reporting import report
from kafkawire.capture.tables.table_schemas import body_schema
from kafkawire.capture.tables.table_sets import TableSetError, check_out
from kafkawire.capture_spark import job
from kafkawire.cli import main
from kafkawire.framing import encode_request, encode_response
from kafkawire import messages as m
from kafkawire.messages import (
    ApiVersionsResponse, FetchResponse, MetadataRequest, RequestHeader, apis,
)

from support.paths import REPO as ROOT
SCRIPT = Path(sys.executable).parent / "kafkawire"


def run(argv, capsys, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def metadata_request_frame(version=9, correlation_id=5):
    header = RequestHeader(request_api_key=3, request_api_version=version, correlation_id=correlation_id,
                           client_id="cli")
    body = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="events")])
    return encode_request(header, body)


def fetch_response(session_id=9):
    return FetchResponse(session_id=session_id, responses=[FetchResponse.FetchableTopicResponse(topic="events", partitions=[
        FetchResponse.PartitionData(partition_index=2, high_watermark=100, records=b"\x01\x02\x03")])])


def fetch_response_frame(version=12, correlation_id=77):
    return encode_response(1, version, correlation_id, fetch_response(9 if version >= 7 else 0))


# ---------------------------------------------------------------------------------------------------
# apis


def test_apis_table(capsys):
    code, out, err = run(["apis"], capsys)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["key", "name", "versions", "flexible", "broker"]
    assert len(lines) == 1 + len(apis(include_removed=True))
    rows = {line.split()[1]: line.split() for line in lines[1:]}
    assert rows["Fetch"] == ["1", "Fetch", "4-19", "12+", "4-19"]
    assert rows["Produce"] == ["0", "Produce", "3-13", "9+", "3-13"]
    assert rows["ControlledShutdown"] == ["7", "ControlledShutdown", "removed", "-", "-"]
    assert rows["StreamsGroupHeartbeat"] == ["88", "StreamsGroupHeartbeat", "0-0", "0+", "0-0"]
    assert rows["SaslHandshake"] == ["17", "SaslHandshake", "0-1", "none", "0-1"]
    assert rows["Vote"][4] == "-"  # not served: between controllers
    assert rows["ApiVersions"] == ["18", "ApiVersions", "0-4", "3+", "0-4"]


def test_apis_json(capsys):
    code, out, _ = run(["apis", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert len(data) == len(apis(include_removed=True))
    fetch = next(row for row in data if row["key"] == 1)
    assert fetch == {"key": 1, "name": "Fetch", "min_version": 4, "max_version": 19, "removed": False,
                     "flexible_from": 12, "broker_min_version": 4, "broker_max_version": 19}
    shutdown = next(row for row in data if row["key"] == 7)
    assert shutdown == {"key": 7, "name": "ControlledShutdown", "min_version": None, "max_version": None,
                        "removed": True, "flexible_from": None, "broker_min_version": None,
                        "broker_max_version": None}
    handshake = next(row for row in data if row["key"] == 17)
    assert handshake["flexible_from"] is None
    assert (handshake["broker_min_version"], handshake["broker_max_version"]) == (0, 1)
    vote = next(row for row in data if row["name"] == "Vote")
    assert vote["broker_min_version"] is None and vote["broker_max_version"] is None


def test_apis_marks_what_a_running_broker_advertises(tmp_path, capsys):
    """The broker column is what `kafkawire broker` answers to ApiVersions, API by API."""
    with BrokerThread(data_dir=tmp_path / "data") as broker, RawClient(broker.port) as client:
        advertised = client.request(m.ApiVersionsRequest(client_software_name="cli-test",
                                                         client_software_version="1"), 3)
    assert advertised.error_code == 0
    code, out, _ = run(["apis", "--json"], capsys)
    assert code == 0
    marked = {row["key"]: (row["broker_min_version"], row["broker_max_version"]) for row in json.loads(out)
              if row["broker_min_version"] is not None}
    assert marked == {a.api_key: (a.min_version, a.max_version) for a in advertised.api_keys}
    assert marked == SUPPORTED_VERSIONS


def test_version_and_python_dash_m(capsys):
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out == f"kafkawire {__version__}\n"
    result = subprocess.run([sys.executable, "-m", "kafkawire", "--version"], capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    assert result.returncode == 0 and result.stdout == f"kafkawire {__version__}\n", result.stderr
    result = subprocess.run([sys.executable, "-m", "kafkawire", "apis"], capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    assert result.returncode == 0 and "Fetch" in result.stdout


def test_apis_script_entry_point():
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "kafkawire.cli"]
    result = subprocess.run(command + ["apis"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "Fetch" in result.stdout and "4-19" in result.stdout


# ---------------------------------------------------------------------------------------------------
# inspect --request


@pytest.mark.parametrize("prefixed", [True, False])
def test_inspect_request_file(tmp_path, capsys, prefixed):
    data = metadata_request_frame()
    path = tmp_path / "frame.bin"
    path.write_bytes(data if prefixed else data[4:])
    code, out, err = run(["inspect", "--request", str(path)], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["api"] == "Metadata"
    assert result["api_key"] == 3
    assert result["api_version"] == 9
    assert result["header"] == {"request_api_key": 3, "request_api_version": 9, "correlation_id": 5,
                                "client_id": "cli"}
    assert result["body"]["topics"][0]["name"] == "events"
    assert result["body"]["allow_auto_topic_creation"] is True


def test_inspect_request_stdin(capsys, monkeypatch):
    code, out, err = run(["inspect", "--request", "-"], capsys, stdin=metadata_request_frame(), monkeypatch=monkeypatch)
    assert code == 0, err
    assert json.loads(out)["api"] == "Metadata"


@pytest.mark.parametrize("prefixed", [True, False])
def test_inspect_request_hex_stdin(capsys, monkeypatch, prefixed):
    data = metadata_request_frame()
    data = data if prefixed else data[4:]
    text = data.hex()
    spaced = "\n".join(" ".join(text[i:i + 8] for i in range(j, min(j + 32, len(text)), 8))
                       for j in range(0, len(text), 32)) + "\n"
    code, out, err = run(["inspect", "--request", "-", "--hex"], capsys, stdin=spaced.encode(), monkeypatch=monkeypatch)
    assert code == 0, err
    assert json.loads(out)["header"]["correlation_id"] == 5


def test_inspect_request_hex_file(tmp_path, capsys):
    path = tmp_path / "frame.hex"
    path.write_text(metadata_request_frame(version=1).hex().upper())
    code, out, err = run(["inspect", "--request", str(path), "--hex"], capsys)
    assert code == 0, err
    assert json.loads(out)["api_version"] == 1


def test_inspect_request_subprocess_stdin(tmp_path):
    data = metadata_request_frame()
    result = subprocess.run([sys.executable, "-m", "kafkawire.cli", "inspect", "--request", "-"], input=data,
                            capture_output=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["api"] == "Metadata"


# ---------------------------------------------------------------------------------------------------
# inspect --response


@pytest.mark.parametrize("prefixed", [True, False])
@pytest.mark.parametrize("api_arg", ["Fetch", "1", "fetch"])
def test_inspect_response_file(tmp_path, capsys, prefixed, api_arg):
    data = fetch_response_frame()
    path = tmp_path / "response.bin"
    path.write_bytes(data if prefixed else data[4:])
    code, out, err = run(["inspect", "--response", str(path), "--api", api_arg, "--version", "12"], capsys)
    assert code == 0, err
    result = json.loads(out)
    assert result["api"] == "Fetch" and result["api_key"] == 1 and result["api_version"] == 12
    assert result["header"] == {"correlation_id": 77}
    partition = result["body"]["responses"][0]["partitions"][0]
    assert partition["partition_index"] == 2 and partition["high_watermark"] == 100
    assert base64.b64decode(partition["records"]) == b"\x01\x02\x03"
    assert result["body"]["session_id"] == 9


def test_inspect_response_hex_stdin(capsys, monkeypatch):
    data = fetch_response_frame(version=4)
    code, out, err = run(["inspect", "--response", "-", "--hex", "--api", "Fetch", "--version", "4"], capsys,
                         stdin=data.hex().encode(), monkeypatch=monkeypatch)
    assert code == 0, err
    assert json.loads(out)["body"]["responses"][0]["topic"] == "events"


def test_inspect_api_versions_response(tmp_path, capsys):
    body = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=1, min_version=4, max_version=17)])
    path = tmp_path / "r.bin"
    path.write_bytes(encode_response(18, 3, 1, body))
    code, out, err = run(["inspect", "--response", str(path), "--api", "ApiVersions", "--version", "3"], capsys)
    assert code == 0, err
    assert json.loads(out)["body"]["api_keys"] == [{"api_key": 1, "min_version": 4, "max_version": 17}]


def test_inspect_response_without_prefix_whose_correlation_id_looks_like_a_size(tmp_path, capsys):
    """A response frame given without its prefix, whose correlation id happens to equal len(frame) - 4."""
    body = ApiVersionsResponse()
    frame_bytes = encode_response(18, 0, 0, body)[4:]
    correlation_id = len(frame_bytes) - 4
    frame_bytes = encode_response(18, 0, correlation_id, body)[4:]
    path = tmp_path / "r.bin"
    path.write_bytes(frame_bytes)
    code, out, err = run(["inspect", "--response", str(path), "--api", "ApiVersions", "--version", "0"], capsys)
    assert code == 0, err
    assert json.loads(out)["header"] == {"correlation_id": correlation_id}


def test_response_needs_api_and_version(tmp_path, capsys):
    path = tmp_path / "r.bin"
    path.write_bytes(fetch_response_frame())
    one_line_error(*run(["inspect", "--response", str(path), "--api", "Fetch"], capsys), "inspect", "--version")
    one_line_error(*run(["inspect", "--response", str(path), "--version", "12"], capsys), "inspect", "--api")


def test_unknown_api_name(tmp_path, capsys):
    path = tmp_path / "r.bin"
    path.write_bytes(fetch_response_frame())
    one_line_error(*run(["inspect", "--response", str(tmp_path / "absent.bin"), "--api", "Nope", "--version", "1"],
                        capsys), "inspect", "--api", "Nope")  # the API is checked before the file is read


# ---------------------------------------------------------------------------------------------------
# Bad input


def test_bad_response_frame_names_field_path(tmp_path, capsys):
    frame_bytes = fetch_response_frame()[4:]
    assert frame_bytes.endswith(b"\x04\x01\x02\x03" + b"\x00" * 3)  # records, then three tag sections
    cut = frame_bytes[:-5]  # inside the records
    path = tmp_path / "bad.bin"
    path.write_bytes(struct.pack(">i", len(cut)) + cut)
    code, out, err = run(["inspect", "--response", str(path), "--api", "Fetch", "--version", "12"], capsys)
    assert code == 1
    assert out == ""
    assert "FetchResponse.responses[0].partitions[0].records" in err
    assert "at byte" in err
    assert "Traceback" not in err


def test_bad_request_frame_names_header_field(tmp_path, capsys):
    frame_bytes = struct.pack(">hhi", 1, 99, 1) + b"\x00\x00" + b"\x00" * 30
    path = tmp_path / "bad.bin"
    path.write_bytes(struct.pack(">i", len(frame_bytes)) + frame_bytes)
    code, _, err = run(["inspect", "--request", str(path)], capsys)
    assert code == 1
    assert "RequestHeader.request_api_version" in err
    frame_bytes = struct.pack(">hhi", 999, 0, 1) + b"\x00\x00"
    path.write_bytes(frame_bytes)
    code, _, err = run(["inspect", "--request", str(path)], capsys)
    assert code == 1
    assert "RequestHeader.request_api_key" in err


def test_bad_request_body_subprocess(tmp_path):
    data = metadata_request_frame()[4:]
    cut = data[:-4]
    path = tmp_path / "bad.bin"
    path.write_bytes(struct.pack(">i", len(cut)) + cut)
    result = subprocess.run([sys.executable, "-m", "kafkawire.cli", "inspect", "--request", str(path)],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 1
    assert "MetadataRequest." in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_hex_and_missing_file(tmp_path, capsys, monkeypatch):
    # the same one-line form as every other subcommand's: "kafkawire inspect: ..."
    one_line_error(*run(["inspect", "--request", "-", "--hex"], capsys, stdin=b"zz not hex", monkeypatch=monkeypatch),
                   "inspect", "--request -: not hex text")
    one_line_error(*run(["inspect", "--request", str(tmp_path / "absent.bin")], capsys), "inspect",
                   "absent.bin: No such file or directory")


def test_empty_input(capsys, monkeypatch):
    code, _, err = run(["inspect", "--request", "-"], capsys, stdin=b"", monkeypatch=monkeypatch)
    assert code == 1
    assert err.startswith("kafkawire inspect: cannot decode: RequestHeader")


# ---------------------------------------------------------------------------------------------------
# User errors: one line, exit status 2, nothing slow started first


def one_line_error(code, out, err, command, *fragments):
    assert code == 2, (code, err)
    assert out == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(f"kafkawire {command}: "), err
    for fragment in fragments:
        assert fragment in err, err
    return err


@pytest.fixture
def no_spark(monkeypatch):
    """Fails a test that starts Spark."""
    from kafkawire.capture_spark import session as spark

    def refuse(*args, **kwargs):
        raise AssertionError("Spark was started")
    monkeypatch.setattr(spark, "context", refuse)
    monkeypatch.setattr(spark, "session", refuse)


def test_broker_port_in_use(tmp_path, capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, out, err = run(["broker", "--data-dir", str(tmp_path / "data"), "--port", str(port)], capsys)
    one_line_error(code, out, err, "broker", f"cannot listen on 127.0.0.1:{port}", "in use", "--port")


def test_broker_data_dir_that_is_a_file(tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    code, out, err = run(["broker", "--data-dir", str(tmp_path / "file"), "--port", "0"], capsys)
    one_line_error(code, out, err, "broker", f"--data-dir {tmp_path / 'file'}: is a file, not a folder")
    code, out, err = run(["broker", "--data-dir", str(tmp_path / "file" / "data"), "--port", "0"], capsys)
    one_line_error(code, out, err, "broker", f"{tmp_path / 'file'} is a file, not a folder")
    code, out, err = run(["broker", "--data-dir", str(tmp_path / "data"), "--remote-dir", str(tmp_path / "file"),
                          "--port", "0"], capsys)
    one_line_error(code, out, err, "broker", "--remote-dir")


def test_broker_errors_from_a_shell_have_no_traceback(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    result = subprocess.run([sys.executable, "-m", "kafkawire", "broker", "--data-dir", str(tmp_path / "file")],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_decode_input_errors_come_before_spark(tmp_path, capsys, no_spark):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.pcap").write_text("hello, this is text\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "readme.txt").write_text("no captures here\n")
    out = str(tmp_path / "tables")
    for capture, fragment in [(tmp_path / "missing.pcap", "no such file or folder"),
                              (tmp_path / "empty", "no packet captures"),
                              (tmp_path / "folder", "no packet captures"),
                              (tmp_path / "folder" / "*.pcap*", "no such file or folder, and no files match it"),
                              (tmp_path / "notes.pcap", "not a packet capture")]:
        code, stdout, err = run(["decode", str(capture), "--out", out], capsys)
        one_line_error(code, stdout, err, "decode", f"{capture}: {fragment}")
    assert not (tmp_path / "tables").exists()


def table_set(folder: Path) -> Path:
    return random_tables(folder, seed=3, rows=60, records=False)  # the set a decode without --records writes


def test_decode_out_refusals(tmp_path, capsys, no_spark):
    capture = tmp_path / "empty.pcap"
    capture.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
    tables = table_set(tmp_path / "tables")
    (tables / "bodies" / "FetchResponse").mkdir(parents=True)
    pq.write_table(body_schema("FetchResponse").empty_table(), tables / "bodies" / "FetchResponse" / "part-0.parquet")
    before = sorted(str(path) for path in tables.rglob("*"))
    (tmp_path / "file").write_text("x")
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "data.parquet").write_bytes(b"PAR1")
    cases = [(tables, "already holds the tables of a decode", "--overwrite"),
             (tables / "frames", "is a Parquet table"),
             (tables / "frames" / "deeper", f"is inside {tables / 'frames'}, which is a Parquet table"),
             (tables / "records", "is the records table of the tables in"),
             (tables / "bodies", "is the bodies folder of the tables in"),
             (tables / "bodies" / "FetchResponse", "is a Parquet table"),
             (tmp_path / "loose", "is a Parquet table"),
             (tmp_path / "file", "is a file")]
    for out, *fragments in cases:
        code, stdout, err = run(["decode", str(capture), "--out", str(out)], capsys)
        one_line_error(code, stdout, err, "decode", f"--out {out} ", *fragments)
    # nothing was written or removed
    assert sorted(str(path) for path in tables.rglob("*")) == before
    # with --overwrite a table set may be replaced, never a table
    code, _, err = run(["decode", str(capture), "--out", str(tables / "frames"), "--overwrite"], capsys)
    assert code == 2 and "is a Parquet table" in err
    # a folder beside the tables is not inside one, nor is a folder under one with a stray Parquet file
    check_out(str(tables / "more"), overwrite=False)
    check_out(str(tmp_path / "new" / "deeper"), overwrite=False)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "data.parquet").write_bytes(b"PAR1")
    (tmp_path / "home" / "notes.txt").write_text("mine")
    check_out(str(tmp_path / "home" / "tables"), overwrite=False)


def test_decode_api_refuses_an_out_inside_a_table(tmp_path):
    tables = table_set(tmp_path / "tables")
    with pytest.raises(TableSetError, match="is a Parquet table"):
        job.decode(None, [], str(tables / "frames"))  # refused before anything else is looked at
    with pytest.raises(TableSetError, match="already holds the tables"):
        job.decode(None, [], str(tables), overwrite=False)


def test_report_errors(tmp_path, capsys, no_spark):
    (tmp_path / "file").write_text("x")
    (tmp_path / "other").mkdir()
    tables = table_set(tmp_path / "tables")
    shutil_tree = tmp_path / "partial"
    (shutil_tree / "frames").mkdir(parents=True)
    for folder, fragment in [(tmp_path / "missing", "no such folder"),
                             (tmp_path / "file", "is a file"),
                             (tmp_path / "other", "holds no tables of `kafkawire decode`"),
                             (tables / "frames", f"is the frames table; pass the folder that holds the tables, {tables}"),
                             (shutil_tree, "lacks the fetches, produces, problems, connections table(s)")]:
        code, out, err = run(["report", str(folder)], capsys)
        one_line_error(code, out, err, "report", f"{folder}", fragment)
    code, out, err = run(["report", "s3://bucket/tables", "--engine", "arrow"], capsys)  # refused before any access
    one_line_error(code, out, err, "report", "the arrow engine reads local tables only")


def test_report_reads_local_tables_with_arrow_not_spark(tmp_path, capsys, no_spark):
    tables = random_tables(tmp_path / "tables", seed=5, rows=300)
    code, out, err = run(["report", str(tables)], capsys)
    assert code == 0, err
    assert out == report.build_arrow(str(tables)).text() + "\n"
    assert "per API (latency in ms, responses)" in out and "records 60" in out
    code, out, err = run(["report", str(tables), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["totals"] == {"frames": 300, "requests": report.build_arrow(str(tables)).totals["requests"],
                                         "responses": report.build_arrow(str(tables)).totals["responses"],
                                         "fetches": 300, "produces": 30, "connections": 60, "records": 60}


def test_report_engine_choice(tmp_path):
    tables = random_tables(tmp_path / "tables", seed=6, rows=100)
    rows = 100 + 100 + 10 + 25 + 20 + 20  # frames, fetches, produces, problems, connections, records
    assert report.local_rows(str(tables)) == rows
    assert report.local_rows(f"file://{tables}") == rows
    assert report.engine_for(str(tables)) == "arrow"
    assert report.engine_for(str(tables), max_rows=rows) == "arrow"
    assert report.engine_for(str(tables), max_rows=rows - 1) == "spark"
    assert report.local_rows("s3://bucket/tables") is None
    assert report.engine_for("s3://bucket/tables") == "spark"
    assert report.engine_for(str(tables), "spark") == "spark"
    with pytest.raises(ValueError):
        report.engine_for(str(tables), "duckdb")
