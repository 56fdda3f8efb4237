"""The client quotas configured on the cluster, as ``kafka-configs --entity-type users/clients/ips`` and
AlterClientQuotas set them: each entity (a user, a client id, a user with a client id, or an ip; a
name of None is the entity type's default) with its quota values. Kept in ``DATA/client-quotas.json``,
written whole and atomically after each change, as the broker keeps its other config state.

Alterations are checked as Kafka's ``ClientQuotaControlManager`` checks them (entity types and their
combinations, the keys each allows, whole numbers where the key is an integer); describing matches the
filters as ``ClientQuotasImage.describe`` does. ``resolve`` finds the quota that applies to a client in
Kafka's order of precedence (``DefaultQuotaCallback``).
"""
from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Callable
from pathlib import Path

from ...error_codes import ErrorCode
from ..persistence.atomic_file import write_json_atomically

__all__ = ["Entity", "QuotaError", "ClientQuotaStore", "USER", "CLIENT_ID", "IP",
           "PRODUCER_BYTE_RATE", "CONSUMER_BYTE_RATE", "REQUEST_PERCENTAGE", "CONTROLLER_MUTATION_RATE",
           "CONNECTION_CREATION_RATE"]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# The keys each kind of entity takes, and whether the value must be a whole number (Kafka's LONG and
# INT types) or may be any number (DOUBLE), as Kafka's QuotaConfig defines them.
_USER_CLIENT_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
                     CONTROLLER_MUTATION_RATE: False}
_IP_KEYS = {CONNECTION_CREATION_RATE: True}

# An entity: its (type, name) pairs in type order; a name of None is that type's default.
Entity = tuple[tuple[str, "str | None"], ...]

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


class QuotaError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class ClientQuotaStore:
    """The quotas by entity; ``listeners`` are told after every change (the throttling resolves again)."""

    def __init__(self, path: Path | None):
        self.path = path
        self.quotas: dict[Entity, dict[str, float]] = {}
        self.listeners: list[Callable[[], None]] = []
        if path is not None and path.exists():
            for item in json.loads(path.read_text()):
                key = tuple(sorted((pair[0], pair[1]) for pair in item["entity"]))
                self.quotas[key] = {k: float(v) for k, v in item["values"].items()}

    # ---- AlterClientQuotas --------------------------------------------------------------------
    def alter(self, changes: list[tuple[list[tuple[str, str | None]], list[tuple[str, float | None]]]],
              validate_only: bool) -> list[tuple[int, str | None]]:
        """Apply each entity's changes (value None: remove the key), all or none per entity; an
        ``(error code, message)`` per entity, in order."""
        results: list[tuple[int, str | None]] = []
        seen: set[Entity] = set()
        planned: list[tuple[Entity, dict[str, float | None]]] = []
        for pairs, ops in changes:
            try:
                key = _checked_entity(pairs)
                if key in seen:
                    raise QuotaError(ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {_text(key)}")
                seen.add(key)
                alterations: dict[str, float | None] = {}
                for name, value in ops:
                    if name in alterations:
                        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Duplicate quota key {name} not updating "
                                                                     f"quota for this entity {_text(key)}")
                    alterations[name] = value
                allowed = _IP_KEYS if dict(key).keys() == {IP} else _USER_CLIENT_KEYS
                for name, value in alterations.items():
                    if value is not None:
                        _check_value(allowed, name, value)
                planned.append((key, alterations))
                results.append((ErrorCode.NONE, None))
            except QuotaError as error:
                results.append((error.code, error.message))
        if validate_only or not planned:
            return results
        for key, alterations in planned:
            values = self.quotas.setdefault(key, {})
            for name, value in alterations.items():
                if value is None:
                    values.pop(name, None)
                else:
                    values[name] = value
            if not values:
                del self.quotas[key]
        self.save()
        for listener in self.listeners:
            listener()
        return results

    def save(self) -> None:
        if self.path is None:
            return
        write_json_atomically(self.path, [{"entity": [list(pair) for pair in key], "values": values}
                                          for key, values in self.quotas.items()])

    # ---- DescribeClientQuotas -----------------------------------------------------------------
    def describe(self, components: list[tuple[str, int, str | None]], strict: bool) -> list[tuple[Entity, dict]]:
        """The entities the filter matches, with their values (raises QuotaError for a bad filter)."""
        exact: dict[str, str | None] = {}
        of_type: set[str] = set()
        for entity_type, match_type, match in components:
            if not entity_type:
                raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
            if entity_type in exact or entity_type in of_type:
                raise QuotaError(ErrorCode.INVALID_REQUEST,
                                 f"Entity type {entity_type} cannot appear more than once in the filter.")
            if entity_type not in (USER, CLIENT_ID, IP):
                raise QuotaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaError(ErrorCode.INVALID_REQUEST,
                                     "Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[entity_type] = match
            elif match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
                if match is not None:
                    kind = "MATCH_TYPE_DEFAULT" if match_type == MATCH_DEFAULT else "MATCH_TYPE_SPECIFIED"
                    raise QuotaError(ErrorCode.INVALID_REQUEST,
                                     f"Request specified {kind}, but also specified a match string.")
                if match_type == MATCH_DEFAULT:
                    exact[entity_type] = None
                else:
                    of_type.add(entity_type)
            else:
                raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
        named = exact.keys() | of_type
        if IP in named and named & {USER, CLIENT_ID}:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                        "component should not be used with user or clientId filter "
                                                        "component.")
        if not named and strict:
            return []
        found = []
        for key, values in self.quotas.items():
            types = dict(key)
            if any(t not in types or types[t] != name for t, name in exact.items()):
                continue
            if any(t not in types for t in of_type):
                continue
            if strict and len(types) != len(named):
                continue
            found.append((key, dict(values)))
        return found

    # ---- which quota applies ------------------------------------------------------------------
    def resolve(self, user: str, client_id: str, name: str) -> tuple[float, tuple[str, str]] | None:
        """The quota ``name`` of a client and the (user, client id) its usage is counted under (as
        Kafka's metric tags: "" for a part the matching entity does not name), or None: no quota.
        Kafka's order: user and client id, user and default client id, user, default user and client
        id, default user and default client id, default user, client id, default client id."""
        quotas = self.quotas
        levels: tuple[tuple[Entity, tuple[str, str]], ...] = (
            (((CLIENT_ID, client_id), (USER, user)), (user, client_id)),
            (((CLIENT_ID, None), (USER, user)), (user, client_id)),
            (((USER, user),), (user, "")),
            (((CLIENT_ID, client_id), (USER, None)), (user, client_id)),
            (((CLIENT_ID, None), (USER, None)), (user, client_id)),
            (((USER, None),), (user, "")),
            (((CLIENT_ID, client_id),), ("", client_id)),
            (((CLIENT_ID, None),), ("", client_id)))
        for key, tags in levels:
            values = quotas.get(key)
            if values is not None and name in values:
                return values[name], tags
        return None

    def ip_quota(self, host: str) -> float | None:
        """The connection creation rate of ``host``: its own, else the default ip's."""
        keys: tuple[Entity, Entity] = (((IP, host),), ((IP, None),))
        for key in keys:
            values = self.quotas.get(key)
            if values is not None and CONNECTION_CREATION_RATE in values:
                return values[CONNECTION_CREATION_RATE]
        return None

    def has(self, name: str) -> bool:
        return any(name in values for values in self.quotas.values())


def _checked_entity(pairs: list[tuple[str, str | None]]) -> Entity:
    """The entity as a key, or QuotaError: a known type each at most once, no empty names, one of the
    combinations Kafka allows, a valid address for an ip."""
    if not pairs:
        raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    types: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in types:
            raise QuotaError(ErrorCode.INVALID_REQUEST,
                             f"Invalid empty client quota entity, duplicate entity entry {entity_type}")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
        types[entity_type] = name
    if IP in types:
        if len(types) > 1:
            raise QuotaError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
        address = types[IP]
        if address is not None and not _valid_ip(address):
            raise QuotaError(ErrorCode.INVALID_REQUEST, f"{address} is not a valid IP or resolvable host.")
    return tuple(sorted(types.items()))


def _valid_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
        return True
    except ValueError:
        pass
    try:  # Kafka takes a resolvable host name too
        socket.getaddrinfo(address, None)
        return True
    except (OSError, UnicodeError):
        return False


def _check_value(allowed: dict[str, bool], name: str, value: float) -> None:
    whole = allowed.get(name)
    if whole is None:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {name}")
    if whole and abs(round(value) - value) > 1e-6:
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Configuration {name} must be a Long value")
    if value != value or value <= 0:  # a rate of zero or less would divide the throttle time by it
        raise QuotaError(ErrorCode.INVALID_REQUEST, f"Configuration {name} must be a positive value")


def _text(key: Entity) -> str:
    return "(" + ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in key) + ")"
