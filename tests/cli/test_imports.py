"""Import only what is used (issue 33): ``kafkawire broker`` answering its first request, and ``import
kafkawire.client``, load none of what only other commands need (construct, the capture packages and
Spark, the pcap writer, ``importlib.metadata``, code generation); the generated messages load on first
use. Checked on the modules a fresh process holds, not on times."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from kafkawire.broker.groups.offsets_store import OFFSETS_FILE_NAME
from kafkawire.broker.groups.state_files import SHARE_GROUPS_FILE_NAME, STREAMS_GROUPS_FILE_NAME
from kafkawire.broker.transactions.state_file import TRANSACTION_STATE_FILE_NAME
from support.paths import REPO

# Module names (or their packages) that neither the broker nor the client may load.
NOT_LOADED = ("construct", "pyspark", "pyarrow", "pandas", "py4j", "jinja2", "codegen", "importlib.metadata",
              "kafkawire.capture", "kafkawire.capture_spark", "kafkawire.pcap", "kafkawire.layout_formats")

# What the broker loads on the first request that needs it, not at start: the API handler modules but
# those of state recovered at start (share groups), the compression libraries, the HTTP client of OAuth
# key sets.
DEFERRED = ("zstandard", "lz4", "cramjam", "urllib.request", "http.client", "email", "kafkawire.messages.metadata_response",
            *(f"kafkawire.broker.apis.{name}" for name in ("acls", "configs", "consumer_groups", "fetch", "group_admin",
                                                           "list_offsets", "metadata", "offsets", "partitions_admin",
                                                           "producer_ids", "scram_credentials", "share_offsets",
                                                           "telemetry", "topics", "transactions")))

# What a fresh broker (no share or streams group state, no compacted topic, no SASL listener) builds on
# first use, not at start: the share and streams groups (with share's API module), the log cleaner, the
# SASL authenticator and the OAUTHBEARER token checks.
NOT_AT_START = ("kafkawire.broker.apis.share", "kafkawire.broker.groups.share", "kafkawire.broker.groups.streams",
                "kafkawire.broker.storage.cleaner.cleaner", "kafkawire.broker.storage.cleaner.manager",
                "kafkawire.broker.security.authenticator", "kafkawire.broker.security.jwks",
                "kafkawire.broker.security.signed_tokens", "kafkawire.sasl.oauthbearer", "kafkawire.sasl.redact")

# What a broker with no group, transaction, SCRAM, delegation token or ACL settings, and no topic, builds on
# first use, not before its first ApiVersions answer: the group and transaction coordinators (and the
# stores under them), the produce and fetch paths, the partition logs and the record batches, the SCRAM
# store and the SASL mechanisms, the delegation tokens, the ACL authorizer. (Not ssl: asyncio imports it.)
BUILT_ON_FIRST_USE = ("kafkawire.broker.groups.coordinator", "kafkawire.broker.groups.consumer_store",
                      "kafkawire.broker.groups.classic", "kafkawire.broker.transactions.coordinator",
                      "kafkawire.broker.apis.produce", "kafkawire.broker.fetch.reads", "kafkawire.broker.storage.log",
                      "kafkawire.records", "kafkawire.sasl", "kafkawire.broker.security.scram_store",
                      "kafkawire.broker.delegation_tokens", "kafkawire.broker.security.acls")

# The broker command in this process; once it has answered one ApiVersions request, the modules loaded.
# With a third argument, it then sends a request of each API whose handler loads on first use (newest
# version served, default fields) and reports the API keys answered and the modules loaded after them.
BROKER_RUN = r"""
import json, os, socket, struct, sys, threading, time
from kafkawire.cli import main

def read_frame(sock):
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data[4:]

def each_deferred_api(sock, served):
    from kafkawire import framing, messages as m
    from kafkawire.broker.dispatch.handlers import ROUTES
    answered = []
    for key in ROUTES:
        version = served[key]
        header = framing.request_header_class()(request_api_key=key, request_api_version=version,
                                                correlation_id=1000 + key, client_id="imports")
        sock.sendall(framing.encode_request(header, m.api(key).request_class()))
        if framing.read_response(read_frame(sock), key, version).header.correlation_id == 1000 + key:
            answered.append(key)
    return answered

def report():
    deadline = time.monotonic() + 60
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                os._exit(3)
            time.sleep(0.01)
    request = struct.pack(">hhih", 18, 0, 1, -1)  # ApiVersions v0, correlation id 1, no client id
    sock.sendall(struct.pack(">i", len(request)) + request)
    answer = read_frame(sock)
    assert struct.unpack(">i", answer[:4])[0] == 1
    sys.stdout.write("MODULES " + json.dumps(sorted(sys.modules)) + "\n")
    if len(sys.argv) > 3:
        from kafkawire import framing
        versions = framing.read_response(answer, 18, 0).body.api_keys
        answered = each_deferred_api(sock, {v.api_key: v.max_version for v in versions})
        sys.stdout.write("ANSWERED " + json.dumps(answered) + "\n")
        sys.stdout.write("MODULES " + json.dumps(sorted(sys.modules)) + "\n")
    sys.stdout.flush()
    os._exit(0)

threading.Thread(target=report, daemon=True).start()
main(["broker", "--port", sys.argv[1], "--data-dir", sys.argv[2]])
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def reported_by(code: str, *argv: str) -> dict[str, list]:
    """What a fresh interpreter that ran ``code`` printed: each line ``NAME <json>`` (the last of a name)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True,
                          timeout=120)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("MODULES ", "ANSWERED ")))
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    return {name: json.loads(value) for name, value in lines.items()}


def loaded_by(code: str, *argv: str) -> list[str]:
    """``sys.modules`` of a fresh interpreter that ran ``code`` (which prints it after ``MODULES``)."""
    return reported_by(code, *argv)["MODULES"]


def forbidden(modules: list[str], names: tuple[str, ...] = NOT_LOADED) -> list[str]:
    return [name for name in modules if any(name == prefix or name.startswith(prefix + ".") for prefix in names)]


def test_the_broker_command_answers_without_loading_other_commands_modules(tmp_path):
    modules = loaded_by(BROKER_RUN, str(free_port()), str(tmp_path / "data"))
    assert "kafkawire.broker.server" in modules  # (the run did get that far)
    assert forbidden(modules) == []


def test_the_broker_loads_its_apis_compression_and_oauth_http_on_first_use(tmp_path):
    modules = loaded_by(BROKER_RUN, str(free_port()), str(tmp_path / "data"))
    assert forbidden(modules, DEFERRED) == []


def test_a_fresh_broker_starts_without_the_groups_and_cleaner_it_does_not_need(tmp_path):
    modules = loaded_by(BROKER_RUN, str(free_port()), str(tmp_path / "data"))
    assert "kafkawire.broker.network.connection" in modules  # (the run did get that far)
    assert forbidden(modules, NOT_AT_START) == []


def test_a_fresh_broker_answers_before_building_its_coordinators_and_logs(tmp_path):
    modules = loaded_by(BROKER_RUN, str(free_port()), str(tmp_path / "data"))
    assert "kafkawire.broker.apis.cluster" in modules  # (ApiVersions was answered)
    assert forbidden(modules, BUILT_ON_FIRST_USE) == []


def test_a_broker_with_group_and_transaction_state_recovers_it_at_start(tmp_path):
    data = tmp_path / "data"
    (data / "__consumer_offsets").mkdir(parents=True)
    (data / "__consumer_offsets" / OFFSETS_FILE_NAME).write_text("")
    (data / TRANSACTION_STATE_FILE_NAME).write_text("")
    modules = loaded_by(BROKER_RUN, str(free_port()), str(data))
    assert {"kafkawire.broker.groups.coordinator", "kafkawire.broker.transactions.coordinator"} <= set(modules)


def test_a_broker_with_share_and_streams_state_recovers_it_at_start(tmp_path):
    data = tmp_path / "data"
    (data / "__consumer_offsets").mkdir(parents=True)  # (the groups' folder: the streams groups' file is there)
    (data / SHARE_GROUPS_FILE_NAME).write_text("")
    (data / "__consumer_offsets" / STREAMS_GROUPS_FILE_NAME).write_text("")
    modules = loaded_by(BROKER_RUN, str(free_port()), str(data))
    assert {"kafkawire.broker.apis.share", "kafkawire.broker.groups.streams.coordinator"} <= set(modules)


def test_each_api_loaded_on_first_use_answers_its_first_request(tmp_path):
    from kafkawire.broker.dispatch.handlers import ROUTES
    report = reported_by(BROKER_RUN, str(free_port()), str(tmp_path / "data"), "each-api")
    assert report["ANSWERED"] == list(ROUTES)
    apis = {f"kafkawire.broker.apis.{module}" for module, _, _ in ROUTES.values()}
    assert apis <= set(report["MODULES"])


def test_the_client_loads_none_of_them():
    modules = loaded_by("import sys, json, kafkawire.client; print('MODULES', json.dumps(sorted(sys.modules)))")
    assert "kafkawire.client" in modules
    assert forbidden(modules) == []


def test_messages_load_on_first_use():
    before, after = loaded_by("import sys, json, kafkawire.messages as m; before = sorted(sys.modules); "
                              "m.FetchRequest; print('MODULES', json.dumps([before, sorted(sys.modules)]))")
    assert [name for name in before if name.startswith("kafkawire.messages.")] == []
    assert [name for name in after if name.startswith("kafkawire.messages.")] == ["kafkawire.messages.fetch_request"]
