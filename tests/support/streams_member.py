"""A sans-IO model of a Kafka Streams client under the streams rebalance protocol (KIP-1071), for tests
at the wire level (no Python client speaks it): ``heartbeat()`` gives the next StreamsGroupHeartbeat,
``received(response)`` takes its answer. The member owns exactly what it was last given, so tasks the
broker takes away are revoked at once and reported gone in the next heartbeat, as Kafka Streams does."""
from __future__ import annotations

from kafkawire import messages as m

Request = m.StreamsGroupHeartbeatRequest


def topology(*subtopologies, epoch: int = 1):
    """``subtopologies``: dicts with id, sources, and optionally sinks, changelogs, repartition
    ({name: partitions, 0 for the coordinator to decide}) and copartition (lists of source indices)."""
    def info(name, partitions=0):
        return Request.TopicInfo(name=name, partitions=partitions, replication_factor=0, topic_configs=[])
    return Request.Topology(epoch=epoch, subtopologies=[Request.Subtopology(
        subtopology_id=s["id"], source_topics=list(s.get("sources", ())), source_topic_regex=[],
        state_changelog_topics=[info(name) for name in s.get("changelogs", ())],
        repartition_sink_topics=list(s.get("sinks", ())),
        repartition_source_topics=[info(name, n) for name, n in s.get("repartition", {}).items()],
        copartition_groups=[Request.CopartitionGroup(source_topics=list(group), source_topic_regex=[],
                                                     repartition_source_topics=[])
                            for group in s.get("copartition", ())]) for s in subtopologies])


class StreamsMember:
    def __init__(self, group_id: str, member_id: str, topology, process_id: str | None = None,
                 endpoint: tuple[str, int] | None = None):
        self.group_id, self.member_id, self.topology = group_id, member_id, topology
        self.process_id = process_id or member_id
        self.endpoint = endpoint
        self.epoch = 0
        self.active: set[tuple[str, int]] = set()
        self.standby: set[tuple[str, int]] = set()
        self.warmup: set[tuple[str, int]] = set()
        self.status: list[tuple[int, str]] = []
        self.endpoint_epoch = -1
        self.endpoints: list = []
        self.revoked: list[set[tuple[str, int]]] = []  # the active tasks each answer took away
        self.offsets: dict[tuple[str, int], int] | None = None  # restored changelog offsets, to report
        self.end_offsets: dict[tuple[str, int], int] | None = None

    def heartbeat(self, leave: bool = False) -> Request:
        joining = self.epoch == 0 and not leave
        return Request(
            group_id=self.group_id, member_id=self.member_id, member_epoch=-1 if leave else self.epoch,
            endpoint_information_epoch=self.endpoint_epoch, rebalance_timeout_ms=30_000 if joining else -1,
            topology=self.topology if joining else None, process_id=self.process_id if joining else None,
            user_endpoint=(Request.Endpoint(host=self.endpoint[0], port=self.endpoint[1])
                           if joining and self.endpoint else None),
            client_tags=[] if joining else None,
            active_tasks=_ids(self.active), standby_tasks=_ids(self.standby), warmup_tasks=_ids(self.warmup),
            task_offsets=_offsets(self.offsets), task_end_offsets=_offsets(self.end_offsets),
            shutdown_application=False)

    def received(self, response) -> None:
        assert response.error_code == 0, (response.error_code, response.error_message)
        self.epoch = response.member_epoch
        self.status = [(s.status_code, s.status_detail) for s in response.status or ()]
        if response.active_tasks is not None:
            new_active = _tasks(response.active_tasks)
            self.revoked.append(self.active - new_active)
            self.active, self.standby = new_active, _tasks(response.standby_tasks)
            self.warmup = _tasks(response.warmup_tasks)
        if response.partitions_by_user_endpoint is not None:
            self.endpoint_epoch = response.endpoint_information_epoch
            self.endpoints = response.partitions_by_user_endpoint


def _ids(tasks) -> list:
    by: dict[str, list[int]] = {}
    for sub, p in sorted(tasks):
        by.setdefault(sub, []).append(p)
    return [Request.TaskIds(subtopology_id=s, partitions=ps) for s, ps in by.items()]


def _offsets(offsets) -> list | None:
    if offsets is None:
        return None
    return [Request.TaskOffset(subtopology_id=s, partition=p, offset=o) for (s, p), o in sorted(offsets.items())]


def _tasks(entries) -> set[tuple[str, int]]:
    return {(e.subtopology_id, p) for e in entries or () for p in e.partitions}
