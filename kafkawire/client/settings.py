"""Checking client settings given under Kafka's dotted names, as text or as Python values."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

from kafkawire.errors import KafkaWireError

if TYPE_CHECKING:
    from typing import Self

    from _typeshed import DataclassInstance


class _Config(Protocol):
    """ProducerConfig and ConsumerConfig, as ``resolve`` uses them."""

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> Self: ...


_Dataclass = TypeVar("_Dataclass", bound="DataclassInstance")
_Resolved = TypeVar("_Resolved", bound=_Config)


class ConfigError(KafkaWireError):
    """A configuration value Kafka would refuse; the message names the property."""


def dotted(attribute: str) -> str:
    return attribute.replace("_", ".")


def integer(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ConfigError(f"{dotted(name)} must be an integer, not {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{dotted(name)} must be an integer, not {value!r}")
    if not low <= value <= high:
        raise ConfigError(f"{dotted(name)} must be between {low} and {high}, not {value}")
    return value


def boolean(name: str, value: object) -> bool:
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if not isinstance(value, bool):
        raise ConfigError(f"{dotted(name)} must be true or false, not {value!r}")
    return value


def servers(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part for part in (piece.strip() for piece in value.split(",")) if part]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"bootstrap.servers must be a list of host:port, not {value!r}")
    servers: list[str] = []
    for server in value:
        host, sep, port = str(server).strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(f"bootstrap.servers entry {server!r} is not host:port")
        servers.append(f"{host}:{port}")
    return tuple(servers)


def choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    text = value.strip().lower() if isinstance(value, str) else None
    if text is None or text not in allowed:
        raise ConfigError(f"{dotted(name)} must be one of {', '.join(allowed)}, not {value!r}")
    return text


def from_properties(cls: type[_Dataclass], properties: Mapping[str, object], kind: str) -> _Dataclass:
    """A ``cls`` config from Kafka's dotted property names; an unknown name is a ConfigError."""
    known = {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    values: dict[str, object] = {}
    for name, value in properties.items():
        attribute = str(name).replace(".", "_")
        if attribute not in known:
            raise ConfigError(f"unknown {kind} config {name!r}")
        values[attribute] = value
    return cls(**values)


def resolve(cls: type[_Resolved], config: _Resolved | Mapping[str, object] | None,
            properties: Mapping[str, object]) -> _Resolved:
    """A ``cls`` config from a config, a mapping of Kafka property names, and/or keyword properties
    (``bootstrap_servers=...`` or the dotted names)."""
    if isinstance(config, cls):
        if properties:
            raise TypeError(f"pass either a {cls.__name__} or properties, not both")
        return config
    merged: dict[str, object] = {}
    if config is not None:
        if not isinstance(config, Mapping):
            raise TypeError(f"config must be a {cls.__name__} or a mapping of properties, not {config!r}")
        merged.update(config)
    merged.update(properties)
    return cls.from_properties(merged)
