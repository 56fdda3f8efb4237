"""From logged secrets to record keys: the AEAD cipher suites decrypted, TLS 1.3's HKDF-Expand-Label
(RFC 8446 7.1 and 7.3, with key updates, 7.2) and TLS 1.2's PRF key expansion (RFC 5246 5 and 6.3).

Only the AEAD suites are read (what Kafka's clients negotiate: AES-GCM and ChaCha20-Poly1305); the
primitives are ``cryptography``'s (HKDF, AES-GCM, ChaCha20-Poly1305) and the standard library's HMAC.
"""
from __future__ import annotations

import hmac
from typing import NamedTuple

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

__all__ = ["Suite", "suite", "suite_name", "tls13_keys", "tls13_next_secret", "tls12_keys"]


class Suite(NamedTuple):
    name: str
    aead: type            # AESGCM or ChaCha20Poly1305
    key_bytes: int
    hash_name: str        # sha256 or sha384: HKDF's (TLS 1.3) or the PRF's (TLS 1.2)
    tls12_iv_bytes: int   # TLS 1.2: GCM's 4-byte implicit salt (and 8 explicit bytes a record), ChaCha's whole 12


_GCM128, _GCM256, _CHACHA = (AESGCM, 16), (AESGCM, 32), (ChaCha20Poly1305, 32)
_SUITES = {
    # TLS 1.3 (RFC 8446 B.4)
    0x1301: ("TLS_AES_128_GCM_SHA256", *_GCM128, "sha256", 0),
    0x1302: ("TLS_AES_256_GCM_SHA384", *_GCM256, "sha384", 0),
    0x1303: ("TLS_CHACHA20_POLY1305_SHA256", *_CHACHA, "sha256", 0),
    # TLS 1.2 (RFC 5288, 5289, 7905)
    0x009C: ("TLS_RSA_WITH_AES_128_GCM_SHA256", *_GCM128, "sha256", 4),
    0x009D: ("TLS_RSA_WITH_AES_256_GCM_SHA384", *_GCM256, "sha384", 4),
    0x009E: ("TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", *_GCM128, "sha256", 4),
    0x009F: ("TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", *_GCM256, "sha384", 4),
    0xC02B: ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", *_GCM128, "sha256", 4),
    0xC02C: ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", *_GCM256, "sha384", 4),
    0xC02F: ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", *_GCM128, "sha256", 4),
    0xC030: ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", *_GCM256, "sha384", 4),
    0xCCA8: ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", *_CHACHA, "sha256", 12),
    0xCCA9: ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", *_CHACHA, "sha256", 12),
    0xCCAA: ("TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", *_CHACHA, "sha256", 12),
}
_HASHES = {"sha256": hashes.SHA256, "sha384": hashes.SHA384}


def suite(code: int) -> Suite | None:
    """The suite negotiated as ``code``, if it is one decrypted here."""
    known = _SUITES.get(code)
    return Suite(*known) if known else None


def suite_name(code: int) -> str:
    known = _SUITES.get(code)
    return known[0] if known else f"cipher suite 0x{code:04x}"


def hash_bytes(chosen: Suite) -> int:
    return _HASHES[chosen.hash_name]().digest_size


def _expand_label(chosen: Suite, secret: bytes, label: bytes, length: int) -> bytes:
    """HKDF-Expand-Label(secret, label, "", length)."""
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    return HKDFExpand(_HASHES[chosen.hash_name](), length, info).derive(secret)


def tls13_keys(chosen: Suite, secret: bytes) -> tuple[bytes, bytes]:
    """(key, iv) of a TLS 1.3 traffic secret."""
    return _expand_label(chosen, secret, b"key", chosen.key_bytes), _expand_label(chosen, secret, b"iv", 12)


def tls13_next_secret(chosen: Suite, secret: bytes) -> bytes:
    """The traffic secret after a KeyUpdate."""
    return _expand_label(chosen, secret, b"traffic upd", hash_bytes(chosen))


def _prf(hash_name: str, secret: bytes, label: bytes, seed: bytes, length: int) -> bytes:
    """TLS 1.2's PRF: P_hash(secret, label + seed) (RFC 5246 5)."""
    seed = label + seed
    out, a = bytearray(), seed
    while len(out) < length:
        a = hmac.digest(secret, a, hash_name)
        out += hmac.digest(secret, a + seed, hash_name)
    return bytes(out[:length])


def tls12_keys(chosen: Suite, master: bytes, client_random: bytes,
               server_random: bytes) -> tuple[tuple[bytes, bytes], tuple[bytes, bytes]]:
    """((client key, client iv), (server key, server iv)) from a TLS 1.2 master secret: the key block
    (no MAC keys for an AEAD suite)."""
    k, i = chosen.key_bytes, chosen.tls12_iv_bytes
    block = _prf(chosen.hash_name, master, b"key expansion", server_random + client_random, 2 * (k + i))
    return (block[:k], block[2 * k:2 * k + i]), (block[k:2 * k], block[2 * k + i:2 * k + 2 * i])

