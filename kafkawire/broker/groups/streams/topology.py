"""A streams group's topology and how it is configured against the cluster's topics, as Kafka's
``StreamsTopology`` and ``InternalTopicManager`` (with ``RepartitionTopics``, ``CopartitionedTopicsEnforcer``
and ``ChangelogTopics``) do.

A topology is a list of subtopologies; each reads source topics (the user's) and repartition source
topics (internal), writes repartition sink topics, and keeps its state in changelog topics (internal).
A subtopology has as many tasks as its most partitioned input. Configuring decides the partition count
of every internal topic: a repartition topic without a fixed count takes the largest input of the
subtopologies that write to it, co-partitioned topics must agree (repartition topics among them are
made to), and a changelog topic has one partition per task. The outcome is the tasks per subtopology
and the internal topics still to create, or a status saying why the topology cannot run yet.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["TopicInfo", "Subtopology", "Topology", "Configured", "Status", "configure", "InvalidTopology"]


class Status:
    """StreamsGroupHeartbeatResponse status codes."""
    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4


class InvalidTopology(Exception):
    """STREAMS_INVALID_TOPOLOGY."""


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0  # 0: decided by the coordinator
    replication_factor: int = 0  # 0: the broker's default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[tuple[str, ...], ...] = ()  # topic names, resolved from the request's indices

    def inputs(self) -> tuple[str, ...]:
        return self.source_topics + tuple(t.name for t in self.repartition_source_topics)


@dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def source_topics(self) -> set[str]:
        return {t for s in self.subtopologies for t in s.source_topics}

    def internal_topics(self) -> set[str]:
        return {t.name for s in self.subtopologies for t in s.repartition_source_topics + s.state_changelog_topics}

    def all_topics(self) -> set[str]:
        return (self.source_topics() | self.internal_topics()
                | {t for s in self.subtopologies for t in s.repartition_sink_topics})

    @classmethod
    def from_request(cls, topology) -> Topology:
        """The request's topology, checked as Kafka checks it (raises InvalidTopology)."""
        subtopologies = []
        seen: set[str] = set()
        for sub in topology.subtopologies:
            if sub.subtopology_id in seen:
                raise InvalidTopology(f"Duplicate subtopology id {sub.subtopology_id}.")
            seen.add(sub.subtopology_id)
            changelogs = tuple(_topic_info(t) for t in sub.state_changelog_topics)
            for info in changelogs:
                if info.partitions != 0:
                    raise InvalidTopology(f"Changelog topic {info.name} must have an undefined partition count, "
                                          f"but it is set to {info.partitions}.")
            repartition = tuple(_topic_info(t) for t in sub.repartition_source_topics)
            groups = []
            for group in sub.copartition_groups:
                try:
                    names = [sub.source_topics[i] for i in group.source_topics]
                    names += [sub.repartition_source_topics[i].name for i in group.repartition_source_topics]
                except IndexError:
                    raise InvalidTopology(f"Copartition group of subtopology {sub.subtopology_id} refers to a "
                                          f"topic index that does not exist.") from None
                if group.source_topic_regex:
                    raise InvalidTopology("Regular expressions for source topics are not supported yet.")
                groups.append(tuple(sorted(set(names))))
            if not sub.source_topics and not repartition:
                raise InvalidTopology(f"Subtopology {sub.subtopology_id} has no source topics.")
            subtopologies.append(Subtopology(sub.subtopology_id, tuple(sub.source_topics),
                                             tuple(sub.repartition_sink_topics), changelogs, repartition,
                                             tuple(groups)))
        return cls(topology.epoch, tuple(subtopologies))


def _topic_info(info) -> TopicInfo:
    return TopicInfo(info.name, info.partitions, info.replication_factor,
                     tuple((kv.key, kv.value) for kv in info.topic_configs))


@dataclass(frozen=True)
class Configured:
    """``tasks``: subtopology id -> number of tasks (empty unless the topology can run); ``to_create``:
    internal topics missing, with their partition counts; ``status``: (code, detail) or None."""
    tasks: dict[str, int]
    to_create: tuple[TopicInfo, ...] = ()
    status: tuple[int, str] | None = None


class _NotConfigured(Exception):
    def __init__(self, code: int, detail: str):
        super().__init__(detail)
        self.code = code


def configure(topology: Topology, partition_counts: Mapping[str, int]) -> Configured:
    """``partition_counts``: the partition count of each existing topic."""
    try:
        missing = sorted(topology.source_topics() - set(partition_counts))
        if missing:
            raise _NotConfigured(Status.MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing.")
        decided = _repartition_counts(topology, partition_counts)
        _enforce_copartitioning(topology, partition_counts, decided)

        def count(topic: str) -> int:
            return partition_counts[topic] if topic in partition_counts else decided[topic]
        tasks = {s.subtopology_id: max(count(t) for t in s.inputs()) for s in topology.subtopologies}
        for sub in topology.subtopologies:  # a changelog per task
            for info in sub.state_changelog_topics:
                decided[info.name] = tasks[sub.subtopology_id]
        wanted = {}
        for sub in topology.subtopologies:
            for info in sub.repartition_source_topics + sub.state_changelog_topics:
                wanted[info.name] = TopicInfo(info.name, decided.get(info.name, info.partitions),
                                              info.replication_factor, info.configs)
        to_create = []
        for name, info in sorted(wanted.items()):
            if name not in partition_counts:
                to_create.append(info)
            elif partition_counts[name] != info.partitions:
                raise _NotConfigured(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                     f"Existing topic {name} has different number of partitions: expected "
                                     f"{info.partitions}, found {partition_counts[name]}.")
        if to_create:
            return Configured({}, tuple(to_create), (Status.MISSING_INTERNAL_TOPICS, "Internal topics are missing: "
                                                     + ", ".join(t.name for t in to_create)))
        return Configured(tasks)
    except _NotConfigured as failure:
        return Configured({}, (), (failure.code, str(failure)))


def _repartition_counts(topology: Topology, partition_counts: Mapping[str, int]) -> dict[str, int]:
    """Partition counts of the repartition topics: fixed ones as given, existing ones as they are, the
    others the largest input of the subtopologies writing to them, resolved until nothing changes."""
    decided = {t.name: t.partitions for s in topology.subtopologies for t in s.repartition_source_topics
               if t.partitions > 0}
    flexible = set()
    for topic in (t.name for s in topology.subtopologies for t in s.repartition_source_topics if t.partitions == 0):
        if topic in partition_counts:  # as Kafka, an existing topic keeps its count
            decided.setdefault(topic, partition_counts[topic])
        elif topic not in decided:
            flexible.add(topic)

    def known(topic: str) -> int | None:
        return decided.get(topic, partition_counts.get(topic))
    while flexible:
        progress = False
        for topic in sorted(flexible):
            counts = [known(source) for sub in topology.subtopologies if topic in sub.repartition_sink_topics
                      for source in sub.inputs()]
            if any(c is not None for c in counts):
                decided[topic] = max(c for c in counts if c is not None)
                flexible.discard(topic)
                progress = True
        if not progress:
            raise _NotConfigured(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                 "Failed to compute number of partitions for all repartition topics, make sure all "
                                 "user input topics are created and all Pattern subscriptions match at least one "
                                 "topic in the cluster")
    return decided


def _enforce_copartitioning(topology: Topology, partition_counts: Mapping[str, int], decided: dict[str, int]) -> None:
    """Co-partitioned topics share a partition count: the user's topics must agree, and the repartition
    topics among them take it (or, all being repartition topics, the largest of theirs)."""
    fixed = {t.name for s in topology.subtopologies for t in s.repartition_source_topics if t.partitions > 0}
    internal = {t.name for s in topology.subtopologies for t in s.repartition_source_topics}
    for sub in topology.subtopologies:
        for group in sub.copartition_groups:
            if not group:
                continue
            external = {t: partition_counts[t] for t in group if t not in internal}
            repartition = [t for t in group if t in internal]
            if external:
                counts = set(external.values())
                if len(counts) > 1:
                    shown = ", ".join(f"{t}={c}" for t, c in sorted(external.items()))
                    raise _NotConfigured(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                         f"Following topics are not co-partitioned: [{shown}]")
                wanted = counts.pop()
            elif [t for t in repartition if t in fixed]:
                counts = {decided[t] for t in repartition if t in fixed}
                if len(counts) > 1:
                    shown = ", ".join(f"{t}={decided[t]}" for t in sorted(repartition))
                    raise _NotConfigured(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                         f"Following topics do not have the same number of partitions: [{shown}]")
                wanted = counts.pop()
            else:
                wanted = max(decided[t] for t in repartition)
            for topic in repartition:
                if topic in fixed and decided[topic] != wanted:
                    raise _NotConfigured(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                         f"Number of partitions [{decided[topic]}] of repartition topic [{topic}] "
                                         f"doesn't match number of partitions [{wanted}] of the source topic.")
                decided[topic] = wanted
