"""A TLS key log: the NSS key log format that ``SSLKEYLOGFILE`` makes OpenSSL (Python, curl, librdkafka's
``ssl.keylog.location``), NSS and browsers write, and Wireshark's ``tls.keylog_file`` reads.

One secret a line: ``LABEL <client random, 64 hex digits> <secret, hex>``; ``#`` starts a comment. The
client random (the ClientHello's) names the connection. The labels read here:

- ``CLIENT_RANDOM``: a TLS 1.2 connection's 48-byte master secret (with the extended master secret of
  RFC 7627 too: the log holds the master secret, however it was derived).
- ``CLIENT_HANDSHAKE_TRAFFIC_SECRET``, ``SERVER_HANDSHAKE_TRAFFIC_SECRET``, ``CLIENT_TRAFFIC_SECRET_0``,
  ``SERVER_TRAFFIC_SECRET_0``: a TLS 1.3 connection's traffic secrets (RFC 8446 7.1).

Other labels (early data, exporter secrets) are kept but not used. Lines that do not parse (a file cut
short while written, a stray line) are skipped and counted with the first one's line number, so that a
connection whose secrets are missing can say the key log may be why (``missing``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["KeyLog", "KeyLogError", "load_key_log", "parse_key_log"]

RANDOM_BYTES = 32
MAX_KEY_LOG_BYTES = 1 << 30  # a key log holds a few hundred bytes per connection: larger is not one


class KeyLogError(ValueError):
    """The key log file cannot be read at all (missing, or holds no secret)."""


@dataclass
class KeyLog:
    """The secrets of a key log by client random, then label. Pickles small: it travels with the capture
    job's tasks to the executors."""
    secrets: dict[bytes, dict[str, bytes]] = field(default_factory=dict)
    name: str = "the key log"
    malformed: int = 0                  # lines skipped
    first_malformed: int | None = None  # the line number of the first

    def __len__(self) -> int:
        return len(self.secrets)

    def of(self, client_random: bytes | None) -> dict[str, bytes] | None:
        """The secrets logged for a connection's client random; None when it has none."""
        return self.secrets.get(client_random) if client_random else None

    def missing(self, label: str, client_random: bytes) -> str:
        """Why a connection cannot be decrypted when ``label`` is not logged for it, for a person."""
        why = f"{self.name} has no {label} for client random {client_random.hex()[:16]}..."
        if self.malformed:
            why += (f" ({self.malformed} line{'s' if self.malformed > 1 else ''} of it did not parse, the first at line "
                    f"{self.first_malformed}: it may have been cut short)")
        else:
            why += " (it may have been cut short, or written by a process that logged only some labels)"
        return why


def parse_key_log(text: str, name: str = "the key log") -> KeyLog:
    keys = KeyLog(name=name)
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        try:
            if len(parts) != 3:
                raise ValueError
            label, random, secret = parts[0], bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
            if len(random) != RANDOM_BYTES or not secret or not label.isupper():
                raise ValueError
        except ValueError:
            keys.malformed += 1
            keys.first_malformed = keys.first_malformed or number
            continue
        keys.secrets.setdefault(random, {})[label] = secret
    return keys


def load_key_log(path: str) -> KeyLog:
    """The key log at ``path`` (a local file); KeyLogError when it is missing, too large or holds no secret."""
    try:
        size = os.path.getsize(path)
        if size > MAX_KEY_LOG_BYTES:
            raise KeyLogError(f"{path}: {size} bytes is not a key log")
        with open(path, encoding="ascii", errors="replace") as file:
            keys = parse_key_log(file.read(), name=f"key log {os.path.basename(path)}")
    except OSError as error:
        raise KeyLogError(f"{path}: cannot read the key log: {error.strerror or error}") from None
    if not keys.secrets:
        raise KeyLogError(f"{path}: no secret in NSS key log format (LABEL <client random> <secret> a line)")
    return keys
