"""Topic configs and the broker's dynamic log configs: Kafka's names, types, defaults and broker synonyms.

A topic's effective config (what its ``PartitionLog.config`` obeys) is, for each name, the topic's own
override, else its broker synonym's value (``retention.ms`` <- ``log.retention.ms``, ``log.retention.minutes``,
``log.retention.hours``), each broker name resolved as Kafka does: dynamic for this broker (AlterConfigs on
BROKER "0"), dynamic cluster default (BROKER ""), static (the broker's properties), then Kafka's default.
The dynamic broker configs are kept in ``DATA/dynamic-configs.json`` (Kafka keeps them in its metadata
log), so a restart keeps them. ``describe_topic`` and ``describe_broker`` build DescribeConfigs' entries
with sources and synonyms as Kafka's ``ConfigHelper`` does.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ...error_codes import ErrorCode
from ..persistence.atomic_file import write_json_atomically
from .broker_config import PROPERTIES, BrokerConfig
from ..storage.config import LogConfig

__all__ = ["ConfigError", "ConfigEntry", "TopicConfigs", "TOPIC_CONFIGS", "BROKER_LOG_CONFIGS", "ConfigSource",
           "ConfigType"]

_DYNAMIC_FILE = "dynamic-configs.json"
_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)


class ConfigType:
    """DescribeConfigs' ConfigType."""
    BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7


class ConfigSource:
    """DescribeConfigs' ConfigSource."""
    TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
    STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5


class ConfigError(Exception):
    """A config refused with a Kafka error code (INVALID_CONFIG, INVALID_REQUEST)."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.INVALID_CONFIG):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ConfigDef:
    """One config: its type, Kafka's default (as text; None: no default), a check of the parsed value
    (the reason it is refused, or None) and, for a topic config, its LogConfig field and broker synonyms
    (name, milliseconds per unit when the synonym counts minutes or hours)."""

    kind: int
    default: str | None
    check: Callable[[Any], str | None] | None = None
    field: str | None = None
    synonyms: tuple[tuple[str, int], ...] = ()


def _at_least(low: float) -> Callable[[Any], str | None]:
    return lambda value: None if value >= low else f"Value must be at least {low:g}"


def _between(low: float, high: float) -> Callable[[Any], str | None]:
    return lambda value: None if low <= value <= high else f"Value must be no more than {high:g}" \
        if value > high else f"Value must be at least {low:g}"


def _one_of(*allowed: str) -> Callable[[Any], str | None]:
    return lambda value: None if value in allowed else f"String must be one of: {', '.join(allowed)}"


def _list_of(*allowed: str) -> Callable[[Any], str | None]:
    def check(values) -> str | None:
        if not values:
            return "Empty list not allowed"
        bad = [value for value in values if value not in allowed]
        return f"String must be one of: {', '.join(allowed)}" if bad else None
    return check


def _level_between(low: int, high: int, default: int | None = None) -> Callable[[Any], str | None]:
    """A compression level: in [low, high] (or the codec's "default" level where it has one)."""
    def check(value) -> str | None:
        if low <= value <= high or value == default:
            return None
        return f"Value must be between {low} and {high}" + (f" or {default}" if default is not None else "")
    return check


def _throttled_replicas(values) -> str | None:
    """``ThrottledReplicaListValidator``: ``*`` or ``partition:broker`` pairs."""
    if list(values) == ["*"] or all(part.isdigit() for value in values for part in value.split(":", 1))\
            and all(value.count(":") == 1 for value in values):
        return None
    return ("must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


_LONG_MAX = str(_INT64[1])
_WEEK_MS = str(7 * 24 * 3600 * 1000)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # BrokerCompressionType

# Kafka's topic configs (LogConfig's definitions, defaults and broker synonyms). Those with a LogConfig
# field are applied; those without (``field`` None) are validated, stored and described but not acted on
# by this single-replica broker: replication throttles, unclean leader election, flushing (every append is
# written; ``fsync`` is the broker's), preallocation, index sizing, segment jitter, file deletion delay,
# and the remote copy switches.
TOPIC_CONFIGS: dict[str, ConfigDef] = {
    "cleanup.policy": ConfigDef(ConfigType.LIST, "delete", _list_of("compact", "delete"), "cleanup_policy",
                                (("log.cleanup.policy", 0),)),
    "delete.retention.ms": ConfigDef(ConfigType.LONG, "86400000", _at_least(0), "delete_retention_ms",
                                     (("log.cleaner.delete.retention.ms", 0),)),
    "index.interval.bytes": ConfigDef(ConfigType.INT, "4096", _at_least(0), "index_interval_bytes",
                                      (("log.index.interval.bytes", 0),)),
    "local.retention.bytes": ConfigDef(ConfigType.LONG, "-2", _at_least(-2), "local_retention_bytes",
                                       (("log.local.retention.bytes", 0),)),
    "local.retention.ms": ConfigDef(ConfigType.LONG, "-2", _at_least(-2), "local_retention_ms",
                                    (("log.local.retention.ms", 0),)),
    "max.compaction.lag.ms": ConfigDef(ConfigType.LONG, _LONG_MAX, _at_least(1), "max_compaction_lag_ms",
                                       (("log.cleaner.max.compaction.lag.ms", 0),)),
    "max.message.bytes": ConfigDef(ConfigType.INT, "1048588", _at_least(0), "max_message_bytes",
                                   (("message.max.bytes", 0),)),
    "message.timestamp.after.max.ms": ConfigDef(ConfigType.LONG, _LONG_MAX, _at_least(0),
                                                "message_timestamp_after_max_ms",
                                                (("log.message.timestamp.after.max.ms", 0),)),
    "message.timestamp.before.max.ms": ConfigDef(ConfigType.LONG, _LONG_MAX, _at_least(0),
                                                 "message_timestamp_before_max_ms",
                                                 (("log.message.timestamp.before.max.ms", 0),)),
    "message.timestamp.type": ConfigDef(ConfigType.STRING, "CreateTime", _one_of("CreateTime", "LogAppendTime"),
                                        "message_timestamp_type", (("log.message.timestamp.type", 0),)),
    "min.cleanable.dirty.ratio": ConfigDef(ConfigType.DOUBLE, "0.5", _between(0, 1), "min_cleanable_dirty_ratio",
                                           (("log.cleaner.min.cleanable.ratio", 0),)),
    # not a log setting: an in-process cluster's acks=all produce checks it (field None)
    "min.insync.replicas": ConfigDef(ConfigType.INT, "1", _at_least(1), None, (("min.insync.replicas", 0),)),
    "min.compaction.lag.ms": ConfigDef(ConfigType.LONG, "0", _at_least(0), "min_compaction_lag_ms",
                                       (("log.cleaner.min.compaction.lag.ms", 0),)),
    "remote.storage.enable": ConfigDef(ConfigType.BOOLEAN, "false", None, "remote_storage_enable"),
    "retention.bytes": ConfigDef(ConfigType.LONG, "-1", None, "retention_bytes", (("log.retention.bytes", 0),)),
    "retention.ms": ConfigDef(ConfigType.LONG, _WEEK_MS, _at_least(-1), "retention_ms",
                              (("log.retention.ms", 0), ("log.retention.minutes", 60_000),
                               ("log.retention.hours", 3_600_000))),
    "segment.bytes": ConfigDef(ConfigType.INT, "1073741824", _at_least(14), "segment_bytes",
                               (("log.segment.bytes", 0),)),
    "segment.ms": ConfigDef(ConfigType.LONG, _WEEK_MS, _at_least(1), "segment_ms",
                            (("log.roll.ms", 0), ("log.roll.hours", 3_600_000))),
    # compression.type recompresses appended batches in another codec, at compression.<codec>.level
    "compression.type": ConfigDef(ConfigType.STRING, "producer", _one_of(*COMPRESSION_TYPES), "compression_type",
                                  (("compression.type", 0),)),
    "compression.gzip.level": ConfigDef(ConfigType.INT, "-1", _level_between(1, 9, -1), "compression_gzip_level",
                                        (("compression.gzip.level", 0),)),
    "compression.lz4.level": ConfigDef(ConfigType.INT, "9", _level_between(1, 17), "compression_lz4_level",
                                       (("compression.lz4.level", 0),)),
    "compression.zstd.level": ConfigDef(ConfigType.INT, "3", _level_between(-131072, 22), "compression_zstd_level",
                                        (("compression.zstd.level", 0),)),
    # validated and stored, not acted on (see above)
    "file.delete.delay.ms": ConfigDef(ConfigType.LONG, "60000", _at_least(0), None,
                                      (("log.segment.delete.delay.ms", 0),)),
    "flush.messages": ConfigDef(ConfigType.LONG, _LONG_MAX, _at_least(1), None,
                                (("log.flush.interval.messages", 0),)),
    "flush.ms": ConfigDef(ConfigType.LONG, _LONG_MAX, _at_least(0), None,
                          (("log.flush.interval.ms", 0), ("log.flush.scheduler.interval.ms", 0))),
    "follower.replication.throttled.replicas": ConfigDef(ConfigType.LIST, "", _throttled_replicas, None),
    "leader.replication.throttled.replicas": ConfigDef(ConfigType.LIST, "", _throttled_replicas, None),
    "preallocate": ConfigDef(ConfigType.BOOLEAN, "false", None, None, (("log.preallocate", 0),)),
    "remote.log.copy.disable": ConfigDef(ConfigType.BOOLEAN, "false", None, None),
    "remote.log.delete.on.disable": ConfigDef(ConfigType.BOOLEAN, "false", None, None),
    "segment.index.bytes": ConfigDef(ConfigType.INT, "10485760", _at_least(4), None,
                                     (("log.index.size.max.bytes", 0),)),
    "segment.jitter.ms": ConfigDef(ConfigType.LONG, "0", _at_least(0), None,
                                   (("log.roll.jitter.ms", 0), ("log.roll.jitter.hours", 3_600_000))),
    "unclean.leader.election.enable": ConfigDef(ConfigType.BOOLEAN, "false", None, None,
                                                (("unclean.leader.election.enable", 0),)),
}


def _broker_log_configs() -> dict[str, ConfigDef]:
    """The broker configs that are topic configs' synonyms, all dynamic (cluster-wide) in Kafka."""
    defs: dict[str, ConfigDef] = {}
    for topic_def in TOPIC_CONFIGS.values():
        for index, (name, unit) in enumerate(topic_def.synonyms):
            if unit:  # log.retention.hours=168, log.retention.minutes (no default), log.roll.hours=168
                default = str(int(topic_def.default or 0) // unit) if name.endswith("hours") else None
                low = {"log.roll.hours": 1, "log.roll.jitter.hours": 0}.get(name, -1)
                defs[name] = ConfigDef(ConfigType.INT, default, _at_least(low))
            else:  # the first of several synonyms has no default of its own: the last one's applies
                last = index == len(topic_def.synonyms) - 1
                defs[name] = ConfigDef(topic_def.kind, topic_def.default if last else None, topic_def.check)
    return defs


BROKER_LOG_CONFIGS = _broker_log_configs()
# The broker names Kafka resolves together (DynamicBrokerConfig.brokerConfigSynonyms), in precedence order.
_SYNONYM_GROUPS = [("log.retention.ms", "log.retention.minutes", "log.retention.hours"), ("log.roll.ms", "log.roll.hours"),
                   ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                   ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")]
# BrokerConfig fields that are static broker configs: Kafka name -> field.
_STATIC_FIELDS = {"log.segment.bytes": "segment_bytes", "log.retention.ms": "retention_ms",
                  "log.retention.bytes": "retention_bytes", "message.max.bytes": "message_max_bytes"}
# Other broker configs DescribeConfigs shows (read-only: not dynamic here, as in Kafka).
_READ_ONLY_BROKER = {"num.partitions": ("num_partitions", ConfigType.INT, "1"),
                     "auto.create.topics.enable": ("auto_create_topics", ConfigType.BOOLEAN, "true"),
                     "fetch.max.bytes": ("fetch_max_bytes", ConfigType.INT, "57671680"),
                     "log.retention.check.interval.ms": ("retention_check_interval_ms", ConfigType.LONG, "300000"),
                     "log.cleaner.enable": ("log_cleaner_enable", ConfigType.BOOLEAN, "true"),
                     "log.cleaner.threads": ("log_cleaner_threads", ConfigType.INT, "1"),
                     "log.cleaner.dedupe.buffer.size": ("log_cleaner_dedupe_buffer_size", ConfigType.LONG, "134217728"),
                     "log.cleaner.io.buffer.size": ("log_cleaner_io_buffer_size", ConfigType.INT, "524288"),
                     "log.cleaner.io.buffer.load.factor": ("log_cleaner_io_buffer_load_factor", ConfigType.DOUBLE,
                                                           "0.9"),
                     "log.cleaner.io.max.bytes.per.second": ("log_cleaner_io_max_bytes_per_second", ConfigType.DOUBLE,
                                                             "1.7976931348623157E308"),
                     "log.cleaner.backoff.ms": ("log_cleaner_backoff_ms", ConfigType.LONG, "15000")}


def broker_synonyms(name: str) -> tuple[str, ...]:
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return (name,)


def parse(name: str, definition: ConfigDef, text: str | None) -> Any:
    """The value of ``text`` for ``name`` (ConfigError with Kafka's message when invalid)."""
    if text is None:
        raise ConfigError(f"Null value not supported for configuration {name}")
    stripped = text.strip()
    try:
        value: Any
        if definition.kind in (ConfigType.INT, ConfigType.LONG):
            value = int(stripped)
            low, high = _INT32 if definition.kind == ConfigType.INT else _INT64
            if not low <= value <= high:
                raise ValueError
        elif definition.kind == ConfigType.DOUBLE:
            value = float(stripped)
            if math.isnan(value):
                raise ValueError
        elif definition.kind == ConfigType.BOOLEAN:
            if stripped.lower() not in ("true", "false"):
                raise ValueError
            value = stripped.lower() == "true"
        elif definition.kind == ConfigType.LIST:
            value = tuple(item.strip() for item in stripped.split(",") if item.strip())
        else:
            value = stripped
    except ValueError:
        kind = {ConfigType.INT: "int", ConfigType.LONG: "long", ConfigType.DOUBLE: "double",
                ConfigType.BOOLEAN: "boolean"}.get(definition.kind, "value")
        raise ConfigError(f"Invalid value {text} for configuration {name}: Not a number of type {kind}"
                          if kind not in ("boolean", "value") else
                          f"Invalid value {text} for configuration {name}: Expected value to be either true or false"
                          ) from None
    reason = definition.check(value) if definition.check is not None else None
    if reason is not None:
        raise ConfigError(f"Invalid value {text} for configuration {name}: {reason}")
    return value


@dataclass
class ConfigEntry:
    """A DescribeConfigs entry: value, source, synonyms ((name, value, source), first the one in force)."""

    name: str
    value: str | None
    source: int
    synonyms: list[tuple[str, str | None, int]]
    kind: int
    read_only: bool = False


class TopicConfigs:
    """Resolves topic configs over the broker's static and dynamic log configs, and keeps the latter."""

    def __init__(self, config: BrokerConfig):
        self.config = config
        self.static = {name: str(getattr(config, attr)) for name, attr in _STATIC_FIELDS.items()
                       if getattr(config, attr) != _DEFAULTS[attr]}
        for name, text in config.log_configs.items():  # log.cleaner.min.cleanable.ratio=0.1, ...
            definition = BROKER_LOG_CONFIGS.get(name)
            if definition is None:
                raise ValueError(f"unknown broker setting {name!r}")
            try:
                parse(name, definition, text)
            except ConfigError as error:
                raise ValueError(error.message) from None
            self.static[name] = text.strip()
        self.dynamic_broker: dict[str, str] = {}  # BROKER "<node id>"
        self.dynamic_default: dict[str, str] = {}  # BROKER "": the cluster default

    # ---- persistence ----------------------------------------------------------------------------
    @property
    def _path(self) -> Path:
        return self.config.data_dir / _DYNAMIC_FILE

    def load(self) -> None:
        try:
            saved = json.loads(self._path.read_text())
        except FileNotFoundError:
            return
        self.dynamic_broker = {k: v for k, v in saved.get("broker", {}).items() if k in BROKER_LOG_CONFIGS}
        self.dynamic_default = {k: v for k, v in saved.get("default", {}).items() if k in BROKER_LOG_CONFIGS}

    def save(self) -> None:
        write_json_atomically(self._path, {"broker": self.dynamic_broker, "default": self.dynamic_default}, indent=1)

    # ---- resolution -----------------------------------------------------------------------------
    def broker_value(self, name: str) -> tuple[str | None, int]:
        """A broker config's value and its source, dynamic for this broker first."""
        for source, values in ((ConfigSource.DYNAMIC_BROKER_CONFIG, self.dynamic_broker),
                               (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.dynamic_default),
                               (ConfigSource.STATIC_BROKER_CONFIG, self.static)):
            if name in values:
                return values[name], source
        definition = BROKER_LOG_CONFIGS.get(name)
        return (definition.default if definition is not None else None), ConfigSource.DEFAULT_CONFIG

    def _broker_default_for(self, topic_name: str) -> str:
        """What a topic without an override gets: its first broker synonym that has a value."""
        definition = TOPIC_CONFIGS[topic_name]
        for broker_name, unit in definition.synonyms:
            value, _ = self.broker_value(broker_name)
            if value is not None:
                return str(int(value) * unit) if unit else value
        assert definition.default is not None
        return definition.default

    def effective(self, overrides: dict[str, str]) -> dict[str, str]:
        """Every topic config by Kafka name, as text, for a topic with ``overrides``."""
        return {name: _canonical(name, overrides[name]) if name in overrides else self._broker_default_for(name)
                for name in TOPIC_CONFIGS}

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        """The LogConfig for a topic with ``overrides`` (ConfigError: an unknown name, a bad value)."""
        for name in overrides:
            if name not in TOPIC_CONFIGS:
                raise ConfigError(f"Unknown topic config name: {name}")
        values: dict[str, Any] = {}
        for name, text in self.effective(overrides).items():
            definition = TOPIC_CONFIGS[name]
            value = parse(name, definition, text)
            if definition.field is None:
                continue  # checked, and read where it is used
            values[definition.field] = ",".join(value) if definition.kind == ConfigType.LIST else value
        if values["remote_storage_enable"] and self.config.remote_dir is None:
            raise ConfigError("remote.storage.enable needs a broker started with a remote tier")
        if values["remote_storage_enable"] and "compact" in values["cleanup_policy"]:
            raise ConfigError("Remote log storage is unsupported for the compacted topics")
        if values["min_compaction_lag_ms"] > values["max_compaction_lag_ms"]:
            raise ConfigError(f"conflict topic config setting min.compaction.lag.ms "
                              f"({values['min_compaction_lag_ms']}) > max.compaction.lag.ms "
                              f"({values['max_compaction_lag_ms']})")
        try:
            return LogConfig(**values)
        except ValueError as error:
            raise ConfigError(str(error)) from None

    def check_broker_update(self, updates: dict[str, str | None]) -> None:
        """Refuse unknown or read-only broker configs and bad values (ConfigError)."""
        for name, text in updates.items():
            definition = BROKER_LOG_CONFIGS.get(name)
            if definition is None:
                if name in _READ_ONLY_BROKER or name in _STATIC_FIELDS or name in PROPERTIES:
                    raise ConfigError(f"Cannot update these configs dynamically: Set({name})")
                raise ConfigError(f"Unknown broker config name: {name}")
            if text is not None:
                parse(name, definition, text)

    # ---- DescribeConfigs ------------------------------------------------------------------------
    def _synonyms(self, name: str, names: tuple[str, ...]) -> list[tuple[str, str | None, int]]:
        """``ConfigHelper.configSynonyms``: by source, then by synonym, from ``name`` on."""
        found: list[tuple[str, str | None, int]] = []
        for source, values in ((ConfigSource.DYNAMIC_BROKER_CONFIG, self.dynamic_broker),
                               (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, self.dynamic_default),
                               (ConfigSource.STATIC_BROKER_CONFIG, self.static),
                               (ConfigSource.DEFAULT_CONFIG, _STATIC_DEFAULTS)):
            found.extend((synonym, values[synonym], source) for synonym in names if synonym in values)
        while found and found[0][0] != name:
            found.pop(0)
        return found

    def describe_topic(self, overrides: dict[str, str]) -> list[ConfigEntry]:
        entries = []
        for name, value in self.effective(overrides).items():
            definition = TOPIC_CONFIGS[name]
            synonyms = []
            if definition.synonyms:
                primary = definition.synonyms[0][0]
                synonyms = self._synonyms(primary, broker_synonyms(primary))
            if name in overrides:
                synonyms.insert(0, (name, value, ConfigSource.TOPIC_CONFIG))
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(ConfigEntry(name, value, source, synonyms, definition.kind))
        return entries

    def describe_broker(self, per_broker: bool) -> list[ConfigEntry]:
        """The broker's configs (``per_broker``), or only the cluster-wide dynamic defaults (BROKER "")."""
        entries = []
        if per_broker:
            for name, (attr, kind, _) in _READ_ONLY_BROKER.items():
                value = getattr(self.config, attr)
                text = _java_text(value)
                source = ConfigSource.STATIC_BROKER_CONFIG if value != _DEFAULTS[attr] else ConfigSource.DEFAULT_CONFIG
                entries.append(ConfigEntry(name, text, source, [(name, text, source)], kind, read_only=True))
        for name, definition in BROKER_LOG_CONFIGS.items():
            if not per_broker and name not in self.dynamic_default:
                continue
            synonyms = self._synonyms(name, broker_synonyms(name))
            if not per_broker:
                synonyms = [s for s in synonyms if s[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
            value = self.broker_value(name)[0] if per_broker else self.dynamic_default[name]
            source = synonyms[0][2] if synonyms else ConfigSource.DEFAULT_CONFIG
            entries.append(ConfigEntry(name, value, source, synonyms, definition.kind))
        return entries


def _java_text(value) -> str:
    """A value as Kafka prints it (``true``, ``0.9``, ``1.7976931348623157E308``)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value).replace("e+", "E").replace("e-", "E-")
    return str(value)


def _canonical(name: str, text: str) -> str:
    """A list value as Kafka prints it back (``compact, delete`` -> ``compact,delete``)."""
    if TOPIC_CONFIGS[name].kind == ConfigType.LIST:
        return ",".join(item.strip() for item in text.split(",") if item.strip())
    return text.strip()


_DEFAULTS = {f.name: f.default for f in fields(BrokerConfig)}
# Kafka's static defaults of the broker log configs that have one (ConfigSource DEFAULT_CONFIG).
_STATIC_DEFAULTS = {name: d.default for name, d in BROKER_LOG_CONFIGS.items() if d.default is not None}
