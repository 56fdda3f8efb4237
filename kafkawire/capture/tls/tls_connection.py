"""Where TLS decryption meets TCP reassembly: ``DecryptingConversation`` stands between a connection's
``TcpReassembler`` events and its ``Conversation`` (the Kafka layer), with the same ``feed``/``finish``.

Until the client's first bytes are read it holds the events. A connection that is not TLS, or whose
client random the key log does not name, is then handed over as it came (``feed`` becomes the
conversation's own: the plaintext path costs nothing more, and a TLS connection without its secrets is
reported "encrypted, no key" with its server name). A connection whose secrets are logged is decrypted:
each direction's records are cut from its stream, the handshake read for the ServerHello's choices and
the key changes (TLS 1.3's Finished and KeyUpdate, TLS 1.2's ChangeCipherSpec), and the application
data passed on as ``StreamData`` at offsets of the plaintext stream, so that framing, SASL and the
tables work as for a plaintext connection.

A connection that cannot be decrypted (secrets missing from the key log, a record that fails
authentication, a cipher suite that is not AEAD) gives one ``tls`` Problem saying why and is skipped
from there on; a gap in a direction (lost segments) ends that direction's decryption, as the record
boundaries and sequence numbers are lost with it.
"""
from __future__ import annotations


from ..kafka.kafka_connection import Conversation
from ..kafka.kafka_framing import REQUEST, RESPONSE
from ..kafka.resync import looks_like_tls
from ..kafka.tls_hello import MAX_HELLO_BYTES, ClientHello, read_client_hello
from ..kafka.tls_hello import WAIT as HELLO_INCOMPLETE
from ..model import Problem, StreamData, StreamEnd, StreamGap
from .handshake import FINISHED, KEY_UPDATE, SERVER_HELLO, TLS12, TLS13, HandshakeError, HandshakeMessages, \
    read_server_hello
from .key_log import KeyLog
from .key_schedule import Suite, hash_bytes, suite, suite_name, tls12_keys, tls13_keys, tls13_next_secret
from .record_protection import Opener, RecordError

__all__ = ["DecryptingConversation"]

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA = 20, 21, 22, 23
MAX_RECORD = (1 << 14) + 2048   # the largest protected record TLS 1.2 allows (TLS 1.3: 2**14 + 256)
MAX_WAITING = 1 << 20           # bytes held in a direction while the other's handshake is awaited
_TRAFFIC_LABELS = {True: ("CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0"),
                   False: ("SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0")}


class _Failed(Exception):
    """The connection cannot be decrypted, for the reason given."""


class _Side:
    """One direction of a decrypted connection."""

    __slots__ = ("sender", "is_client", "buf", "need", "plain_offset", "opener", "pending", "messages", "secret",
                 "handshaking", "ended", "dead")

    def __init__(self, sender: str, is_client: bool):
        self.sender = sender
        self.is_client = is_client
        self.buf = bytearray()          # protected bytes not yet a whole record
        self.need = 0                   # how many more bytes make the record in buf whole
        self.plain_offset = 0           # the plaintext stream's length so far
        self.opener: Opener | None = None   # the keys records are opened with now (None: plaintext)
        self.pending: Opener | None = None  # TLS 1.2: the keys its ChangeCipherSpec turns on
        self.messages = HandshakeMessages()
        self.secret: bytes | None = None    # TLS 1.3: its current traffic secret
        self.handshaking = False        # TLS 1.3: keyed by its handshake traffic secret (until its Finished)
        self.ended = False
        self.dead = False               # a gap: nothing more of it can be decrypted


class DecryptingConversation:
    """``conversation`` fed with plaintext where ``keys`` has the connection's secrets (see the module)."""

    def __init__(self, conversation: Conversation, keys: KeyLog):
        self.conversation = conversation
        self.keys = keys
        self._restart()

    def _restart(self) -> None:
        self._held: list = []           # events while the ClientHello is read
        self._held_bytes = 0
        self._sides: dict[str, _Side] = {}
        self._hello: ClientHello | None = None
        self._secrets: dict[str, bytes] = {}
        self._suite: Suite | None = None
        self._version = 0
        self._waiting: _Side | None = None   # a direction whose records wait on the other's handshake

    # ------------------------------------------------------------------------------------------------
    # Input, as Conversation's

    def feed(self, event) -> list:
        out: list = []
        if self._sides:
            self._decrypting(event, out)
        else:
            self._deciding(event, out)
        return out

    def finish(self) -> list:
        out: list = []
        if not self._sides and self._held:
            self._hand_over(out)
        out += self.conversation.finish()
        return out

    # ------------------------------------------------------------------------------------------------
    # Before the ClientHello is whole

    def _deciding(self, event, out: list) -> None:
        kind = type(event)
        if kind is not StreamData and kind is not StreamGap and kind is not StreamEnd:
            out += self.conversation.feed(event)   # ConnectionOpen, StreamConflict: no stream bytes
            return
        self._held.append(event)
        if kind is StreamData:
            self._held_bytes += len(event.data)
        first = self._held[0]
        if type(first) is not StreamData or first.offset != 0:
            self._hand_over(out)              # a mid-stream start: no handshake to read
            return
        sender = first.sender
        data = b"".join(e.data for e in self._held if type(e) is StreamData and e.sender == sender)
        if len(data) >= 3 and not looks_like_tls(data):
            self._hand_over(out)              # not TLS: the Kafka layer's to judge
            return
        hello = read_client_hello(data)
        if hello is HELLO_INCOMPLETE and self._held_bytes < 4 * MAX_HELLO_BYTES and kind is StreamData:
            return
        secrets = self.keys.of(hello.random) if isinstance(hello, ClientHello) else None
        if not secrets:
            self._hand_over(out)              # reported by the Kafka layer: encrypted, no key
            return
        assert isinstance(hello, ClientHello)
        self._hello, self._secrets = hello, secrets
        broker = self.conversation.other_endpoint(sender)
        self._sides = {sender: _Side(sender, True), broker: _Side(broker, False)}
        self.conversation.decrypting(hello, sender, broker, out)
        held, self._held = self._held, []
        for event in held:
            if self._sides:
                self._decrypting(event, out)

    def _hand_over(self, out: list) -> None:
        """The connection goes to the Kafka layer as it came (this object then only forwards)."""
        held, self._held = self._held, []
        feed = self.conversation.feed
        for event in held:
            out += feed(event)
        self.feed = feed  # type: ignore[method-assign]

    # ------------------------------------------------------------------------------------------------
    # Decrypting

    def _decrypting(self, event, out: list) -> None:
        kind = type(event)
        if kind is StreamData:                # first, as nearly every event is one
            side = self._sides.get(event.sender)
            if side is not None and not side.ended and not side.dead:
                try:
                    self._records(side, event.data, event.ts_ns, out)
                    waiting = self._waiting   # records that waited on this side's handshake
                    if waiting is not None and waiting is not side:
                        self._records(waiting, b"", event.ts_ns, out)
                except _Failed as failure:
                    self._fail(side, event.ts_ns, str(failure), out)
                return
        side = self._sides.get(event.sender) if kind in (StreamData, StreamGap, StreamEnd) else None
        if side is None:
            out += self.conversation.feed(event)
            return
        if side.ended:
            if kind is StreamData:
                self._restart()              # the 4-tuple's next use: a new handshake
                self._deciding(event, out)
            return
        if kind is StreamEnd:
            side.ended = True
            out += self.conversation.feed(StreamEnd(side.sender, side.plain_offset, event.ts_ns, event.reason))
            return
        if kind is StreamGap and not side.dead:
            side.dead, side.buf = True, bytearray()
            self._problem(side, event.ts_ns, f"{event.length} bytes of the TLS stream were not captured "
                          f"({event.reason}): the rest of this direction cannot be decrypted", out)
            out += self.conversation.feed(StreamGap(side.sender, side.plain_offset, event.length, event.ts_ns,
                                                    event.reason))

    def _records(self, side: _Side, data, ts: int, out: list) -> None:
        """Takes the whole records of ``side``'s held bytes and ``data``, and holds the rest. Records are
        read in place (views, not copies), and the plaintext of consecutive ones goes on in one piece:
        clients write many small records, and the Kafka layer's cost is per piece."""
        held = side.buf
        if held:
            held += data
            if len(data) < side.need:         # inside a record, as most segments are: held until it is whole
                side.need -= len(data)
                return
            data = held
        view = memoryview(data)
        pos, end = 0, len(view)
        plain: list = []
        waiting = False
        try:
            while end - pos >= 5:
                kind, length = view[pos], (view[pos + 3] << 8) | view[pos + 4]
                if view[pos + 1] != 3 or not CHANGE_CIPHER_SPEC <= kind <= APPLICATION_DATA or length > MAX_RECORD:
                    raise _Failed(f"not a TLS record at plaintext offset {side.plain_offset} of the "
                                  f"{'client' if side.is_client else 'broker'}'s stream")
                stop = pos + 5 + length
                if stop > end:
                    break
                opener = side.opener
                if kind == APPLICATION_DATA and opener is not None and not side.handshaking:
                    # the steady state, most records: application data under application keys
                    if opener.tls13:
                        content = opener.open_application_data(view[pos:pos + 5], view[pos + 5:stop])
                        if content is not None:
                            plain.append(content)
                            pos = stop
                            continue              # else: another content type, or a failure: below
                    else:
                        plain.append(self._open(side, opener, view[pos:pos + 5], view[pos + 5:stop])[1])
                        pos = stop
                        continue
                if not self._record(side, kind, view[pos:pos + 5], view[pos + 5:stop], plain):
                    if end - pos > MAX_WAITING:
                        raise _Failed("encrypted records came before the handshake that keys them")
                    waiting = True
                    break
                pos = stop
        finally:
            left = end - pos
            # the bytes the record begun at pos still needs (0 when it waits: any call looks again)
            side.need = 0 if waiting else 5 + ((view[pos + 3] << 8) | view[pos + 4]) - left if left >= 5 else 5 - left
            if waiting:
                self._waiting = side
            elif self._waiting is side:
                self._waiting = None
            if data is held:
                view.release()
                del held[:pos]
            else:
                side.buf = bytearray(view[pos:])
                view.release()
            if plain:
                joined = plain[0] if len(plain) == 1 else b"".join(plain)
                out += self.conversation.feed(StreamData(side.sender, side.plain_offset, ts, joined))
                side.plain_offset += len(joined)

    def _record(self, side: _Side, kind: int, header, body, plain: list) -> bool:
        """Takes one record (its application data to ``plain``); False when it must wait for the other
        direction's handshake."""
        opener = side.opener
        if opener is None:
            if kind == HANDSHAKE:
                for message_type, message in self._messages(side, body):
                    if message_type == SERVER_HELLO and not side.is_client:
                        self._server_hello(message)
                return True
            if kind == CHANGE_CIPHER_SPEC:
                if self._version == TLS13:
                    return True               # middlebox compatibility (RFC 8446 D.4): no key change
                if side.pending is None:
                    return False
                side.opener = side.pending
                return True
            if kind == ALERT:
                return True
            return False                      # protected, before its keys are known
        if kind == CHANGE_CIPHER_SPEC:
            return True                       # TLS 1.3's compatibility one, never protected
        inner, content = self._open(side, opener, header, body)
        if inner == APPLICATION_DATA:
            if content:
                plain.append(content)
        elif inner == HANDSHAKE and self._version == TLS13:
            for message_type, _ in self._messages(side, content):
                if message_type == FINISHED and side.handshaking:
                    self._key(side, _TRAFFIC_LABELS[side.is_client][1])
                elif message_type == KEY_UPDATE:
                    side.secret = tls13_next_secret(self._suite, side.secret)  # type: ignore[arg-type]
                    key, iv = tls13_keys(self._suite, side.secret)  # type: ignore[arg-type]
                    side.opener = Opener(self._suite, key, iv, True)  # type: ignore[arg-type]
        return True                           # TLS 1.2's Finished, alerts: nothing for the Kafka layer

    def _open(self, side: _Side, opener: Opener, header, body) -> tuple[int, bytes | memoryview]:
        try:
            return opener.open(header, body)
        except RecordError as error:
            raise _Failed(f"the {'client' if side.is_client else 'broker'}'s {error}: the key log's secrets "
                          f"for this connection are wrong") from None

    def _messages(self, side: _Side, fragment) -> list[tuple[int, bytes]]:
        try:
            return side.messages.feed(fragment)
        except HandshakeError as error:
            raise _Failed(str(error)) from None

    # ------------------------------------------------------------------------------------------------
    # Keys

    def _server_hello(self, message: bytes) -> None:
        try:
            hello = read_server_hello(message)
        except HandshakeError as error:
            raise _Failed(str(error)) from None
        if hello.retry:
            return                            # a second ClientHello (same random) and ServerHello follow
        chosen = suite(hello.cipher_suite)
        if hello.version not in (TLS12, TLS13):
            raise _Failed(f"TLS version 0x{hello.version:04x} is not decrypted (TLS 1.2 and 1.3 are)")
        if chosen is None or (hello.version == TLS13) != (chosen.tls12_iv_bytes == 0):
            raise _Failed(f"{suite_name(hello.cipher_suite)} is not decrypted (AEAD suites are: AES-GCM, "
                          "ChaCha20-Poly1305)")
        self._suite, self._version = chosen, hello.version
        client, server = sorted(self._sides.values(), key=lambda s: not s.is_client)
        if hello.version == TLS13:
            for side in (client, server):
                self._key(side, _TRAFFIC_LABELS[side.is_client][0])
            return
        master = self._secret("CLIENT_RANDOM", 48)
        assert self._hello is not None and self._hello.random is not None
        (ck, civ), (sk, siv) = tls12_keys(chosen, master, self._hello.random, hello.random)
        client.pending, server.pending = Opener(chosen, ck, civ, False), Opener(chosen, sk, siv, False)

    def _key(self, side: _Side, label: str) -> None:
        """Records of ``side`` are protected from here on with the traffic secret logged as ``label``."""
        assert self._suite is not None
        side.secret = self._secret(label, hash_bytes(self._suite))
        key, iv = tls13_keys(self._suite, side.secret)
        side.opener = Opener(self._suite, key, iv, True)
        side.handshaking = label == _TRAFFIC_LABELS[side.is_client][0]

    def _secret(self, label: str, size: int) -> bytes:
        secret = self._secrets.get(label)
        assert self._hello is not None and self._hello.random is not None
        if secret is None:
            raise _Failed(self.keys.missing(label, self._hello.random))
        if len(secret) != size:
            raise _Failed(f"{self.keys.name}'s {label} for this connection is {len(secret)} bytes, "
                          f"{self._suite.name if self._suite else 'its cipher suite'} takes {size}")
        return secret

    # ------------------------------------------------------------------------------------------------
    # Failures

    def _problem(self, side: _Side, ts: int, reason: str, out: list) -> None:
        out.append(Problem(self.conversation.connection, REQUEST if side.is_client else RESPONSE, ts, "tls", reason))

    def _fail(self, side: _Side, ts: int, reason: str, out: list) -> None:
        """The connection cannot be decrypted: one problem, and the Kafka layer gives it up."""
        self.conversation.last_ts = max(self.conversation.last_ts, ts)
        self.conversation.encrypted(self._hello, REQUEST if side.is_client else RESPONSE,
                                    f"encrypted, cannot decrypt: {reason}", out)
        self._sides = {}
        self.feed = self.conversation.feed  # type: ignore[method-assign]
