"""The Kafka layer of one connection: stream events -> KafkaFrame, Problem and ConnectionSummary.

``Conversation.feed(event)`` takes the events of ``tcp_reassembly.TcpReassembler`` (both directions, in
capture order) and returns the frames and problems they complete; ``finish()`` flushes the rest.
``decode_connection(packets)`` runs both stages over one connection's packets.

What it does, per connection (roles, TLS and epochs here; framing and resync in ``kafka_framing`` and
``resync``, correlation and SASL in ``correlation`` and ``authentication``):

- Roles: the endpoint whose port is in ``broker_ports`` is the broker; else the SYN's destination; else
  the direction whose first bytes validate as request headers (decided lazily, buffering at most
  ``role_buffer`` bytes per direction).
- Framing: int32 size + frame, per direction, without quadratic copies (a frame's pieces are joined once).
  A size above the limit means sync was lost: Problem ``oversized_frame``, then resync.
- Correlation: a FIFO of outstanding requests (Produce with acks=0 expects no response). The next response
  must answer the oldest; one that answers a later request means the ones before it went unanswered; one
  whose id is not outstanding is held (its request may not be framed yet, the directions being framed
  independently) until a later response matches, a bound is hit or the stream ends, then it is unmatched.
- Gaps: Problem ``gap``; the frame they cut gets ``truncated_frame``. When the cut frame's size was known
  the next frame starts where it ends; otherwise the direction resyncs: requests by validating header
  candidates (known API key and version, correlation id >= 0, printable client id) chained to the next
  header, responses by finding an outstanding correlation id chained to the next response. Skipped bytes
  give Problem ``resync``. A capture that starts mid-stream resyncs the same way.
- SASL: SaslHandshake and SaslAuthenticate frames carry their exchange's mechanism and user. After a
  SaslHandshake v0 exchange the client and broker swap raw size-prefixed SASL tokens with no Kafka
  header: they are read for the user and the outcome, never kept, and framing goes on with the Kafka
  requests after them.
- TLS (a TLS record at the start of a direction) and bytes that never validate as Kafka give one Problem
  ``tls`` ("encrypted, no key") / ``not_kafka`` and the connection is skipped; a TLS client's ClientHello
  is read first (``tls_hello``) for the server name and version it asks for. With a key log,
  ``capture.tls`` decrypts the connections it has secrets for and feeds this their plaintext
  (``decrypting``), or says why it cannot (``encrypted``).
- Summaries: each epoch ends with a ``ConnectionSummary`` (times, frames, TLS, SASL).
- Ends: requests still outstanding when the connection closes or the capture ends are reported as
  ``unanswered_request`` with a reason that says which ("capture ended before the response" is the
  normal fate of requests in flight when tcpdump stopped, not evidence of loss). A response that skips
  requests says "no response was captured ...", which is real loss.
- Epochs: when every direction has ended (FIN/RST, or the reassembler's StreamEnd on 4-tuple reuse) or
  data arrives on an ended direction, the conversation starts over (offsets restart at 0).
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Iterable, Iterator

from ...framing import DEFAULT_MAX_FRAME
from .correlation import RequestCorrelation
from .kafka_framing import DEAD, REQUEST, RESPONSE, SCAN, SYNC, DirectionFraming
from ..model import ConnectionSummary, KafkaFrame, Packet, Problem, StreamData, StreamEnd, StreamGap
from .resync import ACCEPT, WAIT, check_request, looks_like_tls, request_candidates, request_verdict
from ..tcp.tcp_reassembly import ConnectionOpen, StreamConflict, TcpReassembler
from .tls_hello import MAX_HELLO_BYTES, ClientHello, read_client_hello
from .tls_hello import WAIT as HELLO_INCOMPLETE

if TYPE_CHECKING:
    from ..tls.key_log import KeyLog
    from ..tls.tls_connection import DecryptingConversation

DEFAULT_MAX_RESPONSE_FRAME = 128 << 20  # fetch.max.bytes (50 MiB) plus generous overhead
ROLE_EVIDENCE = 64 << 10    # bytes of each direction looked at to tell the client from the broker
_CLOSE_REASONS = {"FIN": "connection closed before the response", "RST": "connection reset before the response",
                  "end of capture": "capture ended before the response"}


def _port(endpoint: str) -> int | None:
    try:
        return int(endpoint.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


class Conversation:
    """Frames, correlates and checks one connection's Kafka traffic (see the module docstring): the
    roles and epochs here; it owns each direction's framing (``DirectionFraming``, by sender) and the
    current epoch's pairing of responses with requests (``RequestCorrelation``)."""

    def __init__(self, connection: str, broker_ports: set[int] | None = None, max_frame: int = DEFAULT_MAX_FRAME,
                 max_response_frame: int = DEFAULT_MAX_RESPONSE_FRAME, *, role_buffer: int = 1 << 20,
                 scan_window: int = 4 << 20, max_held: int = 256, max_held_bytes: int = 128 << 20,
                 max_outstanding: int = 4096, max_outstanding_bytes: int = 256 << 20):
        self.connection = connection
        self.broker_ports = set(broker_ports or ())
        self.max_frame = max_frame
        self.max_response_frame = max_response_frame
        self.role_buffer = role_buffer
        self.scan_window = scan_window
        self.max_held = max_held
        self.max_held_bytes = max_held_bytes
        self.max_outstanding = max_outstanding
        self.max_outstanding_bytes = max_outstanding_bytes
        self.client: str | None = None
        self.broker: str | None = None
        self.tls: ClientHello | None = None          # a TLS connection's ClientHello (fields None: unread)
        self.tls_decrypted = False                   # its plaintext comes from capture.tls
        self._endpoints = connection.split("-") if connection.count("-") == 1 else []
        self._sides: dict[str, DirectionFraming] = {}
        self._early: list = []                       # events before the roles are known
        self._early_bytes: Counter = Counter()
        self._early_ended: set[str] = set()
        self._verdicts: dict[str, tuple] = {}        # sender -> ((bytes judged, final), verdict)
        self._first_sender: str | None = None
        self.dead = False                            # given up: not Kafka, or encrypted
        self._reported: set[str] = set()             # once-per-connection problem kinds
        self.last_ts = 0
        self._epoch_first: int | None = None         # the first event of the current epoch
        self._new_epoch_state()
        self._roles_from_ports()

    def _new_epoch_state(self) -> None:
        self._correlation = RequestCorrelation(self, self.max_held, self.max_held_bytes, self.max_outstanding,
                                               self.max_outstanding_bytes)
        self._seen: set[str] = set()
        self._ended: set[str] = set()
        if self.client is not None and self.broker is not None:
            self._new_sides(self.client, self.broker)

    def _new_sides(self, client: str, broker: str) -> None:
        self._correlation.set_roles(client, broker)
        self._sides = {client: DirectionFraming(REQUEST, client, self.max_frame, self, self._correlation),
                       broker: DirectionFraming(RESPONSE, broker, self.max_response_frame, self, self._correlation)}

    # ------------------------------------------------------------------------------------------------
    # Input

    def feed(self, event) -> list:
        out: list = []
        if self.dead:
            self.last_ts = event.ts_ns  # for the summary's end
            return out
        kind = type(event)
        if kind is StreamData:
            side = self._sides.get(event.sender)
            if side is not None and side.mode is SYNC and event.offset == side.pos:
                self.last_ts = event.ts_ns
                data = event.data
                n = len(data)
                if n < side.need:  # inside the frame being collected (most segments of a large one)
                    side.parts.append(data)
                    side.need -= n
                    side.pos += n
                    return out
                used = side.sync(event.offset, data, event.ts_ns, out)
                if used < len(data):
                    side.feed(event.offset + used, memoryview(data)[used:], event.ts_ns, out)
                return out
        elif kind is ConnectionOpen:
            self.last_ts = event.ts_ns
            if self._epoch_first is None:
                self._epoch_first = event.ts_ns
            self._seen.update((event.client, event.server))
            if self.client is None:
                self._set_roles(event.client, event.server, out)
            return out
        elif kind is StreamConflict:
            side = self._sides.get(event.sender)
            out.append(Problem(self.connection, side.direction if side else None, event.ts_ns,
                               "retransmission_conflict",
                               f"a retransmission carried {event.differing} of {event.length} bytes different from "
                               "the first capture of the same sequence range; kept the first",
                               event.offset, event.length))
            return out
        if self.client is None:
            self._early_event(event, out)
        else:
            self._dispatch(event, out)  # sets _last_ts, after summing up an epoch the event comes after
        return out

    def finish(self) -> list:
        """Flushes everything, as if the capture stopped here."""
        out: list = []
        if not self.dead and self.client is None and self._early:
            self._decide_roles(out, final=True)
        if self.client is not None and not self.dead and (
                self._correlation.waiting() or any(s.pos or s.frames for s in self._sides.values())):
            self._end_epoch(self.last_ts, _CLOSE_REASONS["end of capture"], out)
        self._summary(out)
        return out

    def _dispatch(self, event, out: list) -> None:
        sender = event.sender
        side = self._sides.get(sender)
        if side is None or self.dead:
            return
        kind = type(event)
        if side.ended:
            if kind is StreamEnd:
                return
            self._end_epoch(event.ts_ns, "connection reused before the response", out)
            side = self._sides[sender]
        self.last_ts = event.ts_ns
        if self._epoch_first is None:
            self._epoch_first = event.ts_ns
        self._seen.add(sender)
        if kind is StreamData:
            side.feed(event.offset, event.data, event.ts_ns, out)
        elif kind is StreamGap:
            side.gap(event, out)
        elif kind is StreamEnd:
            if event.reason in ("FIN", "RST"):
                self._correlation.sasl.closed()
            side.finish(event.ts_ns, f"the stream ended ({event.reason})", out)
            side.ended = True
            self._ended.add(sender)
            if self._seen <= self._ended and not self.dead:
                why = _CLOSE_REASONS.get(event.reason, f"connection ended ({event.reason}) before the response")
                self._end_epoch(event.ts_ns, why, out)

    # ------------------------------------------------------------------------------------------------
    # What the framing and the correlation ask of the connection

    def frames_seen(self) -> int:
        return sum(side.frames for side in self._sides.values())

    def look_back(self, corr: int, out: list) -> None:
        """A request was framed: the response direction, if scanning, may find its answer in what it holds."""
        responses = self._sides.get(self.broker) if self.broker is not None else None
        if responses is not None and responses.mode is SCAN and responses.buf and responses.hint is None:
            responses.look_back(corr, out)

    def requests_done(self) -> bool:
        """Whether the request direction will frame nothing more in this epoch."""
        requests = self._sides.get(self.client) if self.client is not None else None
        return requests is not None and (requests.ended or requests.mode is DEAD)

    # ------------------------------------------------------------------------------------------------
    # Roles

    def _roles_from_ports(self) -> None:
        if not self.broker_ports or len(self._endpoints) != 2:
            return
        brokers = [e for e in self._endpoints if _port(e) in self.broker_ports]
        if len(brokers) == 1:
            self._set_roles(self._other(brokers[0]), brokers[0], [])

    def _set_roles(self, client: str, broker: str, out: list) -> None:
        self.client, self.broker = client, broker
        self._new_sides(client, broker)
        early, self._early = self._early, []
        for event in early:
            if not self.dead:
                self._dispatch(event, out)

    def _other(self, endpoint: str) -> str:
        candidates = self._endpoints or list(self._early_bytes)
        others = [e for e in candidates if e != endpoint]
        return others[0] if others else "?"

    def _early_event(self, event, out: list) -> None:
        self.last_ts = event.ts_ns
        if self._epoch_first is None:
            self._epoch_first = event.ts_ns
        self._early.append(event)
        kind = type(event)
        if kind is StreamData:
            self._first_sender = self._first_sender or event.sender
            self._early_bytes[event.sender] += len(event.data)
            self._decide_roles(out, final=self._early_bytes[event.sender] > self.role_buffer)
        elif kind is StreamEnd:
            self._early_ended.add(event.sender)
            if self._early_bytes and set(self._early_bytes) <= self._early_ended:
                self._decide_roles(out, final=True)

    def _decide_roles(self, out: list, final: bool) -> None:
        verdicts = {sender: self._role_verdict(sender, final) for sender in self._early_bytes}
        requests = [s for s, v in verdicts.items() if v == "request"]
        tls = [s for s, v in verdicts.items() if v == "tls"]
        if tls:
            sender = tls[0] if len(tls) == 1 else self._first_sender or tls[0]  # the first to send is known here
            self.tls_start(self._early_stream(sender)[0], sender, None, final, out)
        elif len(requests) == 1:
            self._set_roles(requests[0], self._other(requests[0]), out)
        elif len(requests) == 2:
            first = self._first_sender or requests[0]  # known: the verdicts are of senders of data
            self._set_roles(first, self._other(first), out)
        elif len(verdicts) == 2 and all(v == "not kafka" for v in verdicts.values()):
            self.give_up("not_kafka", None, "neither direction starts with a valid Kafka frame", out)
        elif final and verdicts:
            self._guess_roles_by_port(verdicts, out)

    def _guess_roles_by_port(self, verdicts: dict, out: list) -> None:
        """Last resort: brokers listen on a fixed port, clients use ephemeral ones (the higher)."""
        ports = {e: _port(e) for e in self._endpoints}
        if len(ports) == 2 and None not in ports.values() and len(set(ports.values())) == 2 \
                and not all(v == "not kafka" for v in verdicts.values()):
            broker = min(ports, key=lambda e: ports[e] or 0)  # no None here
            self._set_roles(self._other(broker), broker, out)
        else:
            self.give_up("not_kafka", None, "no valid Kafka request header in the first "
                          f"{max(self._early_bytes.values())} bytes of either direction", out)

    def _early_stream(self, sender: str) -> tuple[bytearray, bool]:
        """The first bytes ``sender`` sent (after its last gap, about ROLE_EVIDENCE of them), and whether
        they start its stream."""
        buf = bytearray()
        known_start = True
        for event in self._early:
            if event.sender != sender:
                continue
            if type(event) is StreamGap:
                buf.clear()
                known_start = False
            elif type(event) is StreamData and len(buf) < ROLE_EVIDENCE:
                if not buf and event.offset != 0:
                    known_start = False
                buf += event.data
        return buf, known_start

    def _role_verdict(self, sender: str, final: bool) -> str:
        """'request', 'not kafka', 'tls' or 'wait' for the first bytes ``sender`` sent (after its last gap)."""
        buf, known_start = self._early_stream(sender)
        if not buf:
            return "wait"
        cached = self._verdicts.get(sender)
        if cached is not None and cached[0] == (len(buf), final):
            return cached[1]
        verdict = self._judge_requests(buf, known_start, final)
        self._verdicts[sender] = ((len(buf), final), verdict)
        return verdict

    def _judge_requests(self, buf: bytearray, known_start: bool, final: bool) -> str:
        if known_start and looks_like_tls(buf):
            return "tls"
        if known_start:
            head = check_request(buf, 0, len(buf), self.max_frame, False)
            if head is WAIT:
                return "not kafka" if final else "wait"
            return "request" if head else "not kafka"
        never = lambda p, corr: False  # noqa: E731 - segment starts are not kept here
        for p in request_candidates(buf, 0, len(buf), self.max_frame):
            if request_verdict(buf, p, len(buf), self.max_frame, self.scan_window, never, None, final) is ACCEPT:
                return "request"
        return "wait"

    def tls_start(self, data, sender: str | None, direction: str | None, final: bool, out: list) -> bool:
        """A TLS record starts a stream, ``sender``'s before the roles are known, else ``direction``'s:
        once the ClientHello in ``data`` is whole (or will not be), note it and give the connection up.
        Returns False while waiting for the rest of the ClientHello."""
        hello = read_client_hello(data)
        if hello is HELLO_INCOMPLETE and not final and len(data) < 4 * MAX_HELLO_BYTES:
            return False
        if isinstance(hello, ClientHello):
            self.tls = hello
            if sender is not None:  # the client speaks first in TLS
                self.client, self.broker = sender, self._other(sender)
                direction = REQUEST
            if hello.server_name is not None:
                what = f"a {hello.version or 'TLS'} ClientHello for server name {hello.server_name}"
            else:
                what = f"a {hello.version or 'TLS'} ClientHello without a server name"
        else:
            self.tls = ClientHello(None, None)
            what = "TLS records"
        self.give_up("tls", direction, f"encrypted, no key: {what} (--keylog FILE with its secrets decrypts it)",
                     out)
        return True

    def other_endpoint(self, endpoint: str) -> str:
        return self._other(endpoint)

    def decrypting(self, hello: ClientHello, client: str, broker: str, out: list) -> None:
        """What follows is the plaintext of a TLS connection opened with ``hello`` by ``client``."""
        self.tls, self.tls_decrypted = hello, True
        if self.client is None:
            self._set_roles(client, broker, out)

    def encrypted(self, hello: ClientHello | None, direction: str | None, reason: str, out: list) -> None:
        """A TLS connection that cannot be decrypted, for ``reason``: reported once and skipped."""
        self.tls, self.tls_decrypted = hello or ClientHello(None, None), False
        self.give_up("tls", direction, reason, out)

    def give_up(self, kind: str, direction: str | None, reason: str, out: list) -> None:
        """The connection is not decodable Kafka: report once and skip the rest of it."""
        self.dead = True
        self._early.clear()
        self._early_bytes.clear()
        if kind not in self._reported:
            self._reported.add(kind)
            out.append(Problem(self.connection, direction, self.last_ts, kind, reason))
        for side in self._sides.values():
            side.mode = DEAD
            side.buf = bytearray()
            side.parts = []
        self._correlation.clear()

    def _end_epoch(self, ts: int, why: str, out: list) -> None:
        """Every direction is done: report what is left, sum the epoch up and start afresh."""
        for side in self._sides.values():
            if not side.ended:
                side.finish(ts, "the stream ended", out)
        self._correlation.end(why, out)
        self._summary(out)
        self._new_epoch_state()

    def _summary(self, out: list) -> None:
        """The current epoch's ConnectionSummary, once (nothing for an epoch without events)."""
        if self._epoch_first is None:
            return
        correlation, tls = self._correlation, self.tls
        sasl = correlation.sasl
        out.append(ConnectionSummary(
            self.connection, self.client, self.broker, self._epoch_first, self.last_ts, correlation.requests,
            correlation.responses, tls is not None, tls.server_name if tls else None, tls.version if tls else None,
            sasl.mechanism, sasl.user, sasl.handshake_version, sasl.outcome, sasl.error_code, sasl.count,
            self.tls_decrypted if tls else None))
        self._epoch_first = None


# ----------------------------------------------------------------------------------------------------
# Helpers for the job


def decode_connection(packets: Iterable[Packet], broker_ports: set[int] | None = None,
                      reassembler: TcpReassembler | None = None, keys: KeyLog | None = None,
                      **options) -> Iterator[KafkaFrame | Problem]:
    """Frames and problems of one connection, from its packets in capture order.

    ``options`` go to ``Conversation``; pass a configured ``reassembler`` to change its bounds. ``keys``
    (a ``capture.tls.key_log.KeyLog``) decrypts the TLS connections it has secrets for.
    """
    reassembler = reassembler or TcpReassembler()
    conversation = None
    for packet in packets:
        if conversation is None:
            conversation = new_conversation(packet.connection, broker_ports, keys, **options)
        for event in reassembler.feed(packet):
            yield from conversation.feed(event)
    if conversation is not None:
        for event in reassembler.finish():
            yield from conversation.feed(event)
        yield from conversation.finish()


def new_conversation(connection: str, broker_ports: set[int] | None, keys: KeyLog | None = None,
                     **options) -> Conversation | DecryptingConversation:
    """A connection's Kafka layer, behind TLS decryption when there is a key log (``keys``)."""
    conversation = Conversation(connection, broker_ports, **options)
    if keys is None:
        return conversation
    from ..tls.tls_connection import DecryptingConversation  # cryptography, of the capture extra
    return DecryptingConversation(conversation, keys)


def detect_broker_ports(sample_packets: Iterable[Packet], min_hits: int = 2) -> set[int]:
    """Destination ports of payloads that start with a valid request header, seen at least ``min_hits``
    times and clearly more often than as a source port of such payloads (which would be a client's)."""
    as_destination: Counter = Counter()
    as_source: Counter = Counter()
    for packet in sample_packets:
        payload = packet.payload
        if len(payload) < 14:
            continue
        head = check_request(payload, 0, len(payload), DEFAULT_MAX_FRAME, True)
        if head is None or head is WAIT:
            continue
        as_destination[packet.dport] += 1
        as_source[packet.sport] += 1
    return {port for port, hits in as_destination.items() if hits >= min_hits and hits > 2 * as_source[port]}
