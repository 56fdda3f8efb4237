"""What a TLS client asks for in its ClientHello: the server name (SNI), the highest version offered and
its random (which names the connection's secrets in a key log).

Without a key log (``capture.tls``) a connection that starts with a TLS record is reported and skipped. Its
first client bytes still say which broker name the client wanted and which TLS it speaks, in the
clear: the handshake records (RFC 8446 5.1; a ClientHello may span several) carry the ClientHello,
whose ``server_name`` extension (RFC 6066 3) names the host and whose ``supported_versions``
extension (RFC 8446 4.2.1) lists the versions (without it, ``legacy_version`` is the one offered).
Nothing else of the handshake is read here (``capture.tls.handshake`` reads the ServerHello).
"""
from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["ClientHello", "read_client_hello", "version_name", "WAIT", "MAX_HELLO_BYTES"]

WAIT = object()  # more bytes are needed
MAX_HELLO_BYTES = 1 << 16  # larger ClientHellos are not read (real ones are a few hundred bytes to 2 KB)
HANDSHAKE, CLIENT_HELLO = 22, 1
SERVER_NAME, SUPPORTED_VERSIONS = 0, 43
HOST_NAME = 0
_U16 = struct.Struct(">H")
_VERSIONS = {0x0300: "SSL 3.0", 0x0301: "TLS 1.0", 0x0302: "TLS 1.1", 0x0303: "TLS 1.2", 0x0304: "TLS 1.3"}


class ClientHello(NamedTuple):
    server_name: str | None   # the host_name of the server_name extension
    version: str | None       # the highest version offered, as "TLS 1.3"
    random: bytes | None = None  # the 32 bytes of client random


def version_name(version: int) -> str:
    return _VERSIONS.get(version, f"0x{version:04x}")


def read_client_hello(data) -> ClientHello | None | object:
    """The ClientHello at the start of a client's stream ``data``; WAIT when it is not whole yet; None
    when the bytes are not a ClientHello this reads (not a handshake record, malformed, too large)."""
    message = bytearray()
    pos, end = 0, len(data)
    while True:
        if len(message) >= 4:
            if message[0] != CLIENT_HELLO:
                return None
            length = int.from_bytes(message[1:4], "big")
            if length > MAX_HELLO_BYTES:
                return None
            if len(message) >= 4 + length:
                return _parse(bytes(message[4:4 + length]))
        if end - pos < 5:
            return WAIT
        if data[pos] != HANDSHAKE or data[pos + 1] != 3:
            return None
        fragment = _U16.unpack_from(data, pos + 3)[0]
        if fragment == 0 or fragment > (1 << 14):
            return None
        if end - pos - 5 < fragment:
            return WAIT
        message += data[pos + 5:pos + 5 + fragment]
        pos += 5 + fragment


def _parse(body: bytes) -> ClientHello | None:
    try:
        legacy_version = _U16.unpack_from(body, 0)[0]
        pos = 2 + 32                                   # the version, then random
        pos += 1 + body[pos]                           # legacy_session_id
        pos += 2 + _U16.unpack_from(body, pos)[0]      # cipher_suites
        pos += 1 + body[pos]                           # legacy_compression_methods
        if pos > len(body):
            return None
        server_name, offered = None, []
        if pos + 2 <= len(body):                      # extensions (absent from SSL 3.0 hellos)
            end = pos + 2 + _U16.unpack_from(body, pos)[0]
            if end > len(body):
                return None
            pos += 2
            while pos + 4 <= end:
                kind, length = struct.unpack_from(">HH", body, pos)
                value = body[pos + 4:pos + 4 + length]
                pos += 4 + length
                if pos > end:
                    return None
                if kind == SERVER_NAME:
                    server_name = _host_name(value)
                elif kind == SUPPORTED_VERSIONS and value:
                    offered = [_U16.unpack_from(value, i)[0] for i in range(1, min(1 + value[0], len(value)) - 1, 2)]
        known = [v for v in offered if v in _VERSIONS]  # GREASE values (RFC 8701) and unknown ones aside
        version = max(known) if known else (None if offered else legacy_version)
        return ClientHello(server_name, None if version is None else version_name(version), bytes(body[2:34]))
    except (IndexError, struct.error):
        return None


def _host_name(value: bytes) -> str | None:
    """The host_name entry of a server_name extension's list."""
    if len(value) < 2:
        return None
    pos, end = 2, min(2 + _U16.unpack_from(value, 0)[0], len(value))
    while pos + 3 <= end:
        name_type, length = value[pos], _U16.unpack_from(value, pos + 1)[0]
        name = value[pos + 3:pos + 3 + length]
        if name_type == HOST_NAME and len(name) == length:
            return name.decode("ascii", "replace")
        pos += 3 + length
    return None
