"""``kafkawire fuzz``: generated and malformed requests against a running broker, its answers checked.

The target is asked for its ApiVersions; then, until the time is up, each API and version it advertises
(and kafkawire knows) is sent requests drawn by ``kafkawire.testing.values``, in turn, and a quarter of
the frames are malformed (``kafkawire.testing.mutations`` on the body, the header or the size prefix;
each on a connection of its own). Every answer is checked:

- it decodes exactly (no bytes left over) with the schema of the version asked, and its correlation
  id is the request's;
- a malformed request gets an answer that decodes or a clean disconnect, within ``timeout_ms``;
- no request is left unanswered (a hang), and the target keeps accepting connections (a crash).

By default only APIs that change nothing are sent (``READ_ONLY``: Metadata without auto-creation,
ApiVersions, Describe*, List*, Fetch, FindCoordinator, OffsetFetch, OffsetForLeaderEpoch); timeouts and
waits in requests are kept under 100 ms and Produce always asks for acks, so an honest broker answers
at once. Findings (undecodable, wrong correlation id, hung, crashed) are saved under ``out`` as the
request's and response's bytes; ``FuzzReport.exit_code`` is 1 when there is any.
"""
from __future__ import annotations

import random
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafkawire import messages
from kafkawire.errors import DecodeError, EncodeError
from kafkawire.framing import decode_request, encode_request, read_response

from .mutations import mutate
from .values import MessageValues

__all__ = ["Fuzzer", "FuzzReport", "Finding", "READ_ONLY", "read_only", "command"]

API_VERSIONS = 18
CLIENT_ID = "kafkawire-fuzz"
READ_ONLY = frozenset({"ApiVersions", "Metadata", "Fetch", "FindCoordinator", "OffsetFetch", "OffsetForLeaderEpoch"})
_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
_MAX_WAIT_MS = 100


def read_only(name: str) -> bool:
    """An API that changes nothing on a broker (sent by default)."""
    return name in READ_ONLY or name.startswith(("Describe", "List")) or name.endswith("Describe")


@dataclass
class Finding:
    kind: str  # undecodable, correlation, hang, crash
    api: str
    version: int
    malformed: bool
    reason: str
    request: bytes
    response: bytes | None = None


@dataclass
class Row:
    requests: int = 0
    decoded: int = 0
    error_codes: set = field(default_factory=set)
    disconnects: int = 0
    undecodable: int = 0
    hung: int = 0


@dataclass
class FuzzReport:
    advertised: dict[int, tuple[int, int]]
    rows: dict[tuple[str, int, bool], Row]  # (API, version, malformed) -> counts
    findings: list[Finding]
    skipped: list[str]  # advertised APIs not sent, and why

    @property
    def exit_code(self) -> int:
        return 1 if self.findings else 0

    def table(self) -> str:
        lines = [f"{'API':<34} {'version':>7} {'requests':>8} {'decoded':>7} {'disconnects':>11} "
                 f"{'undecodable':>11} {'hung':>4}  error codes"]
        for (name, version, malformed), row in sorted(self.rows.items()):
            label = f"{name} (malformed)" if malformed else name
            codes = ",".join(str(code) for code in sorted(row.error_codes)) or "-"
            lines.append(f"{label:<34} {version:>7} {row.requests:>8} {row.decoded:>7} {row.disconnects:>11} "
                         f"{row.undecodable:>11} {row.hung:>4}  {codes}")
        return "\n".join(lines)


class _Closed(Exception):
    """The target closed the connection."""


class _Hang(Exception):
    """No answer within the timeout."""


class _Connection:
    def __init__(self, host: str, port: int, timeout_s: float):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.timeout_s = timeout_s

    def exchange(self, frame: bytes) -> bytes:
        """Send a frame, return the next frame (without its size prefix)."""
        self.sock.sendall(frame)
        deadline = time.monotonic() + self.timeout_s
        size = _SIZE.unpack(self._exactly(4, deadline))[0]
        if size < 0:
            raise DecodeError(f"response size prefix {size}", 0, ["ResponseFrame"])
        return self._exactly(size, deadline)

    def _exactly(self, n: int, deadline: float) -> bytes:
        data = bytearray()
        while len(data) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Hang()
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(min(n - len(data), 1 << 20))
            except socket.timeout:
                raise _Hang() from None
            except (ConnectionResetError, BrokenPipeError):
                raise _Closed() from None
            if not chunk:
                raise _Closed()
            data += chunk
        return bytes(data)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class Fuzzer:
    """One run against ``host:port``; ``run()`` returns the FuzzReport."""

    def __init__(self, host: str, port: int, *, seconds: float = 30, seed: int | None = None,
                 out: str | Path | None = None, all_apis: bool = False, timeout_ms: int = 5000,
                 malformed: float = 0.25, max_requests: int | None = None, skip: frozenset[str] = frozenset()):
        self.host, self.port = host, port
        self.skip = frozenset(skip)  # API names not to send
        self.seconds, self.all_apis, self.malformed = seconds, all_apis, malformed
        self.timeout_s = timeout_ms / 1000
        self.max_requests = max_requests
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1 << 32)
        self.rng = random.Random(self.seed)
        self.values = MessageValues(self.rng)
        self.out = Path(out) if out is not None else None
        self.rows: dict[tuple[str, int, bool], Row] = {}
        self.findings: list[Finding] = []
        self.correlation = 0
        self._connection: _Connection | None = None

    # ---- the run ------------------------------------------------------------------------------------
    def run(self) -> FuzzReport:
        advertised = self._api_versions()
        pairs, skipped = self._plan(advertised)
        deadline = time.monotonic() + self.seconds
        sent = 0
        order: list[tuple] = []
        while pairs and time.monotonic() < deadline and (self.max_requests is None or sent < self.max_requests):
            if not order:
                order = list(pairs)
                self.rng.shuffle(order)
            info, version = order.pop()
            if self.rng.random() < self.malformed:
                self._malformed(info, version)
            else:
                self._valid(info, version)
            sent += 1
            if any(f.kind == "crash" for f in self.findings):
                break
        self._close()
        self._save()
        return FuzzReport(advertised, self.rows, self.findings, skipped)

    def _plan(self, advertised: dict[int, tuple[int, int]]):
        pairs, skipped = [], []
        for key, (low, high) in sorted(advertised.items()):
            try:
                info = messages.api(key)
            except KeyError:
                skipped.append(f"API key {key}: not known to kafkawire")
                continue
            if info.removed:
                skipped.append(f"{info.name} ({key}): removed from Kafka, yet advertised")
                continue
            if info.name in self.skip:
                skipped.append(f"{info.name}: skipped as asked")
                continue
            if not (self.all_apis or read_only(info.name)):
                skipped.append(f"{info.name}: changes the target (--all-apis sends it)")
                continue
            versions = range(max(low, info.min_version), min(high, info.max_version) + 1)
            if not versions:
                skipped.append(f"{info.name}: advertised v{low}-{high}, kafkawire knows v{info.min_version}-"
                               f"{info.max_version}")
            pairs += [(info, version) for version in versions]
        return pairs, skipped

    # ---- requests -----------------------------------------------------------------------------------
    def _request_frame(self, info, version: int) -> tuple[bytes, int]:
        for _ in range(20):  # a drawn value that cannot be written (none expected): draw again
            body = self.values.message(info.request_class, version)
            _keep_it_harmless(body, info.key, version, self.rng)
            self.correlation = (self.correlation + 1) & 0x7FFFFFFF
            header = messages.RequestHeader(request_api_key=info.key, request_api_version=version,
                                            correlation_id=self.correlation, client_id=CLIENT_ID)
            try:
                return encode_request(header, body), self.correlation
            except EncodeError:
                continue
        raise RuntimeError(f"could not draw a {info.request} v{version} that encodes")

    def _valid(self, info, version: int) -> None:
        frame, correlation = self._request_frame(info, version)
        row = self._row(info.name, version, False)
        row.requests += 1
        try:
            connection = self._connect()
        except OSError as error:
            self._find("crash", info, version, False, f"cannot connect: {error}", frame)
            return
        try:
            answer = connection.exchange(frame)
        except _Hang:
            row.hung += 1
            self._find("hang", info, version, False, f"no answer in {self.timeout_s:g} s", frame)
            self._close()
            return
        except (_Closed, OSError):
            row.disconnects += 1
            self._close()
            return
        except DecodeError as error:
            row.undecodable += 1
            self._find("undecodable", info, version, False, str(error), frame)
            self._close()
            return
        self._check(info, version, False, frame, correlation, answer, row)

    def _malformed(self, info, version: int) -> None:
        valid, correlation = self._request_frame(info, version)
        frame = self._mangled(valid, info, version)
        if frame is None:
            return
        row = self._row(info.name, version, True)
        row.requests += 1
        intact = frame[4:4 + 8] == _HEADER.pack(info.key, version, correlation)
        try:
            connection = _Connection(self.host, self.port, self.timeout_s)
        except OSError as error:
            self._find("crash", info, version, True, f"cannot connect: {error}", frame)
            return
        try:
            answer = connection.exchange(frame)
        except _Hang:
            row.hung += 1
            self._find("hang", info, version, True, f"no answer and no disconnect in {self.timeout_s:g} s", frame)
            return
        except (_Closed, OSError):
            row.disconnects += 1  # the expected answer to most malformed requests
            return
        except DecodeError as error:
            row.undecodable += 1
            self._find("undecodable", info, version, True, str(error), frame)
            return
        finally:
            connection.close()
        if intact:
            self._check(info, version, True, frame, correlation, answer, row)
        else:
            row.decoded += 1  # an answer to what the target made of a mangled header: nothing to hold it to

    def _mangled(self, frame: bytes, info, version: int) -> bytes | None:
        """``frame`` with its body, its header or its size prefix mutated; None when every try made a
        request an honest broker may leave unanswered for long (acks=0, a long wait or timeout)."""
        for _ in range(10):
            mangled = self._mutated(frame, info, version)
            if not _may_wait(mangled):
                return mangled
        return None

    def _mutated(self, frame: bytes, info, version: int) -> bytes:
        payload = frame[4:]
        header_size = _header_size(payload, info, version)
        choice = self.rng.random()
        if choice < 0.8:  # the body: the header still says which API, version and correlation id
            body, _ = mutate(payload[header_size:], self.rng)
            payload = payload[:header_size] + body
            frame = _SIZE.pack(len(payload)) + payload
        elif choice < 0.9:  # anywhere, header included
            payload, _ = mutate(payload, self.rng)
            frame = _SIZE.pack(len(payload)) + payload
        else:  # a size prefix no broker accepts
            frame = _SIZE.pack(self.rng.choice((-1, -(1 << 31), 0x7FFFFFFF))) + payload
        return frame

    def _check(self, info, version: int, malformed: bool, frame: bytes, correlation: int, answer: bytes,
               row: Row) -> None:
        if len(answer) < 4 or _SIZE.unpack_from(answer)[0] != correlation:
            got = _SIZE.unpack_from(answer)[0] if len(answer) >= 4 else None
            self._find("correlation", info, version, malformed,
                       f"correlation id {got}, the request's was {correlation}", frame, answer)
            if not malformed:
                self._close()
            return
        try:
            response = read_response(answer, info.key, version)
        except DecodeError as error:
            row.undecodable += 1
            self._find("undecodable", info, version, malformed, str(error), frame, answer)
            return
        if response.trailing:
            row.undecodable += 1
            self._find("undecodable", info, version, malformed,
                       f"{response.trailing} bytes after the {info.response} v{response.version} body", frame, answer)
            return
        row.decoded += 1
        row.error_codes |= _error_codes(response.body)

    # ---- ApiVersions --------------------------------------------------------------------------------
    def _api_versions(self) -> dict[int, tuple[int, int]]:
        info = messages.api(API_VERSIONS)
        version = info.max_version
        for _ in range(3):
            self.correlation += 1
            header = messages.RequestHeader(request_api_key=API_VERSIONS, request_api_version=version,
                                            correlation_id=self.correlation, client_id=CLIENT_ID)
            body = messages.ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version="1")
            answer = self._connect().exchange(encode_request(header, body))
            response: messages.ApiVersionsResponse = read_response(answer, API_VERSIONS, version).body  # type: ignore[assignment]
            if response.error_code == 35:  # UNSUPPORTED_VERSION: the target's newest is in the answer (KIP-511)
                offered = [k.max_version for k in response.api_keys if k.api_key == API_VERSIONS]
                version = min(offered[0] if offered else 0, version - 1)
                self._close()
                continue
            if response.error_code:
                raise ConnectionError(f"ApiVersions v{version} answered error {response.error_code}")
            return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        raise ConnectionError("the target accepts no ApiVersions version")

    # ---- bookkeeping --------------------------------------------------------------------------------
    def _connect(self) -> _Connection:
        if self._connection is None:
            self._connection = _Connection(self.host, self.port, self.timeout_s)
        return self._connection

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _row(self, name: str, version: int, malformed: bool) -> Row:
        return self.rows.setdefault((name, version, malformed), Row())

    def _find(self, kind: str, info, version: int, malformed: bool, reason: str, request: bytes,
              response: bytes | None = None) -> None:
        self.findings.append(Finding(kind, info.name, version, malformed, reason, request, response))
        if kind in ("hang", "undecodable", "correlation") and not self._still_up():
            self.findings.append(Finding("crash", info.name, version, malformed,
                                         "the target stopped accepting connections", request))

    def _still_up(self) -> bool:
        for _ in range(3):
            try:
                socket.create_connection((self.host, self.port), timeout=self.timeout_s).close()
                return True
            except OSError:
                time.sleep(0.2)
        return False

    def _save(self) -> None:
        if self.out is None or not self.findings:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        lines = []
        for number, finding in enumerate(self.findings, start=1):
            stem = f"{number:04d}-{finding.kind}-{finding.api}-v{finding.version}" + (
                "-malformed" if finding.malformed else "")
            (self.out / f"{stem}.request.bin").write_bytes(finding.request)
            if finding.response is not None:
                (self.out / f"{stem}.response.bin").write_bytes(finding.response)
            lines.append(f"{stem}: {finding.reason}")
        (self.out / "findings.txt").write_text(f"seed {self.seed}\n" + "\n".join(lines) + "\n")


def _may_wait(frame: bytes) -> bool:
    """A frame that reads as a request rightly left unanswered: a Produce with acks=0, or a request whose
    wait or timeout (MaxWaitMs, a group's rebalance timeout...) is longer than the fuzzer's."""
    try:
        _, body = decode_request(frame[4:], exact=False)
    except DecodeError:
        return False
    return getattr(body, "acks", None) == 0 or _longest_wait(body) > _MAX_WAIT_MS


def _header_size(payload: bytes, info, version: int) -> int:
    """Bytes of the request header at the start of ``payload`` (client id and, flexible, its tags)."""
    (client_id,) = struct.unpack_from(">h", payload, 8)
    size = 10 + max(client_id, 0)
    return size + (1 if info.request_header_version(version) >= 2 else 0)


def _keep_it_harmless(body, key: int, version: int, rng: random.Random) -> None:
    """Requests an honest broker answers at once, and Metadata that creates no topic."""
    _short_waits(body, rng)
    if key == messages.ApiKey.PRODUCE:  # acks=0 would get no answer to check
        body.acks = rng.choice((-1, 1))
    elif key == messages.ApiKey.METADATA:  # before v4 asking for topics may create them; from v4 say not to
        if version < 4:
            body.topics = [] if version == 0 else None
        else:
            body.allow_auto_topic_creation = False


def _walk(obj):
    """(struct, attribute, value) for every field of a message, at any depth."""
    for name in getattr(obj, "_FIELDS", ()):
        value = getattr(obj, name)
        yield obj, name, value
        if isinstance(value, (list, tuple)):
            for item in value:
                yield from _walk(item)
        elif hasattr(value, "_FIELDS"):
            yield from _walk(value)


def _is_wait(name: str, value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and name.endswith(("timeout_ms", "wait_ms"))


def _short_waits(message, rng: random.Random) -> None:
    """Every ``*timeout_ms`` and ``*wait_ms`` integer field, at any depth, below 100 ms."""
    for struct_obj, name, value in list(_walk(message)):
        if _is_wait(name, value):
            setattr(struct_obj, name, rng.randint(0, _MAX_WAIT_MS))


def _longest_wait(message) -> int:
    """The largest ``*timeout_ms`` or ``*wait_ms`` value in a message, at any depth (0 without one)."""
    return max((value for _, name, value in _walk(message) if _is_wait(name, value)), default=0)


def _error_codes(message) -> set:
    """Every error_code in a decoded message, at any depth."""
    return {value for _, name, value in _walk(message) if name == "error_code" and isinstance(value, int)}


def command(bootstrap: str, *, seconds: float = 30, seed: int | None = None, out: str | None = None,
            all_apis: bool = False, timeout_ms: int = 5000) -> int:
    """``kafkawire fuzz``: run, print the table and the findings; the exit status."""
    host, _, port = bootstrap.rpartition(":")
    if not host or not port.isdigit():
        print(f"kafkawire fuzz: --bootstrap {bootstrap!r} is not HOST:PORT", file=sys.stderr)
        return 2
    if all_apis:
        print("WARNING: --all-apis sends requests that CHANGE THE TARGET (produce, create and delete topics, "
              "commit offsets, join groups, transactions, ACLs, configs...). Never point it at a cluster you "
              "care about.", file=sys.stderr)
    fuzzer = Fuzzer(host, int(port), seconds=seconds, seed=seed, out=out, all_apis=all_apis, timeout_ms=timeout_ms)
    try:
        report = fuzzer.run()
    except (OSError, DecodeError) as error:
        print(f"kafkawire fuzz: cannot fuzz {bootstrap}: {error}", file=sys.stderr)
        return 2
    print(report.table())
    for note in report.skipped:
        print(f"not sent: {note}")
    kinds: dict[str, int] = {}
    for finding in report.findings:
        kinds[finding.kind] = kinds.get(finding.kind, 0) + 1
        print(f"FINDING {finding.kind}: {finding.api} v{finding.version}"
              f"{' (malformed request)' if finding.malformed else ''}: {finding.reason}")
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())) or "no findings"
    saved = f"; request and response bytes in {out}" if report.findings and out else ""
    print(f"seed {fuzzer.seed}: {sum(r.requests for r in report.rows.values())} requests, {summary}{saved}")
    return report.exit_code
