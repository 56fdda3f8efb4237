"""The client side of KIP-227 incremental fetch sessions: one FetchSessionHandler per broker.

A session starts with a full request (epoch 0) naming every partition; if the broker answers with a
session id, later requests are incremental (epochs 1, 2, ... wrapping to 1 after 2**31 - 1) and carry
only what changed: partitions that are new or whose fetch parameters changed (``to_send``), partitions
no longer wanted (``to_forget``), and on Fetch v13+ partitions whose topic id changed (``to_replace``:
forgotten under the old id, sent under the new one). The broker still reads every partition of the
session, in its own order, and answers only for partitions with news.

A partition left out of a round (it has buffered records, is paused, or moved to another leader) is
forgotten, and re-added at the end of the session when it is wanted again.

Errors reset to a full request: FETCH_SESSION_ID_NOT_FOUND starts over without a session id; any other
top-level error (INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR, ...), a response that does
not match the session, or a failed request closes the session by naming it in a full request.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple
from uuid import UUID

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import FetchRequest, FetchResponse

from ..topic_partition import TopicPartition

__all__ = ["PartitionFetchData", "FetchRequestData", "FetchSessionHandler", "ZERO_UUID",
           "INITIAL_EPOCH", "FINAL_EPOCH", "INVALID_SESSION_ID", "next_epoch"]

ZERO_UUID = UUID(int=0)
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full request that may create a session
FINAL_EPOCH = -1  # a full request that wants no session
_MAX_EPOCH = 0x7FFFFFFF
_FIRST_SESSION_VERSION = 7
_FIRST_TOPIC_ID_VERSION = 13
_KIP_1178_VERSION = 19  # RemotePartitionMaxBytes: kafkawire's Fetch v19 (upstream's v18 is KIP-1166's)


class PartitionFetchData(NamedTuple):
    """What a fetch request says about one partition; a change in any field re-sends the partition."""

    topic_id: UUID
    fetch_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    remote_partition_max_bytes: int
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass
class FetchRequestData:
    """One fetch request to one broker, as the session handler built it."""

    to_send: dict[TopicPartition, PartitionFetchData]  # in request order
    to_forget: list[tuple[TopicPartition, UUID]]
    to_replace: list[tuple[TopicPartition, UUID]]
    session_partitions: dict[TopicPartition, PartitionFetchData]  # the session after this request
    session_id: int
    epoch: int
    version: int
    topic_names: dict[UUID, str] = field(default_factory=dict)  # for responses that name topics by id

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    @property
    def uses_topic_ids(self) -> bool:
        return self.version >= _FIRST_TOPIC_ID_VERSION

    def forgotten(self) -> list[tuple[TopicPartition, UUID]]:
        """The ForgottenTopicsData entries: removed partitions, plus replaced ones on Fetch v13+."""
        if self.uses_topic_ids:
            return self.to_forget + self.to_replace
        return list(self.to_forget)

    def topic_of(self, topic: FetchResponse.FetchableTopicResponse) -> str | None:
        """The name of a response's topic (by name before v13, by id from v13), None if unknown."""
        if self.uses_topic_ids:
            return self.topic_names.get(topic.topic_id)
        return topic.topic

    def to_request(self, *, max_wait_ms: int, min_bytes: int, max_bytes: int, isolation_level: int = 0,
                   rack_id: str = "") -> FetchRequest:
        """The FetchRequest message for ``self.version``; partitions keep their order, consecutive
        partitions of one topic share a FetchTopic entry (as Kafka's builder does)."""
        version = self.version
        ids = self.uses_topic_ids
        topics: list[FetchRequest.FetchTopic] = []
        partitions: list[FetchRequest.FetchPartition] = []  # the current topic's
        current_key = None
        for tp, data in self.to_send.items():
            key = data.topic_id if ids else tp.topic
            if not topics or key != current_key:
                partitions = []
                topics.append(FetchRequest.FetchTopic(topic="" if ids else tp.topic,
                                                      topic_id=data.topic_id if ids else ZERO_UUID,
                                                      partitions=partitions))
                current_key = key
            partitions.append(FetchRequest.FetchPartition(
                partition=tp.partition,
                current_leader_epoch=data.current_leader_epoch if version >= 9 else -1,
                fetch_offset=data.fetch_offset,
                last_fetched_epoch=data.last_fetched_epoch if version >= 12 else -1,
                log_start_offset=data.log_start_offset,
                partition_max_bytes=data.partition_max_bytes,
                remote_partition_max_bytes=data.remote_partition_max_bytes if version >= _KIP_1178_VERSION else 0))
        forgotten: dict[object, FetchRequest.ForgottenTopic] = {}
        forgotten_partitions: dict[object, list[int]] = {}
        for tp, topic_id in self.forgotten():
            key = topic_id if ids else tp.topic
            if key not in forgotten:
                forgotten_partitions[key] = []
                forgotten[key] = FetchRequest.ForgottenTopic(
                    topic="" if ids else tp.topic, topic_id=topic_id if ids else ZERO_UUID,
                    partitions=forgotten_partitions[key])
            forgotten_partitions[key].append(tp.partition)
        sessions = version >= _FIRST_SESSION_VERSION
        return FetchRequest(
            max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation_level,
            session_id=self.session_id if sessions else INVALID_SESSION_ID,
            session_epoch=self.epoch if sessions else FINAL_EPOCH,
            topics=topics, forgotten_topics_data=list(forgotten.values()),
            rack_id=rack_id if version >= 11 else "")


class FetchSessionHandler:
    """The fetch session with one broker: builds each request's data and learns from each response.

    Call ``build`` once per request and then exactly one of ``handle_response`` or ``handle_error``
    (one request in flight at a time, as the fetcher guarantees)."""

    def __init__(self, node_id: int):
        self.node_id = node_id
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH  # the next request's epoch
        self._session: dict[TopicPartition, PartitionFetchData] = {}  # in session order
        self._session_uses_ids = False

    @property
    def session_partitions(self) -> dict[TopicPartition, PartitionFetchData]:
        return dict(self._session)

    def build(self, wanted: Mapping[TopicPartition, PartitionFetchData], max_version: int) -> FetchRequestData:
        """The next request for ``wanted`` (in the fetcher's order). Its version is ``max_version``, or
        at most 12 if a partition has no topic id (topic ids replace names from Fetch v13)."""
        uses_ids = max_version >= _FIRST_TOPIC_ID_VERSION and all(
            data.topic_id != ZERO_UUID for data in wanted.values())
        version = max_version if uses_ids or max_version < _FIRST_TOPIC_ID_VERSION else _FIRST_TOPIC_ID_VERSION - 1
        if self.epoch not in (INITIAL_EPOCH, FINAL_EPOCH) and uses_ids != self._session_uses_ids:
            self.epoch = INITIAL_EPOCH  # names and ids cannot mix in one session: start a new one
        if self.epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            self._session = dict(wanted)
            self._session_uses_ids = uses_ids
            return self._data(dict(wanted), [], [], version)
        following = dict(wanted)
        removed: list[tuple[TopicPartition, UUID]] = []
        replaced: list[tuple[TopicPartition, UUID]] = []
        for tp, previous in list(self._session.items()):
            data = following.pop(tp, None)
            if data is None:
                del self._session[tp]
                removed.append((tp, previous.topic_id))
            elif previous.topic_id != data.topic_id and ZERO_UUID not in (previous.topic_id, data.topic_id):
                following[tp] = data  # re-inserted: changed partitions go after the new ones
                self._session[tp] = data
                replaced.append((tp, previous.topic_id))
            elif previous != data:
                following[tp] = data
                self._session[tp] = data
        for tp, data in following.items():
            if tp in self._session:
                break  # the rest of ``following`` are the changed partitions already in the session
            self._session[tp] = data
        return self._data(following, removed, replaced, version)

    def _data(self, to_send, to_forget, to_replace, version) -> FetchRequestData:
        names = {data.topic_id: tp.topic for tp, data in self._session.items() if data.topic_id != ZERO_UUID}
        for tp, topic_id in to_forget + to_replace:
            names.setdefault(topic_id, tp.topic)
        return FetchRequestData(to_send, to_forget, to_replace, dict(self._session), self.session_id, self.epoch,
                                version, names)

    def handle_response(self, data: FetchRequestData, response: FetchResponse) -> bool:
        """Advance the session on ``response`` to the request built as ``data``. False means the
        response must be ignored (a top-level error, or partitions that do not match the session)."""
        error = response.error_code
        if error != ErrorCode.NONE:
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = INVALID_SESSION_ID
                self.epoch = INITIAL_EPOCH
            else:
                self._close_existing()
            return False
        returned = []
        for topic in response.responses:
            name = data.topic_of(topic)
            for partition in topic.partitions:
                returned.append(TopicPartition(name, partition.partition_index) if name is not None else None)
        session = data.session_partitions
        unknown = [tp for tp in returned if tp is None or tp not in session]
        if data.is_full:
            omitted = set(session).difference(returned)
            if unknown or omitted:
                self._close_existing()
                return False
            if response.session_id == INVALID_SESSION_ID:
                self.session_id = INVALID_SESSION_ID
                self.epoch = INITIAL_EPOCH
            else:
                self.session_id = response.session_id
                self.epoch = 1
            return True
        if unknown:
            self._close_existing()
            return False
        if response.session_id == INVALID_SESSION_ID:  # the broker closed the session
            self.session_id = INVALID_SESSION_ID
            self.epoch = INITIAL_EPOCH
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The request failed (disconnect, timeout): its outcome is unknown, so start a fresh session."""
        self._close_existing()

    def _close_existing(self) -> None:
        # a full request naming the session closes it on the broker (and may open a new one)
        self.epoch = INITIAL_EPOCH

    def __repr__(self) -> str:
        return (f"FetchSessionHandler(node={self.node_id}, session_id={self.session_id}, epoch={self.epoch}, "
                f"partitions={len(self._session)})")
