"""Topics: names, ids, partitions and configs, and the partition logs under the data directory.

Topic metadata (id, partition count, configs) is kept in ``DATA/topics.json`` so that topic ids
survive a restart; the logs themselves live in Kafka's layout, ``DATA/<topic>-<partition>/``.

Creating a topic is planned on the event loop (``plan``: name, configs and the partition limits, no
I/O), its logs built on a worker thread (``create``: thousands of objects, no I/O) and recorded in
``topics.json``; the partitions' folders are made afterwards on another worker thread (or by a log's
first use), so that a topic of thousands of partitions stalls neither other connections nor its own
answer. Directories that no topic owns (a deletion cut short by a crash) are removed when the broker
starts.
"""
from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..error_codes import ErrorCode
from .log_dirs import FUTURE_SUFFIX, LogDirs, ReplicaMove
from .metadata_cache import MetadataCache
from .persistence.atomic_file import write_json_atomically
from .config.broker_config import MAX_RECORDS_PER_USER_OP, BrokerConfig
from .storage.config import LogConfig
from .storage.descriptors import DescriptorCache
from .config.topic_configs import ConfigError, TopicConfigs

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from .storage.log import PartitionLog
    from .storage.remote import RemoteStore

__all__ = ["Topic", "TopicManager", "TopicError"]

log = logging.getLogger(__name__)

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_NAME_LENGTH = 249
_METADATA_FILE = "topics.json"
_CLOSING_THREADS = 8
_FREEZE_AFTER_PARTITIONS = 1000
_PARTITION_DIR = re.compile(r"(.+)-(\d+)")
_DELETE_SUFFIX = "-delete"  # a moved partition's old folder, being deleted (Kafka's DeleteDirSuffix)
_LOG_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".snapshot", ".txnindex", ".tmp", ".kafkawire-clean-shutdown",
                      ".cleaned", ".swap", "leader-epoch-checkpoint", "log-start-offset")


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
    replication_factor: int = -1  # as created (-1: the default); kept in memory only

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


class TopicManager:
    """The broker's topics. Not thread-safe: the event loop owns it."""

    def __init__(self, config: BrokerConfig, descriptors: DescriptorCache | None = None):
        self.config = config
        self.configs = TopicConfigs(config)  # the broker's static and dynamic log configs
        try:  # settings the broker cannot honour are refused now, not by every topic created later
            self.configs.log_config(config.topic_defaults)
        except ConfigError as failure:
            raise ValueError(f"topic_defaults: {failure.message}") from None
        self.descriptors = descriptors
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.metadata_cache = MetadataCache()  # Metadata's encoded topic entries, dropped as topics change
        self._creating: dict[str, asyncio.Future] = {}  # topics being created on a worker thread
        self._folder_maker: ThreadPoolExecutor | None = None  # makes new logs' folders (_make_folders)
        self._closing = False
        self._unfrozen_partitions = 0  # created since the heap was last frozen (_created)
        self.partition_count = 0  # hosted or being created
        self.brokers = 1  # brokers that can hold a replica (an in-process cluster's size)
        # topic, partition and config changes since the start: where a KRaft metadata log would have got
        # to (DescribeQuorum's high watermark; kafkawire keeps no metadata log)
        self.metadata_changes = 0
        self.remote: RemoteStore | None = None  # a directory standing in for tiered storage, when configured
        if config.remote_dir is not None:
            from .storage.remote import RemoteStore
            self.remote = RemoteStore(config.remote_dir, config.remote_read_latency_ms)
        self.dirs = LogDirs(config.log_dirs)
        self._placement: dict[str, list[str]] = {}  # topic being created -> its partitions' directories

    # ---- lifecycle ------------------------------------------------------------------------------
    def load(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.dirs.prepare()
        self.configs.load()
        path = self.config.data_dir / _METADATA_FILE
        if not path.exists():
            return
        found = self.dirs.locate() if self.dirs.several else {}  # partition folder -> its log directory
        for entry in json.loads(path.read_text()):
            topic = Topic(entry["name"], uuid.UUID(entry["id"]), dict(entry["configs"]))
            log_config = self.log_config(topic.configs)  # (one for all the topic's partitions)
            directories = [found.get(f"{topic.name}-{index}") for index in range(entry["partitions"])]
            if self.dirs.several:  # a partition whose folder is nowhere starts afresh where new ones go
                missing = [index for index, directory in enumerate(directories) if directory is None]
                for index, directory in zip(missing, self.dirs.place(len(missing), self.every_log())):
                    directories[index] = directory
            topic.partitions = [self._open_log(topic, index, log_config, directory=directory)
                                for index, directory in enumerate(directories)]
            self._add(topic)
        self._remove_stray_logs()

    def _remove_stray_logs(self) -> None:
        """Delete partition directories no topic owns: a creation or deletion cut short by a crash
        (Kafka likewise deletes the logs of partitions its metadata no longer has), and the future and
        old folders of a move cut short (the move is not resumed: AlterReplicaLogDirs starts it again)."""
        for directory in self.dirs.online():
            with os.scandir(directory) as entries:  # (a DirEntry knows whether it is a folder)
                stray = [Path(entry.path) for entry in entries if entry.is_dir() and self._stray(entry.name)]
            for entry in stray:
                self._remove_stray(entry)

    def _remove_stray(self, entry: Path) -> None:
        if entry.name.endswith((FUTURE_SUFFIX, _DELETE_SUFFIX)):
            log.warning("removing %s: a partition move cut short", entry)
            shutil.rmtree(entry, ignore_errors=True)
        else:
            if all(f.is_file() and f.name.endswith(_LOG_FILE_SUFFIXES) for f in entry.iterdir()):
                log.warning("removing %s: no topic owns this partition directory", entry)
                shutil.rmtree(entry, ignore_errors=True)

    def _stray(self, name: str) -> bool:
        """Whether ``name`` looks like a partition's folder that no topic owns (or a move's leftover)."""
        if name.endswith((FUTURE_SUFFIX, _DELETE_SUFFIX)):
            return _PARTITION_DIR.fullmatch(name.rsplit(".", 1)[0]) is not None
        match = _PARTITION_DIR.fullmatch(name)
        if match is None:
            return False
        topic = self.topics.get(match[1])
        return topic is None or int(match[2]) >= len(topic.partitions)

    def close(self) -> None:
        """Close every log: those opened since the start (the others have nothing to write) on a few
        threads, whose flushes and snapshot writes wait on the disk in parallel."""
        self._closing = True  # new logs' folders not made yet are left to their first use
        if self._folder_maker is not None:
            self._folder_maker.shutdown(wait=False, cancel_futures=True)
        opened = [log for topic in self.topics.values() for log in topic.partitions if log.opened]
        if len(opened) <= 1:
            for log in opened:
                log.close()
            return
        from concurrent.futures import ThreadPoolExecutor  # (only a broker with logs opened uses threads here)
        with ThreadPoolExecutor(max_workers=min(_CLOSING_THREADS, len(opened)),
                                thread_name_prefix="kafkawire-log-close") as pool:
            list(pool.map(lambda partition_log: partition_log.close(), opened))

    def _save(self) -> None:
        self.metadata_changes += 1
        entries = [{"name": t.name, "id": str(t.topic_id), "partitions": len(t.partitions), "configs": t.configs}
                   for t in self.topics.values()]
        write_json_atomically(self.config.data_dir / _METADATA_FILE, entries, indent=1)

    def _add(self, topic: Topic) -> None:
        self.metadata_cache.changed(topic.name)
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

    def all_logs(self) -> Iterator[tuple[Topic, int, PartitionLog]]:
        for topic in self.topics.values():
            for index, log in enumerate(topic.partitions):
                yield topic, index, log

    def every_log(self) -> Iterator[PartitionLog]:
        for topic in self.topics.values():
            yield from topic.partitions

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
        if replication_factor != -1 and not 1 <= replication_factor <= self.brokers:
            available = "the 1 available broker" if self.brokers == 1 else f"the {self.brokers} available brokers"
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Replication factor {replication_factor} is larger than {available}.")
        merged = dict(self.config.topic_defaults)
        merged.update(configs or {})
        self.log_config(merged)  # validates
        topic = Topic(name, uuid.uuid4(), merged)
        topic.planned_partitions = num_partitions
        topic.replication_factor = replication_factor
        return topic

    @staticmethod
    def check_request_size(topics: list[Topic], explicit_configs: int = 0) -> None:
        """Kafka's controller refuses an operation of more than 10,000 metadata records (a topic, each
        partition, each config) with POLICY_VIOLATION, for the whole request."""
        records = sum(1 + t.planned_partitions for t in topics) + explicit_configs
        if records > MAX_RECORDS_PER_USER_OP:
            raise TopicError(ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")

    async def create(self, planned: list[Topic]) -> list[Topic | TopicError]:
        """Create planned topics (see ``plan``): each is created whole, or refused.

        POLICY_VIOLATION for a topic that would take the broker past ``max.broker.partitions``."""
        results: list[Topic | TopicError] = []
        accepted: list[Topic] = []
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
            results.append(topic)
        try:
            if self.dirs.several:  # placed on the loop, which owns the logs counted
                try:
                    chosen = iter(self.dirs.place(sum(t.planned_partitions for t in accepted), self.every_log()))
                except OSError as error:  # every log directory offline
                    for topic in accepted:
                        self.partition_count -= topic.planned_partitions
                    return [TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"Creating topic {t.name} failed: {error}")
                            if isinstance(t, Topic) and t in accepted else t for t in results]
                self._placement.update((t.name, [next(chosen) for _ in range(t.planned_partitions)])
                                       for t in accepted)
            if accepted:
                await asyncio.to_thread(self._new_logs, accepted)
            for topic in accepted:
                self.partition_count -= topic.planned_partitions  # _add counts what was created
                self._add(topic)
            if accepted:
                self._save()
                self._created([log for topic in accepted for log in topic.partitions])
        finally:
            for topic in accepted:
                self._placement.pop(topic.name, None)
                self._creating.pop(topic.name).set_result(self.topics.get(topic.name))
        return results

    async def wait_for_creation(self, name: str) -> Topic | None:
        """The topic once a creation in progress has ended (None if it failed); at once if none is."""
        pending = self._creating.get(name)
        return await asyncio.shield(pending) if pending is not None else self.topics.get(name)

    def _new_logs(self, topics: list[Topic]) -> None:
        """Each topic's partition logs (on a worker thread: thousands of objects)."""
        for topic in topics:
            log_config = self.log_config(topic.configs)  # once for the topic, not per partition
            placement = self._placement.get(topic.name)
            topic.partitions = [self._open_log(topic, index, log_config,
                                               directory=placement[index] if placement else None)
                                for index in range(topic.planned_partitions)]

    def _created(self, logs: list[PartitionLog]) -> None:
        """New logs, recorded: their folders to make, and with ``freeze_heap``, once a thousand or more
        partitions have been created since the last time, the heap frozen (``gc.freeze``): the logs and
        everything else alive are long-lived, and a full collection that walked them all again would
        hold the loop for a large fraction of a second at ten thousand partitions."""
        self._make_folders(logs)
        self._unfrozen_partitions += len(logs)
        if self.config.freeze_heap and self._unfrozen_partitions >= _FREEZE_AFTER_PARTITIONS:
            self._unfrozen_partitions = 0
            gc.freeze()

    def _make_folders(self, logs: list[PartitionLog]) -> None:
        """Make new logs' folders on a worker thread, after the creation is answered (as Kafka's brokers
        make a partition's log once the controller has committed its topic): a file system that takes a
        millisecond a folder then delays no answer. A log used before makes its own; a stop leaves the
        rest to their first use."""
        if self._folder_maker is None:
            from concurrent.futures import ThreadPoolExecutor  # (only a broker creating topics uses threads here)
            self._folder_maker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafkawire-log-folders")
        for partition_log in logs:
            partition_log.folder_pending = True
        self._folder_maker.submit(self._make_each_folder, logs)

    def _make_each_folder(self, logs: list[PartitionLog]) -> None:
        for partition_log in logs:
            if self._closing:
                return
            try:
                partition_log.make_folder()
            except OSError as error:  # (its first use makes it, or reports the storage error)
                log.warning("making the folder of %s failed: %s", partition_log.name, error)

    async def delete(self, name: str) -> Topic:
        """Forget the topic at once, then remove its logs on a worker thread."""
        topic = self.topics.pop(name, None)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        del self.by_id[topic.topic_id]
        self.metadata_cache.changed(name)
        self.partition_count -= len(topic.partitions)
        self._save()

        for partition_log in topic.partitions:
            partition_log.detach()

        def remove() -> None:
            for partition_log in topic.partitions:
                partition_log.remove_files()  # the local directory and any remote copies
        await asyncio.to_thread(remove)
        return topic

    # ---- configs and partitions, changed under a running broker ------------------------------------
    def alter_topic_configs(self, topic: Topic, overrides: dict[str, str], validate_only: bool = False) -> None:
        """Replace the topic's config overrides, checked, saved and applied to its logs at once."""
        log_config = self.log_config(overrides)
        if topic.configs.get("remote.storage.enable", "false").strip().lower() == "true" \
                and not log_config.remote_storage_enable:
            raise TopicError(ErrorCode.INVALID_CONFIG, "It is invalid to disable remote storage without deleting "
                                                       "remote data.")
        if validate_only:
            return
        topic.configs = dict(overrides)
        self._save()
        self._apply(topic, log_config)

    def alter_broker_configs(self, per_broker: bool, values: dict[str, str], validate_only: bool = False) -> None:
        """Replace the dynamic broker configs (this broker's, or the cluster default), checked against every
        topic, saved in the data directory and applied to every log that has no override of its own."""
        configs = self.configs
        configs.check_broker_update(dict(values))
        before = configs.dynamic_broker, configs.dynamic_default
        if per_broker:
            configs.dynamic_broker = dict(values)
        else:
            configs.dynamic_default = dict(values)
        try:
            planned = [(topic, self.log_config(topic.configs)) for topic in self.topics.values()]
        except TopicError:
            configs.dynamic_broker, configs.dynamic_default = before
            raise
        if validate_only:
            configs.dynamic_broker, configs.dynamic_default = before
            return
        configs.save()
        self.metadata_changes += 1
        for topic, log_config in planned:
            self._apply(topic, log_config)

    def _apply(self, topic: Topic, log_config: LogConfig) -> None:
        """Running logs take the new config: the next append, roll, retention run and cleaning obey it."""
        for partition_log in topic.partitions:
            partition_log.config = log_config
            if log_config.remote_storage_enable and partition_log.remote is None:
                partition_log.remote = self.remote

    async def create_partitions(self, topic: Topic, count: int, validate_only: bool = False) -> None:
        """Grow the topic to ``count`` partitions (CreatePartitions); their logs are opened on a worker thread."""
        current = len(topic.partitions)
        if count < current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        limit = self.config.max_broker_partitions
        if self.partition_count + count - current > limit:
            raise TopicError(ErrorCode.POLICY_VIOLATION,
                             f"Adding {count - current} partition(s) would take the broker past "
                             f"max.broker.partitions ({limit}); it hosts {self.partition_count}.")
        if validate_only:
            return
        try:
            placement = self.dirs.place(count - current, self.every_log()) if self.dirs.several else None
        except OSError as error:  # every log directory offline
            raise TopicError(ErrorCode.KAFKA_STORAGE_ERROR, f"Creating partitions of {topic.name} failed: "
                                                             f"{error}") from None
        log_config = self.log_config(topic.configs)
        self.partition_count += count - current
        added = await asyncio.to_thread(lambda: [
            self._open_log(topic, index, log_config, directory=placement[index - current] if placement else None)
            for index in range(current, count)])
        if self.topics.get(topic.name) is not topic:  # deleted meanwhile
            self.partition_count -= count - current
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        topic.partitions.extend(added)
        self.metadata_cache.changed(topic.name)
        self._save()
        self._created(added)

    def log_config(self, overrides: dict[str, str]) -> LogConfig:
        """The LogConfig of a topic with these overrides (TopicError INVALID_CONFIG when they are bad)."""
        try:
            return self.configs.log_config(overrides)
        except ConfigError as failure:
            raise TopicError(failure.code, failure.message) from None

    def _log_dir(self, name: str, partition: int, directory: str | None = None) -> str:
        return os.path.join(directory if directory is not None else self.config.data_dir, f"{name}-{partition}")

    def _open_log(self, topic: Topic, partition: int, log_config: LogConfig, *,
                  directory: str | None = None) -> PartitionLog:
        """A partition's log in ``directory`` (one of log.dirs; None: the first), opened on first use (a new
        one's folder is made by ``_make_folders`` or then)."""
        from .storage.log import PartitionLog  # (a broker with no topic never loads the storage)
        remote = self.remote if log_config.remote_storage_enable else None
        return PartitionLog(self._log_dir(topic.name, partition, directory), log_config, remote=remote,
                            descriptors=self.descriptors, lazy=True)

    # ---- log directories (JBOD): failures and moves ----------------------------------------------
    def dir_failed(self, partition_log: PartitionLog, error: BaseException | str) -> None:
        """An I/O error on this log: with several log directories, its directory goes offline."""
        self.dirs.fail(partition_log.log_dir, error, self.every_log())

    def check_log_dirs(self) -> None:
        """Take offline the directories found gone or unwritable (several log directories only)."""
        if self.dirs.several:
            for directory in self.dirs.check():
                self.dirs.fail(directory, "not a writable directory", self.every_log())

    def move(self, topic: Topic, index: int, destination: str) -> None:
        """Start moving the partition's log to ``destination`` (AlterReplicaLogDirs; checked by the
        caller): a move elsewhere in progress is cancelled, one to the same place goes on."""
        partition_log = topic.partitions[index]
        current = self.dirs.moves.get(partition_log.name)
        if current is not None:
            if current.destination == destination and not current.cancelled:
                return
            current.cancel()
        if partition_log.log_dir == destination:
            return
        move = ReplicaMove(partition_log, destination)
        self.dirs.moves[partition_log.name] = move

        def swap(moved: PartitionLog, directory: str) -> None:
            previous = str(moved.directory)
            moved.relocate(directory)
            if directory != previous:  # the old folder renamed at once, then deleted off the loop
                gone = f"{previous}.{uuid.uuid4().hex}{_DELETE_SUFFIX}"
                os.replace(previous, gone)
                asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, gone, True)

        async def run() -> None:
            try:
                await move.run(swap)
            finally:
                if self.dirs.moves.get(partition_log.name) is move:
                    del self.dirs.moves[partition_log.name]
        move.task = asyncio.get_running_loop().create_task(run())  # (held: the loop keeps weak references)


def _check_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic name '{name}' is illegal.")
    if len(name) > _MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name is longer than the maximum of {_MAX_NAME_LENGTH} characters.")
    if not _LEGAL_NAME.fullmatch(name):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic name '{name}' contains characters other than ASCII alphanumerics, '.', '_' and '-'.")
