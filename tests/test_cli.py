"""The ``kafkawire`` command: ``apis`` and ``inspect`` (files, stdin, hex, with and without size prefix)."""
from __future__ import annotations

import base64
import io
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kafkawire.cli import main
from kafkawire.framing import encode_request, encode_response
from kafkawire.messages import (
    ApiVersionsResponse, FetchRequest, FetchResponse, MetadataRequest, RequestHeader, api, apis,
)

ROOT = Path(__file__).resolve().parent.parent
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
    assert lines[0].split() == ["key", "name", "versions", "flexible"]
    assert len(lines) == 1 + len(apis(include_removed=True))
    rows = {line.split()[1]: line.split() for line in lines[1:]}
    assert rows["Fetch"] == ["1", "Fetch", "4-19", "12+"]
    assert rows["Produce"] == ["0", "Produce", "3-13", "9+"]
    assert rows["ControlledShutdown"] == ["7", "ControlledShutdown", "removed", "-"]
    assert rows["StreamsGroupHeartbeat"] == ["88", "StreamsGroupHeartbeat", "0-0", "0+"]
    assert rows["SaslHandshake"] == ["17", "SaslHandshake", "0-1", "none"]
    assert rows["ApiVersions"] == ["18", "ApiVersions", "0-4", "3+"]


def test_apis_json(capsys):
    code, out, _ = run(["apis", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert len(data) == len(apis(include_removed=True))
    fetch = next(row for row in data if row["key"] == 1)
    assert fetch == {"key": 1, "name": "Fetch", "min_version": 4, "max_version": 19, "removed": False,
                     "flexible_from": 12}
    shutdown = next(row for row in data if row["key"] == 7)
    assert shutdown == {"key": 7, "name": "ControlledShutdown", "min_version": None, "max_version": None,
                        "removed": True, "flexible_from": None}
    handshake = next(row for row in data if row["key"] == 17)
    assert handshake["flexible_from"] is None


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
    code, _, err = run(["inspect", "--response", str(path), "--api", "Fetch"], capsys)
    assert code == 2
    assert "--version" in err
    code, _, err = run(["inspect", "--response", str(path), "--version", "12"], capsys)
    assert code == 2


def test_unknown_api_name(tmp_path, capsys):
    path = tmp_path / "r.bin"
    path.write_bytes(fetch_response_frame())
    code, _, err = run(["inspect", "--response", str(path), "--api", "Nope", "--version", "1"], capsys)
    assert code == 2
    assert "Nope" in err


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
    code, _, err = run(["inspect", "--request", "-", "--hex"], capsys, stdin=b"zz not hex", monkeypatch=monkeypatch)
    assert code == 2 and "kafkawire:" in err
    code, _, err = run(["inspect", "--request", str(tmp_path / "absent.bin")], capsys)
    assert code == 2 and "kafkawire:" in err


def test_empty_input(capsys, monkeypatch):
    code, _, err = run(["inspect", "--request", "-"], capsys, stdin=b"", monkeypatch=monkeypatch)
    assert code == 1
    assert "RequestHeader" in err
