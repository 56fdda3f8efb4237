"""Configs for the admin client: ConfigResource (a topic, a broker, ...), ConfigEntry, and the requests and
answers of DescribeConfigs, AlterConfigs and IncrementalAlterConfigs. Enum values are Kafka's wire values
(confluent-kafka's ``ConfigSource`` and ``AlterConfigOpType`` use the same ones)."""
from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafkawire.messages import (
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
)

from .errors import outcome_of

__all__ = ["ConfigResourceType", "ConfigSource", "AlterConfigOpType", "ConfigEntry", "ConfigResource",
           "describe_configs_request", "read_describe_configs", "alter_configs_request",
           "incremental_alter_configs_request", "read_alter_configs"]


class ConfigResourceType(enum.IntEnum):
    """ConfigResource.Type: what a config belongs to."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32

    @classmethod
    def of(cls, value: ConfigResourceType | str | int) -> ConfigResourceType:
        """From an enum, its value, or its name in any case (``"topic"``, as confluent-kafka takes)."""
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise ValueError(f"unknown config resource type {value!r}") from None
        return cls(value)


class ConfigSource(enum.IntEnum):
    """Where a config's value comes from (DescribeConfigs' ConfigSource)."""

    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, value: int) -> ConfigSource:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN_CONFIG


class AlterConfigOpType(enum.IntEnum):
    """IncrementalAlterConfigs' operations."""

    SET = 0
    DELETE = 1
    APPEND = 2  # to a list-valued config
    SUBTRACT = 3


@dataclass
class ConfigEntry:
    """One config: as described (value, source, flags, synonyms), or as a change to make (``value`` and,
    for ``incremental_alter_configs``, ``incremental_operation``)."""

    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN_CONFIG
    is_read_only: bool = False
    is_default: bool = False
    is_sensitive: bool = False
    is_synonym: bool = False
    synonyms: dict[str, ConfigEntry] = field(default_factory=dict)
    incremental_operation: AlterConfigOpType | None = None
    documentation: str | None = None


class ConfigResource:
    """A topic, broker (``name`` its id), broker logger, client-metrics or group's configs. ``set_config``
    holds the values for ``alter_configs`` (every config not named returns to its default, as Kafka's
    AlterConfigs does), ``incremental_configs`` the ConfigEntry changes for ``incremental_alter_configs``.
    Equal (and hashed) by type and name."""

    def __init__(self, restype: ConfigResourceType | str | int, name: str, set_config: Mapping[str, str] | None = None,
                 incremental_configs: Sequence[ConfigEntry] | None = None):
        self.restype = ConfigResourceType.of(restype)
        self.name = str(name)
        self.set_config_dict: dict[str, str] = dict(set_config or {})
        self.incremental_configs: list[ConfigEntry] = list(incremental_configs or [])

    def set_config(self, name: str, value: str) -> None:
        self.set_config_dict[name] = value

    def add_incremental_config(self, entry: ConfigEntry) -> None:
        self.incremental_configs.append(entry)

    @property
    def key(self) -> tuple[int, str]:
        return int(self.restype), self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigResource) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"ConfigResource({self.restype.name}, {self.name!r})"


# ---- DescribeConfigs ----------------------------------------------------------------------------------------

def describe_configs_request(version: int, resources: Iterable[ConfigResource], include_synonyms: bool,
                             include_documentation: bool) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type=int(r.restype), resource_name=r.name,
                                                                  configuration_keys=None) for r in resources],
        include_synonyms=include_synonyms, include_documentation=include_documentation and version >= 3)


def _entry(config: DescribeConfigsResponse.DescribeConfigsResourceResult) -> ConfigEntry:
    source = ConfigSource.of(config.config_source)
    synonyms = {s.name: ConfigEntry(s.name, s.value, ConfigSource.of(s.source), is_synonym=True,
                                    is_default=s.source == ConfigSource.DEFAULT_CONFIG)
                for s in config.synonyms}
    return ConfigEntry(config.name, config.value, source, is_read_only=config.read_only,
                       is_default=source == ConfigSource.DEFAULT_CONFIG, is_sensitive=config.is_sensitive,
                       synonyms=synonyms, documentation=config.documentation)


def read_describe_configs(response: DescribeConfigsResponse) -> dict[tuple[int, str], object]:
    """(resource type, name) -> {config name: ConfigEntry}, or the resource's error."""
    found: dict[tuple[int, str], object] = {}
    for result in response.results:
        key = (result.resource_type, result.resource_name)
        failure = outcome_of(result.error_code, result.error_message, f"config resource {key}")
        found[key] = failure if failure is not None else {c.name: _entry(c) for c in result.configs}
    return found


# ---- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------------------

def alter_configs_request(resources: Iterable[ConfigResource], validate_only: bool) -> AlterConfigsRequest:
    return AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
        resource_type=int(r.restype), resource_name=r.name,
        configs=[AlterConfigsRequest.AlterableConfig(name=name, value=value)
                 for name, value in r.set_config_dict.items()]) for r in resources], validate_only=validate_only)


def incremental_alter_configs_request(resources: Iterable[ConfigResource],
                                      validate_only: bool) -> IncrementalAlterConfigsRequest:
    wire = IncrementalAlterConfigsRequest
    built = []
    for resource in resources:
        configs = []
        for entry in resource.incremental_configs:
            if entry.incremental_operation is None:
                raise ValueError(f"{resource!r}: config {entry.name!r} has no incremental_operation")
            operation = AlterConfigOpType(entry.incremental_operation)
            configs.append(wire.AlterableConfig(name=entry.name, config_operation=int(operation),
                                                value=None if operation == AlterConfigOpType.DELETE else entry.value))
        built.append(wire.AlterConfigsResource(resource_type=int(resource.restype), resource_name=resource.name,
                                               configs=configs))
    return wire(resources=built, validate_only=validate_only)


def read_alter_configs(response: AlterConfigsResponse | IncrementalAlterConfigsResponse
                       ) -> dict[tuple[int, str], object]:
    return {(r.resource_type, r.resource_name): outcome_of(r.error_code, r.error_message,
                                                           f"config resource {(r.resource_type, r.resource_name)}")
            for r in response.responses}
