"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka runs them, sans I/O.

Two messages each way::

    client-first  n,,n=<user>,r=<client nonce>[,<extension>=<value>...]
    server-first  r=<client nonce><server nonce>,s=<salt, base64>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<proof, base64>
    server-final  v=<server signature, base64>

The server keeps a ``ScramCredential`` per user (salt, stored key, server key, iterations), never the
password: the client proves it knows the password by a proof the stored key checks, and the server
proves it holds the credential by its signature. Kafka's minimum is 4096 iterations and its maximum
16384. A failed exchange raises SaslError with Kafka's messages ("Authentication failed: Invalid user
credentials" for an unknown user or a wrong password alike).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from . import SaslError

__all__ = ["ScramCredential", "ScramMechanism", "ScramClient", "ScramServer", "MECHANISMS", "MIN_ITERATIONS",
           "MAX_ITERATIONS"]

MIN_ITERATIONS = 4096  # ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # the most AlterUserScramCredentials accepts
_INVALID = "Authentication failed: Invalid user credentials"


@dataclass(frozen=True)
class ScramMechanism:
    name: str  # SCRAM-SHA-256 or SCRAM-SHA-512
    hash_name: str  # for hashlib
    kafka_type: int  # ScramMechanism's id in DescribeUserScramCredentials / AlterUserScramCredentials

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i) of RFC 5802: PBKDF2 with this HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def credential(self, password: str, salt: bytes | None = None,
                   iterations: int = MIN_ITERATIONS) -> "ScramCredential":
        """The credential a server stores for ``password`` (a random salt unless one is given)."""
        salt = salt if salt is not None else secrets.token_bytes(32)
        return self.credential_from_salted(self.salted_password(password, salt, iterations), salt, iterations)

    def credential_from_salted(self, salted_password: bytes, salt: bytes, iterations: int) -> "ScramCredential":
        """What AlterUserScramCredentials carries (salt and salted password) turned into a credential."""
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(self, salt, self.hash(client_key), self.hmac(salted_password, b"Server Key"),
                               iterations)


MECHANISMS = {m.name: m for m in (ScramMechanism("SCRAM-SHA-256", "sha256", 1),
                                  ScramMechanism("SCRAM-SHA-512", "sha512", 2))}


@dataclass(frozen=True)
class ScramCredential:
    mechanism: ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _escape(name: str) -> str:
    """RFC 5802 saslname: ',' and '=' written as =2C and =3D."""
    return name.replace("=", "=3D").replace(",", "=2C")


def _unescape(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise SaslError("Invalid username: bad escape in SCRAM saslname")
    return name.replace("=2C", ",").replace("=3D", "=")


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    pairs = []
    for part in message.split(","):
        key, equals, value = part.partition("=")
        if not equals or len(key) != 1 and not key.isidentifier():
            raise SaslError(f"Invalid SCRAM {what} message")
        pairs.append((key, value))
    return pairs


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise SaslError(f"Invalid SCRAM {what}: not base64") from None


def _text(message: bytes, what: str) -> str:
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError(f"Invalid SCRAM {what} message: not UTF-8") from None


class ScramServer:
    """The broker's side of one exchange: ``first(client_first)`` returns the server-first message,
    ``final(client_final)`` the server-final one; ``username`` and ``extensions`` once known.
    ``lookup(username)`` gives the user's credential for this mechanism, or None."""

    def __init__(self, mechanism: ScramMechanism, lookup, nonce: str | None = None):
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = nonce or secrets.token_urlsafe(24)
        self.username: str | None = None
        self.extensions: dict[str, str] = {}
        self.complete = False
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2_header = ""

    def first(self, message: bytes) -> bytes:
        text = _text(message, "client first")
        gs2, _, bare = text.partition(",")
        authzid, _, bare = bare.partition(",")
        if gs2 not in ("n", "y") or not bare:
            raise SaslError("Invalid SCRAM client first message: channel binding is not supported")
        if authzid and not authzid.startswith("a="):
            raise SaslError("Invalid SCRAM client first message")
        self._gs2_header = f"{gs2},{authzid},"
        attributes = _attributes(bare, "client first")
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r" or not attributes[1][1]:
            raise SaslError("Invalid SCRAM client first message")
        username = _unescape(attributes[0][1])
        self.extensions = dict(attributes[2:])
        if authzid and _unescape(authzid[2:]) != username:
            raise SaslError("Authentication failed: Client requested an authorization id that is different from "
                            "username")
        credential = self._lookup(username)
        if credential is None:
            raise SaslError(_INVALID)
        if credential.iterations < MIN_ITERATIONS:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} for "
                            f"{self.mechanism.name}")
        self.username, self._credential = username, credential
        self._client_first_bare = bare
        self._nonce = attributes[1][1] + self._server_nonce
        self._server_first = f"r={self._nonce},s={_b64(credential.salt)},i={credential.iterations}"
        return self._server_first.encode()

    def final(self, message: bytes) -> bytes:
        if self._credential is None:
            raise SaslError("Unexpected SCRAM client final message before the first")
        text = _text(message, "client final")
        without_proof, _, proof_part = text.rpartition(",p=")
        if not without_proof:
            raise SaslError("Invalid SCRAM client final message")
        attributes = dict(_attributes(without_proof, "client final"))
        if attributes.get("r") != self._nonce:
            raise SaslError("Invalid client nonce in the final client message.")
        if attributes.get("c") != _b64(self._gs2_header.encode()):
            raise SaslError("Invalid SCRAM client final message: channel binding does not match")
        proof = _unb64(proof_part, "client proof")
        credential = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslError(_INVALID)
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(self.mechanism.hash(client_key), credential.stored_key):
            raise SaslError(_INVALID)
        self.complete = True
        self._credential = None
        return f"v={_b64(self.mechanism.hmac(credential.server_key, auth_message))}".encode()


class ScramClient:
    """The client's side: ``first()``, then ``final(server_first)``, then ``verify(server_final)``."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None,
                 extensions: dict[str, str] | None = None):
        self.mechanism = mechanism
        self.username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._extensions = extensions or {}
        self._client_first_bare = ""
        self._server_signature = b""

    def first(self) -> bytes:
        extra = "".join(f",{key}={value}" for key, value in self._extensions.items())
        self._client_first_bare = f"n={_escape(self.username)},r={self._nonce}{extra}"
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first, "server first")
        attributes = dict(_attributes(text, "server first"))
        if "e" in attributes:
            raise SaslError(f"SCRAM authentication failed: {attributes['e']}")
        nonce, salt, iterations = attributes.get("r", ""), attributes.get("s"), attributes.get("i", "")
        if not nonce.startswith(self._nonce) or nonce == self._nonce or salt is None or not iterations.isdigit():
            raise SaslError("Invalid SCRAM server first message")
        if int(iterations) < MIN_ITERATIONS:
            raise SaslError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS}")
        salted = self.mechanism.salted_password(self._password, _unb64(salt, "salt"), int(iterations))
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._server_signature = self.mechanism.hmac(self.mechanism.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={_b64(proof)}".encode()

    def verify(self, server_final: bytes) -> None:
        """Check the server's signature (raises SaslError when it does not hold the credential)."""
        text = _text(server_final, "server final")
        attributes = dict(_attributes(text, "server final"))
        if "e" in attributes:
            raise SaslError(f"SCRAM authentication failed: {attributes['e']}")
        if not hmac.compare_digest(_unb64(attributes.get("v", ""), "server signature"), self._server_signature):
            raise SaslError("Invalid SCRAM server signature: the broker does not hold this user's credential")
