"""The TLS handshake as a decryptor needs it: handshake messages out of records (``HandshakeMessages``)
and what the ServerHello chose (``read_server_hello``): the version, the cipher suite, the server
random and whether the extended master secret is in use.

The ClientHello's random, server name and versions are ``kafka.tls_hello``'s. The key exchange itself
(key shares, certificates) is not read: the key log gives the secrets it agreed on.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["HandshakeMessages", "HandshakeError", "ServerHello", "read_server_hello",
           "CLIENT_HELLO", "SERVER_HELLO", "FINISHED", "KEY_UPDATE"]

CLIENT_HELLO, SERVER_HELLO, FINISHED, KEY_UPDATE = 1, 2, 20, 24
MAX_MESSAGE_BYTES = 1 << 20  # certificate chains are the largest handshake messages, some KB
SUPPORTED_VERSIONS, EXTENDED_MASTER_SECRET = 43, 23
TLS12, TLS13 = 0x0303, 0x0304
# A ServerHello with this random is a HelloRetryRequest (RFC 8446 4.1.3): another ClientHello follows
HELLO_RETRY_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
_U16 = struct.Struct(">H")


class HandshakeError(Exception):
    """Handshake bytes that do not parse."""


class ServerHello(NamedTuple):
    version: int               # 0x0304 for TLS 1.3 (supported_versions), else legacy_version
    random: bytes
    cipher_suite: int
    extended_master_secret: bool
    retry: bool                # a HelloRetryRequest


class HandshakeMessages:
    """One direction's handshake messages (type, body), from the handshake records' fragments: a message
    may span records and a record hold several."""

    __slots__ = ("_buf",)

    def __init__(self):
        self._buf = bytearray()

    def feed(self, fragment) -> list[tuple[int, bytes]]:
        buf = self._buf
        buf += fragment
        messages, pos = [], 0
        while len(buf) - pos >= 4:
            length = int.from_bytes(buf[pos + 1:pos + 4], "big")
            if length > MAX_MESSAGE_BYTES:
                raise HandshakeError(f"a handshake message of {length} bytes")
            if len(buf) - pos - 4 < length:
                break
            messages.append((buf[pos], bytes(buf[pos + 4:pos + 4 + length])))
            pos += 4 + length
        del buf[:pos]
        return messages

    def pending(self) -> bool:
        """Whether part of a message is held (a key change must not cut a message, RFC 8446 5.1)."""
        return bool(self._buf)


def read_server_hello(body: bytes) -> ServerHello:
    try:
        legacy_version = _U16.unpack_from(body, 0)[0]
        random = bytes(body[2:34])
        pos = 34
        pos += 1 + body[pos]                          # legacy_session_id_echo
        suite = _U16.unpack_from(body, pos)[0]
        pos += 3                                      # the suite, then the compression method
        version, ems = legacy_version, False
        if pos + 2 <= len(body):
            end = min(pos + 2 + _U16.unpack_from(body, pos)[0], len(body))
            pos += 2
            while pos + 4 <= end:
                kind, length = struct.unpack_from(">HH", body, pos)
                if kind == SUPPORTED_VERSIONS and length == 2:
                    version = _U16.unpack_from(body, pos + 4)[0]
                elif kind == EXTENDED_MASTER_SECRET:
                    ems = True
                pos += 4 + length
    except (IndexError, struct.error):
        raise HandshakeError("a ServerHello cut short") from None
    if len(random) != 32:
        raise HandshakeError("a ServerHello cut short")
    return ServerHello(version, random, suite, ems, random == HELLO_RETRY_RANDOM)
