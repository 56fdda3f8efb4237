"""Kafka's dotted property names, given as text (a Java properties file) or as Python values: the checks
ProducerConfig and ConsumerConfig share, their common base, and ``resolve`` (what the clients accept)."""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar, cast

from ..errors import ConfigError

if TYPE_CHECKING:
    from typing import Self

    from _typeshed import DataclassInstance

__all__ = ["PropertyConfig", "resolve", "dotted", "integer", "boolean", "servers", "choice", "INT32_MAX",
           "INT64_MAX"]

INT32_MAX = 0x7FFFFFFF  # most settings travel as int32 request fields
INT64_MAX = (1 << 63) - 1


class PropertyConfig:
    """The base of the frozen config dataclasses: built from, and shown as, Kafka's dotted names
    (attributes are the names in snake_case: ``batch.size`` -> ``batch_size``)."""

    _KIND = "client"  # in the error for an unknown name

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> Self:
        """A config from Kafka's dotted property names; an unknown name is a ConfigError."""
        known = {f.name for f in dataclasses.fields(cast("type[DataclassInstance]", cls))
                 if not f.name.startswith("_")}
        values: dict[str, object] = {}
        for name, value in properties.items():
            attribute = str(name).replace(".", "_")
            if attribute not in known:
                raise ConfigError(f"unknown {cls._KIND} config {name!r}")
            values[attribute] = value
        return cls(**values)

    def to_properties(self) -> dict[str, object]:
        """The settings under their dotted names (None where a setting falls back to another)."""
        return {dotted(f.name): getattr(self, f.name)
                for f in dataclasses.fields(cast("DataclassInstance", self))}

    def _set(self, name: str, value: object) -> None:
        """Store a checked value while the (frozen) config is being built."""
        object.__setattr__(self, name, value)


_Config = TypeVar("_Config", bound=PropertyConfig)


def resolve(cls: type[_Config], config: _Config | Mapping[str, object] | None,
            properties: Mapping[str, object]) -> _Config:
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


# ---- checks of one value -------------------------------------------------------------------------

_UNDOTTED = frozenset({"oauth_cb"})  # names with underscores in Kafka's clients (confluent-kafka's callback)


def dotted(attribute: str) -> str:
    return attribute if attribute in _UNDOTTED else attribute.replace("_", ".")


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
    checked: list[str] = []
    for server in value:
        host, sep, port = str(server).strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ConfigError(f"bootstrap.servers entry {server!r} is not host:port")
        checked.append(f"{host}:{port}")
    return tuple(checked)


def choice(name: str, value: object, allowed: tuple[str, ...]) -> str:
    text = value.strip().lower() if isinstance(value, str) else None
    if text is None or text not in allowed:
        raise ConfigError(f"{dotted(name)} must be one of {', '.join(allowed)}, not {value!r}")
    return text
