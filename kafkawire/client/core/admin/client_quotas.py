"""Client quotas for the admin client: DescribeClientQuotas and AlterClientQuotas (KIP-546), with the
names of Java's Admin (``ClientQuotaEntity``, ``ClientQuotaFilter``, ``ClientQuotaAlteration``)."""
from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafkawire.messages import (
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
)

from .errors import error_for, outcome_of

__all__ = ["ClientQuotaEntity", "ClientQuotaFilter", "ClientQuotaFilterComponent", "ClientQuotaAlteration",
           "MatchType", "describe_client_quotas_request", "read_describe_client_quotas",
           "alter_client_quotas_request", "read_alter_client_quotas"]


@dataclass(frozen=True)
class ClientQuotaEntity:
    """A user, a client id, both, or an ip; a name of None is the type's default:
    ``ClientQuotaEntity.of(user="alice", client_id=None)`` is alice with the default client id."""

    entries: tuple[tuple[str, str | None], ...]

    USER = "user"
    CLIENT_ID = "client-id"
    IP = "ip"

    @classmethod
    def of(cls, **names: str | None) -> ClientQuotaEntity:
        """``user=``, ``client_id=`` and ``ip=``: the entity's types and names."""
        return cls.from_mapping({key.replace("_", "-"): name for key, name in names.items()})

    @classmethod
    def from_mapping(cls, entries: Mapping[str, str | None]) -> ClientQuotaEntity:
        return cls(tuple(sorted(entries.items())))

    def __str__(self) -> str:
        return "(" + ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in self.entries) + ")"


class MatchType(enum.IntEnum):
    EXACT = 0  # the entity type with this name
    DEFAULT = 1  # the entity type's default
    SPECIFIED = 2  # the entity type with any name


@dataclass(frozen=True)
class ClientQuotaFilterComponent:
    entity_type: str
    match_type: MatchType
    match: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str | None) -> ClientQuotaFilterComponent:
        """``name`` exactly, or the default for None."""
        return cls(entity_type, MatchType.EXACT, name) if name is not None else cls(entity_type, MatchType.DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        return cls(entity_type, MatchType.SPECIFIED)


@dataclass(frozen=True)
class ClientQuotaFilter:
    """Entities matching every component; ``strict``: entities with no other entity types."""

    components: tuple[ClientQuotaFilterComponent, ...] = ()
    strict: bool = False

    @classmethod
    def all(cls) -> ClientQuotaFilter:
        return cls()


@dataclass(frozen=True)
class ClientQuotaAlteration:
    """Quota changes for one entity: key -> value, or None to remove the key."""

    entity: ClientQuotaEntity
    ops: Mapping[str, float | None] = field(default_factory=dict)


def describe_client_quotas_request(quota_filter: ClientQuotaFilter) -> DescribeClientQuotasRequest:
    return DescribeClientQuotasRequest(strict=quota_filter.strict, components=[
        DescribeClientQuotasRequest.ComponentData(entity_type=c.entity_type, match_type=int(c.match_type),
                                                  match=c.match)
        for c in quota_filter.components])


def read_describe_client_quotas(response: DescribeClientQuotasResponse) -> object:
    """entity -> {key: value}, or the request's error."""
    if response.error_code:
        return error_for(response.error_code, response.error_message, "DescribeClientQuotas")
    return {ClientQuotaEntity.from_mapping({e.entity_type: e.entity_name for e in entry.entity}):
            {v.key: v.value for v in entry.values} for entry in response.entries or []}


def alter_client_quotas_request(alterations: Sequence[ClientQuotaAlteration],
                                validate_only: bool) -> AlterClientQuotasRequest:
    wire = AlterClientQuotasRequest
    return wire(validate_only=validate_only, entries=[
        wire.EntryData(entity=[wire.EntityData(entity_type=t, entity_name=n) for t, n in a.entity.entries],
                       ops=[wire.OpData(key=key, value=0.0 if value is None else float(value), remove=value is None)
                            for key, value in a.ops.items()])
        for a in alterations])


def read_alter_client_quotas(response: AlterClientQuotasResponse) -> dict[ClientQuotaEntity, object]:
    results: dict[ClientQuotaEntity, object] = {}
    for entry in response.entries:
        entity = ClientQuotaEntity.from_mapping({e.entity_type: e.entity_name for e in entry.entity})
        results[entity] = outcome_of(entry.error_code, entry.error_message, f"client quota entity {entity}")
    return results
