"""SCRAM credentials, kept as Kafka keeps them (salt, stored key, server key, iterations; never the
password), in ``DATA/scram-credentials.json``, written whole and atomically after each change.

They are managed with AlterUserScramCredentials and DescribeUserScramCredentials (what
``kafka-configs --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'`` and confluent-kafka's
``alter_user_scram_credentials`` call), or at start as ``kafka-storage format --add-scram`` takes them:
``SCRAM-SHA-256=[name=alice,password=alice-secret]`` (``parse_add_scram``).
"""
from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from ..persistence.atomic_file import PRIVATE, write_json_atomically
from ...sasl.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential, ScramMechanism

__all__ = ["ScramStore", "parse_add_scram", "MECHANISM_BY_TYPE"]

MECHANISM_BY_TYPE = {m.kafka_type: m for m in MECHANISMS.values()}
_ADD_SCRAM = re.compile(r"\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*)\]\s*")


def parse_add_scram(text: str) -> tuple[ScramMechanism, str, ScramCredential]:
    """``SCRAM-SHA-256=[name=alice,password=alice-secret]`` (optionally ``iterations=N``, ``salt=...``
    in base64) as ``kafka-storage format --add-scram`` takes it."""
    match = _ADD_SCRAM.fullmatch(text)
    if match is None:
        raise ValueError(f"--add-scram: {text!r} is not SCRAM-SHA-256=[name=...,password=...]")
    fields = {}
    for item in match[2].split(","):
        key, equals, value = item.partition("=")
        if not equals:
            raise ValueError(f"--add-scram: {item!r} is not key=value")
        fields[key.strip()] = value.strip().strip('"')
    if "name" not in fields or "password" not in fields:
        raise ValueError("--add-scram needs name= and password=")
    mechanism = MECHANISMS[match[1]]
    iterations = int(fields.get("iterations", MIN_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"--add-scram: iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")
    salt = base64.b64decode(fields["salt"]) if "salt" in fields else None
    return mechanism, fields["name"], mechanism.credential(fields["password"], salt, iterations)


class ScramStore:
    """Credentials by user and mechanism."""

    def __init__(self, path: Path | None):
        self.path = path
        self.credentials: dict[str, dict[str, ScramCredential]] = {}
        if path is not None and path.exists():
            for user, by_mechanism in json.loads(path.read_text()).items():
                for name, entry in by_mechanism.items():
                    mechanism = MECHANISMS[name]
                    self.credentials.setdefault(user, {})[name] = ScramCredential(
                        mechanism, base64.b64decode(entry["salt"]), base64.b64decode(entry["stored_key"]),
                        base64.b64decode(entry["server_key"]), int(entry["iterations"]))

    def lookup(self, mechanism: ScramMechanism):
        """``lookup(user)`` for a ScramServer of ``mechanism``."""
        return lambda user: self.credentials.get(user, {}).get(mechanism.name)

    def put(self, user: str, credential: ScramCredential) -> None:
        self.credentials.setdefault(user, {})[credential.mechanism.name] = credential

    def remove(self, user: str, mechanism: ScramMechanism) -> bool:
        by_mechanism = self.credentials.get(user, {})
        if by_mechanism.pop(mechanism.name, None) is None:
            return False
        if not by_mechanism:
            del self.credentials[user]
        return True

    def save(self) -> None:
        if self.path is None:
            return
        data = {user: {name: {"salt": base64.b64encode(c.salt).decode(), "iterations": c.iterations,
                              "stored_key": base64.b64encode(c.stored_key).decode(),
                              "server_key": base64.b64encode(c.server_key).decode()}
                       for name, c in by_mechanism.items()}
                for user, by_mechanism in self.credentials.items()}
        write_json_atomically(self.path, data, mode=PRIVATE)
