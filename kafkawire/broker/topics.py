"""Topics: names, ids, partitions and configs, and the partition logs under the data directory.

Topic metadata (id, partition count, configs) is kept in ``DATA/topics.json`` so that topic ids
survive a restart; the logs themselves live in Kafka's layout, ``DATA/<topic>-<partition>/``.

Creating a topic is planned on the event loop (``plan``: name, configs and the partition limits, no
I/O) and carried out on a worker thread (``create``: the partition directories and logs), so that a
topic of thousands of partitions does not stall other connections. A creation either completes or is
rolled back (its directories removed); ``topics.json`` is written once the logs exist, and directories
that no topic owns (a creation cut short by a crash) are removed when the broker starts.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..error_codes import ErrorCode
from .atomic_file import write_json_atomically
from .config import MAX_RECORDS_PER_USER_OP, BrokerConfig
from .storage import LogConfig, PartitionLog, RemoteStore
from .storage.descriptors import DescriptorCache

__all__ = ["Topic", "TopicManager", "TopicError", "TOPIC_CONFIGS"]

log = logging.getLogger(__name__)

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_NAME_LENGTH = 249
_METADATA_FILE = "topics.json"
_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_LOG_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".txnindex", ".tmp", ".kafkawire-clean-shutdown",
                      ".cleaned", ".swap")

# The topic configs this broker understands: Kafka name -> (LogConfig field, parser).
TOPIC_CONFIGS = {
    "retention.ms": ("retention_ms", int),
    "retention.bytes": ("retention_bytes", int),
    "segment.bytes": ("segment_bytes", int),
    "max.message.bytes": ("max_message_bytes", int),
    "message.timestamp.type": ("message_timestamp_type", str),
    "remote.storage.enable": ("remote_storage_enable", lambda text: text.strip().lower() == "true"),
    "local.retention.ms": ("local_retention_ms", int),
    "local.retention.bytes": ("local_retention_bytes", int),
    "cleanup.policy": ("cleanup_policy", lambda text: ",".join(part.strip() for part in text.split(","))),
    "delete.retention.ms": ("delete_retention_ms", int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", float),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", int),
    "segment.ms": ("segment_ms", int),
}


class TopicError(Exception):
    """A topic operation refused with a Kafka error code."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[PartitionLog] = field(default_factory=list)
    planned_partitions: int = 0  # how many partitions a topic being created will have

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


class TopicManager:
    """The broker's topics. Not thread-safe: the event loop owns it."""

    def __init__(self, config: BrokerConfig, descriptors: DescriptorCache | None = None):
        try:  # settings the broker cannot honour are refused now, not by every topic created later
            _log_config(config, config.topic_defaults)
        except TopicError as failure:
            raise ValueError(f"topic_defaults: {failure.message}") from None
        self.config = config
        self.descriptors = descriptors
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self._creating: dict[str, asyncio.Future] = {}  # topics being created on a worker thread
        self.partition_count = 0  # hosted or being created
        self.remote = (RemoteStore(config.remote_dir, config.remote_read_latency_ms)
                       if config.remote_dir is not None else None)

    # ---- lifecycle ------------------------------------------------------------------------------
    def load(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        path = self.config.data_dir / _METADATA_FILE
        if not path.exists():
            return
        for entry in json.loads(path.read_text()):
            topic = Topic(entry["name"], uuid.UUID(entry["id"]), dict(entry["configs"]))
            topic.partitions = [self._open_log(topic, index) for index in range(entry["partitions"])]
            self._add(topic)
        self._remove_stray_logs()

    def _remove_stray_logs(self) -> None:
        """Delete partition directories no topic owns: a creation or deletion cut short by a crash
        (Kafka likewise deletes the logs of partitions its metadata no longer has)."""
        for entry in self.config.data_dir.iterdir():
            match = _PARTITION_DIR.fullmatch(entry.name)
            if match is None or not entry.is_dir():
                continue
            topic = self.topics.get(match[1])
            if topic is not None and int(match[2]) < len(topic.partitions):
                continue
            if all(f.is_file() and f.name.endswith(_LOG_FILE_SUFFIXES) for f in entry.iterdir()):
                log.warning("removing %s: no topic owns this partition directory", entry)
                shutil.rmtree(entry, ignore_errors=True)

    def close(self) -> None:
        for topic in self.topics.values():
            for log in topic.partitions:
                log.close()

    def _save(self) -> None:
        entries = [{"name": t.name, "id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.configs}
                   for t in self.topics.values()]
        write_json_atomically(self.config.data_dir / _METADATA_FILE, entries, indent=1)

    def _add(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic
        self.partition_count += len(topic.partitions)

    # ---- queries ----------------------------------------------------------------------------------
    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def log(self, name: str, partition: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= partition < len(topic.partitions):
            return None
        return topic.partitions[partition]

    def effective_configs(self, topic: Topic) -> dict[str, str]:
        """Every topic config this broker understands, by Kafka name, as the topic's logs apply them."""
        log_config = _log_config(self.config, topic.configs)
        values = {}
        for name, (attribute, _) in TOPIC_CONFIGS.items():
            if attribute is not None:
                value = getattr(log_config, attribute)
                values[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return values

    def all_logs(self) -> Iterator[tuple[Topic, int, PartitionLog]]:
        for topic in self.topics.values():
            for index, log in enumerate(topic.partitions):
                yield topic, index, log

    # ---- changes ----------------------------------------------------------------------------------
    def plan(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
             configs: dict[str, str] | None = None) -> Topic:
        """A topic to create, checked (name, existence, partitions, replication, configs) but not created:
        its ``partitions`` list is empty and ``planned_partitions`` says how many it will have."""
        _check_name(name)
        if name in self.topics or name in self._creating:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if num_partitions <= 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        if replication_factor not in (-1, 1):
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor {replication_factor} is larger than the 1 available broker.")
        merged = dict(self.config.topic_defaults)
        merged.update(configs or {})
        _log_config(self.config, merged)  # validates
        topic = Topic(name, uuid.uuid4(), merged)
        topic.planned_partitions = num_partitions
        return topic

    @staticmethod
    def check_request_size(topics: list[Topic], explicit_configs: int = 0) -> None:
        """Kafka's controller refuses an operation of more than 10,000 metadata records (a topic, each
        partition, each config) with POLICY_VIOLATION, for the whole request."""
        records = sum(1 + t.planned_partitions for t in topics) + explicit_configs
        if records > MAX_RECORDS_PER_USER_OP:
            raise TopicError(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")

    async def create(self, planned: list[Topic]) -> list[Topic | TopicError]:
        """Create planned topics (see ``plan``): each is created whole, or refused and rolled back.

        POLICY_VIOLATION for a topic that would take the broker past ``max.broker.partitions``."""
        results: list[Topic | TopicError] = []
        accepted: list[Topic] = []
        positions: list[int] = []
        loop = asyncio.get_running_loop()
        for topic in planned:
            if topic.name in self.topics or topic.name in self._creating:
                results.append(TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists."))
                continue
            limit = self.config.max_broker_partitions
            if self.partition_count + topic.planned_partitions > limit:
                results.append(TopicError(
                    ErrorCode.POLICY_VIOLATION,
                    f"Creating {topic.planned_partitions} partition(s) would take the broker past "
                    f"max.broker.partitions ({limit}); it hosts {self.partition_count}."))
                continue
            self._creating[topic.name] = loop.create_future()
            self.partition_count += topic.planned_partitions
            accepted.append(topic)
            positions.append(len(results))
            results.append(topic)
        try:
            outcomes = await asyncio.to_thread(self._open_logs, accepted) if accepted else []
            for topic in accepted:
                self.partition_count -= topic.planned_partitions  # _add counts what was created
            for topic, position, failure in zip(accepted, positions, outcomes):
                if failure is None:
                    self._add(topic)
                else:
                    results[position] = failure
            if any(failure is None for failure in outcomes):
                self._save()
        finally:
            for topic in accepted:
                self._creating.pop(topic.name).set_result(self.topics.get(topic.name))
        return results

    async def wait_for_creation(self, name: str) -> Topic | None:
        """The topic once a creation in progress has ended (None if it failed); at once if none is."""
        pending = self._creating.get(name)
        return await asyncio.shield(pending) if pending is not None else self.topics.get(name)

    def _open_logs(self, topics: list[Topic]) -> list[TopicError | None]:
        """Create each topic's partition logs (on a worker thread); a topic that fails is rolled back."""
        outcomes: list[TopicError | None] = []
        for topic in topics:
            try:
                for index in range(topic.planned_partitions):
                    topic.partitions.append(self._open_log(topic, index))
            except OSError as error:
                for partition_log in topic.partitions:
                    partition_log.delete()
                for index in range(topic.planned_partitions):
                    shutil.rmtree(self._log_dir(topic.name, index), ignore_errors=True)
                topic.partitions = []
                log.warning("creating topic %s failed and was rolled back: %s", topic.name, error)
                outcomes.append(TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Creating topic {topic.name} failed: "
                                                                             f"{error}"))
            else:
                outcomes.append(None)
        return outcomes

    async def delete(self, name: str) -> Topic:
        """Forget the topic at once, then remove its logs on a worker thread."""
        topic = self.topics.pop(name, None)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        del self.by_id[topic.topic_id]
        self.partition_count -= len(topic.partitions)
        self._save()

        for partition_log in topic.partitions:
            partition_log.detach()

        def remove() -> None:
            for partition_log in topic.partitions:
                partition_log.remove_files()  # the local directory and any remote copies
        await asyncio.to_thread(remove)
        return topic

    def _log_dir(self, name: str, partition: int) -> Path:
        return self.config.data_dir / f"{name}-{partition}"

    def _open_log(self, topic: Topic, partition: int) -> PartitionLog:
        log_config = _log_config(self.config, topic.configs)
        remote = self.remote if log_config.remote_storage_enable else None
        return PartitionLog(self._log_dir(topic.name, partition), log_config, remote=remote,
                            descriptors=self.descriptors)


def _check_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name '{name}' is illegal.")
    if len(name) > _MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is longer than the maximum of {_MAX_NAME_LENGTH} characters.")
    if not _LEGAL_NAME.fullmatch(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name '{name}' contains characters other than ASCII alphanumerics, '.', '_' and '-'.")


def _log_config(config: BrokerConfig, configs: dict[str, str]) -> LogConfig:
    values = {"segment_bytes": config.segment_bytes, "retention_ms": config.retention_ms,
              "retention_bytes": config.retention_bytes, "max_message_bytes": config.message_max_bytes,
              "cleanup_policy": config.cleanup_policy, "delete_retention_ms": config.log_cleaner_delete_retention_ms,
              "min_cleanable_dirty_ratio": config.log_cleaner_min_cleanable_ratio,
              "min_compaction_lag_ms": config.log_cleaner_min_compaction_lag_ms,
              "max_compaction_lag_ms": config.log_cleaner_max_compaction_lag_ms}
    for name, text in configs.items():
        if name not in TOPIC_CONFIGS:
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        attribute, parse = TOPIC_CONFIGS[name]
        try:
            value = parse(text)
        except (TypeError, ValueError):
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid value {text} for configuration {name}") from None
        if name == "message.timestamp.type" and value not in ("CreateTime", "LogAppendTime"):
            raise TopicError(ErrorCode.INVALID_CONFIG, f"Invalid value {text} for configuration {name}")
        values[attribute] = value
    if values.get("remote_storage_enable") and config.remote_dir is None:
        raise TopicError(ErrorCode.INVALID_CONFIG, "remote.storage.enable needs a broker started with a remote tier")
    try:
        return LogConfig(**values)
    except ValueError as error:
        raise TopicError(ErrorCode.INVALID_CONFIG, str(error)) from None
