"""Group configs (KIP-848, KIP-932): the per-group overrides Kafka's ``GroupConfig`` defines, set with
IncrementalAlterConfigs and read with DescribeConfigs on GROUP resources.

Each key overrides a broker-wide setting (its synonym) for one group; a group without overrides runs
on the broker's. Values are checked as Kafka's ``GroupConfig.validate`` checks them: known names, the
type, the key's own lower bound, the broker's bounds for a group value (``group.share.min.record.lock
.duration.ms`` and the like, at Kafka's defaults, widened to take in the broker's own setting when it
lies outside them) and a session timeout above the heartbeat interval. A refusal is INVALID_CONFIG.

The overrides are kept in ``group-configs.json`` in the data directory, written before the answer.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...error_codes import ErrorCode
from ..persistence.atomic_file import write_json_atomically
from .state_files import GROUP_CONFIG_FILE_NAME

__all__ = ["GroupConfigs", "GroupConfigError", "GroupConfigEntry", "GROUP_CONFIG_FILE_NAME", "parse_reset",
           "GROUP_CONFIG_SOURCE"]

GROUP_CONFIG_SOURCE, DEFAULT_CONFIG_SOURCE, STATIC_BROKER_CONFIG_SOURCE = 8, 5, 4  # DescribeConfigs' ConfigSource
_BOOLEAN, _STRING, _INT = 1, 2, 3  # DescribeConfigs' ConfigType
_INT32_MAX = (1 << 31) - 1


class GroupConfigError(Exception):
    def __init__(self, message: str, code: int = ErrorCode.INVALID_CONFIG):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class GroupConfigEntry:
    name: str
    value: str
    source: int
    kind: int
    synonyms: list[tuple[str, str | None, int]]


@dataclass(frozen=True)
class _Key:
    kind: int
    field: str | None  # the BrokerConfig field of the broker-wide value (None: Kafka's default)
    synonym: str | None  # its Kafka broker name (None: the key has no broker synonym)
    default: str  # Kafka's default, for the synonym's source
    at_least: int = 0  # the key's own ConfigDef lower bound
    bounds: tuple[int, int] | None = None  # Kafka's broker bounds for a group value (group.*.min/max.*)
    choices: tuple[str, ...] = ()


# Kafka 4.3's GroupConfig keys for the group types kafkawire serves (consumer, streams and share groups)
_KEYS: dict[str, _Key] = {
    "consumer.session.timeout.ms": _Key(_INT, "group_consumer_session_timeout_ms",
                                        "group.consumer.session.timeout.ms", "45000", 1, (45_000, 60_000)),
    "consumer.heartbeat.interval.ms": _Key(_INT, "group_consumer_heartbeat_interval_ms",
                                           "group.consumer.heartbeat.interval.ms", "5000", 1, (5_000, 15_000)),
    "streams.session.timeout.ms": _Key(_INT, "group_streams_session_timeout_ms",
                                       "group.streams.session.timeout.ms", "45000", 1, (45_000, 60_000)),
    "streams.heartbeat.interval.ms": _Key(_INT, "group_streams_heartbeat_interval_ms",
                                          "group.streams.heartbeat.interval.ms", "5000", 1, (5_000, 15_000)),
    "streams.num.standby.replicas": _Key(_INT, "group_streams_num_standby_replicas",
                                         "group.streams.num.standby.replicas", "0", 0, (0, 2)),
    "share.session.timeout.ms": _Key(_INT, "group_share_session_timeout_ms", "group.share.session.timeout.ms",
                                     "45000", 1, (45_000, 60_000)),
    "share.heartbeat.interval.ms": _Key(_INT, "group_share_heartbeat_interval_ms",
                                        "group.share.heartbeat.interval.ms", "5000", 1, (5_000, 15_000)),
    "share.record.lock.duration.ms": _Key(_INT, "group_share_record_lock_duration_ms",
                                          "group.share.record.lock.duration.ms", "30000", 1000, (15_000, 60_000)),
    "share.delivery.count.limit": _Key(_INT, "group_share_delivery_count_limit", "group.share.delivery.count.limit",
                                       "5", 2, (2, 10)),
    "share.partition.max.record.locks": _Key(_INT, "group_share_partition_max_record_locks",
                                             "group.share.partition.max.record.locks", "2000", 100, (100, 10_000)),
    "share.auto.offset.reset": _Key(_STRING, "share_auto_offset_reset", None, "latest"),
    "share.isolation.level": _Key(_STRING, "share_isolation_level", None, "read_uncommitted",
                                  choices=("read_committed", "read_uncommitted")),
    "share.renew.acknowledge.enable": _Key(_BOOLEAN, None, None, "true"),
}
_SESSION_PAIRS = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                  ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
                  ("share.session.timeout.ms", "share.heartbeat.interval.ms"))
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,9})?)S)?)?", re.IGNORECASE)


def parse_reset(text: str) -> tuple[str, float]:
    """``share.auto.offset.reset``: ("earliest"|"latest", 0) or ("by_duration", seconds back from now);
    raises ValueError (Kafka's ``ShareGroupAutoOffsetResetStrategy.fromString``)."""
    lowered = text.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered, 0.0
    if lowered.startswith("by_duration:"):
        spec = text.strip()[len("by_duration:"):]
        match = _DURATION.fullmatch(spec)
        if match and spec.upper() not in ("P", "PT") and not spec.upper().endswith("T"):
            days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
            return "by_duration", days * 86400 + hours * 3600 + minutes * 60 + seconds
        raise ValueError(f"Unable to parse duration string '{spec}' for auto offset reset strategy.")
    raise ValueError(f"Unknown auto offset reset strategy: {text}")


class GroupConfigs:
    """``broker``: the broker's settings (``BrokerConfig``), the values of groups without overrides;
    ``path``: where the overrides are kept (None: in memory only)."""

    def __init__(self, broker: Any, path: Path | None = None):
        self.broker = broker
        self.path = path
        self.overrides: dict[str, dict[str, str]] = {}
        self._listeners: list[Callable[[str], None]] = []

    def load(self) -> None:
        if self.path is None:
            return
        try:
            stored = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        self.overrides = {str(group): {str(k): str(v) for k, v in values.items() if k in _KEYS}
                          for group, values in stored.items() if isinstance(values, dict)}

    def on_change(self, listener: Callable[[str], None]) -> None:
        """Call ``listener(group_id)`` after a group's configs change."""
        self._listeners.append(listener)

    # ---- reading --------------------------------------------------------------------------------
    def value(self, group_id: str, name: str) -> Any:
        """The value in force for the group, parsed (int, str, bool)."""
        key = _KEYS[name]
        text = self.overrides.get(group_id, {}).get(name)
        return _parse(name, text) if text is not None else self._broker_value(key)

    def describe(self, group_id: str) -> list[GroupConfigEntry]:
        if not group_id:
            raise GroupConfigError("Group name must not be empty", ErrorCode.INVALID_REQUEST)
        overrides = self.overrides.get(group_id, {})
        entries = []
        for name, key in _KEYS.items():
            broker_text = _text(self._broker_value(key))
            broker_source = DEFAULT_CONFIG_SOURCE if broker_text == key.default else STATIC_BROKER_CONFIG_SOURCE
            synonyms: list[tuple[str, str | None, int]] = (
                [(key.synonym, broker_text, broker_source)] if key.synonym else [])
            if name in overrides:
                entries.append(GroupConfigEntry(name, overrides[name], GROUP_CONFIG_SOURCE, key.kind,
                                                [(name, overrides[name], GROUP_CONFIG_SOURCE), *synonyms]))
            else:
                entries.append(GroupConfigEntry(name, broker_text, broker_source if key.synonym else
                                                DEFAULT_CONFIG_SOURCE, key.kind, synonyms))
        return entries

    # ---- changing -------------------------------------------------------------------------------
    def alter(self, group_id: str, new_values: Callable[[dict[str, str]], Mapping[str, str | None]],
              validate_only: bool) -> None:
        """Replace the group's overrides by ``new_values(current)`` (None values dropped), checked;
        raises GroupConfigError, OSError."""
        if not group_id:
            raise GroupConfigError("Group name must not be empty", ErrorCode.INVALID_REQUEST)
        current = dict(self.overrides.get(group_id, {}))
        values = {name: text for name, text in new_values(current).items() if text is not None}
        for name, text in values.items():
            self._check(name, text)
        for session, heartbeat in _SESSION_PAIRS:
            if session in values or heartbeat in values:
                session_ms = (_parse(session, values[session]) if session in values
                              else self._broker_value(_KEYS[session]))
                heartbeat_ms = (_parse(heartbeat, values[heartbeat]) if heartbeat in values
                                else self._broker_value(_KEYS[heartbeat]))
                if session_ms <= heartbeat_ms:
                    raise GroupConfigError(f"{session} must be greater than {heartbeat}")
        if validate_only or values == current:
            return
        overrides = dict(self.overrides)
        if values:
            overrides[group_id] = values
        else:
            overrides.pop(group_id, None)
        if self.path is not None:
            write_json_atomically(self.path, overrides, indent=1)
        self.overrides = overrides
        for listener in self._listeners:
            listener(group_id)

    def _broker_value(self, key: _Key) -> Any:
        # the keys without a broker field are booleans (share.renew.acknowledge.enable)
        return getattr(self.broker, key.field) if key.field is not None else key.default == "true"

    def _check(self, name: str, text: str) -> None:
        key = _KEYS.get(name)
        if key is None:
            raise GroupConfigError(f"Unknown group config name: {name}")
        value = _parse(name, text)
        if key.kind == _INT:
            if value < key.at_least:
                raise GroupConfigError(f"Invalid value {text} for configuration {name}: Value must be at least "
                                       f"{key.at_least}")
            if key.bounds is not None:
                broker_value = self._broker_value(key)
                low, high = min(key.bounds[0], broker_value), max(key.bounds[1], broker_value)
                if not low <= value <= high:
                    raise GroupConfigError(f"{name} must be in the range {low} to {high} inclusive.")


def _parse(name: str, text: str) -> Any:
    """The typed value of ``text`` for the key ``name``; raises GroupConfigError (ConfigDef's messages)."""
    key = _KEYS[name]
    stripped = text.strip()
    if key.kind == _INT:
        try:
            value = int(stripped)
        except ValueError:
            raise GroupConfigError(f"Invalid value {text} for configuration {name}: Not a number of type INT") from None
        if not -_INT32_MAX - 1 <= value <= _INT32_MAX:
            raise GroupConfigError(f"Invalid value {text} for configuration {name}: Not a number of type INT")
        return value
    if key.kind == _BOOLEAN:
        if stripped.lower() not in ("true", "false"):
            raise GroupConfigError(f"Invalid value {text} for configuration {name}: Expected value to be either "
                                   f"true or false")
        return stripped.lower() == "true"
    if key.choices and stripped not in key.choices:
        raise GroupConfigError(f"Invalid value {text} for configuration {name}: String must be one of: "
                               f"{', '.join(key.choices)}")
    if name == "share.auto.offset.reset":
        try:
            parse_reset(stripped)
        except ValueError as exc:
            raise GroupConfigError(f"Invalid value {text} for configuration {name}: {exc}") from None
    return stripped


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
