"""One direction's record protection: opens the AEAD-protected records of TLS 1.3 (RFC 8446 5.2-5.3)
and TLS 1.2 (AES-GCM, RFC 5288 3; ChaCha20-Poly1305, RFC 7905 2).

Each set of keys counts its records from 0 (the sequence number is the nonce's and, in TLS 1.2, the
additional data's); a new key (TLS 1.3's application secret, a KeyUpdate) starts a new ``Opener``.
"""
from __future__ import annotations

import struct

from cryptography.exceptions import InvalidTag

from .key_schedule import Suite

__all__ = ["Opener", "RecordError"]

TAG_BYTES = 16
APPLICATION_DATA = 23
EXPLICIT_NONCE_BYTES = 8  # TLS 1.2 AES-GCM: the record's own part of the nonce
_SEQ = struct.Struct(">Q")
_TLS12_AAD = struct.Struct(">QBHH")  # sequence number, content type, version, plaintext length


class RecordError(Exception):
    """A record that does not open with these keys."""


class Opener:
    """Opens the records of one direction under one key: ``open(header, body)`` -> (content type,
    plaintext). ``tls13``: TLS 1.3's record format (the real content type inside, after the content)."""

    __slots__ = ("aead", "iv", "salt", "seq", "tls13", "suite")

    def __init__(self, suite: Suite, key: bytes, iv: bytes, tls13: bool):
        self.aead = suite.aead(key)
        self.suite = suite
        self.iv = int.from_bytes(iv, "big")  # XORed with the sequence number for the nonce ...
        # ... but for TLS 1.2's AES-GCM, whose 4 bytes are the nonce's start and the record holds the rest
        self.salt = bytes(iv) if not tls13 and len(iv) == 4 else None
        self.seq = 0
        self.tls13 = tls13

    def open_application_data(self, header, body) -> memoryview | None:
        """TLS 1.3: the plaintext of an application data record without padding, else None (another
        content type, or one that does not open: ``open`` then reads it again)."""
        try:
            plain = self.aead.decrypt((self.iv ^ self.seq).to_bytes(12, "big"), body, header)
        except (InvalidTag, ValueError):
            return None
        if not plain or plain[-1] != APPLICATION_DATA:
            return None
        self.seq += 1
        return memoryview(plain)[:-1]

    def open(self, header, body) -> tuple[int, bytes | memoryview]:
        """The content type and plaintext of the record with 5-byte ``header`` and ``body`` (bytes-likes)."""
        seq = self.seq
        try:
            if self.tls13:
                plain = self.aead.decrypt((self.iv ^ seq).to_bytes(12, "big"), body, header)
                end = len(plain)
                while end and plain[end - 1] == 0:  # zero padding after the real content type
                    end -= 1
                if not end:
                    raise RecordError("a TLS 1.3 record without a content type")
                kind, plain = plain[end - 1], memoryview(plain)[:end - 1]  # joined or copied later
            else:
                kind, version = header[0], (header[1] << 8) | header[2]
                if self.salt is not None:
                    if len(body) < EXPLICIT_NONCE_BYTES + TAG_BYTES:
                        raise RecordError(f"a record of {len(body)} bytes is too short for AES-GCM")
                    nonce = self.salt + bytes(body[:EXPLICIT_NONCE_BYTES])
                    body = body[EXPLICIT_NONCE_BYTES:]
                else:
                    nonce = (self.iv ^ seq).to_bytes(12, "big")
                aad = _TLS12_AAD.pack(seq, kind, version, max(len(body) - TAG_BYTES, 0))
                plain = self.aead.decrypt(nonce, body, aad)
        except InvalidTag:
            raise RecordError(f"record {seq} under these keys failed authentication ({self.suite.name})") from None
        except ValueError as error:  # a body shorter than the tag
            raise RecordError(f"record {seq}: {error}") from None
        self.seq = seq + 1
        return kind, plain
