"""ShareFetcher: what a share consumer fetches and acknowledges, per broker, and what ``poll`` hands out
(sans I/O), as Kafka's ``ShareConsumeRequestManager`` and ``ShareFetchCollector`` do it.

* Each broker leading assigned partitions gets one request at a time (its share session's epochs must
  follow each other): a ShareFetch for those partitions (MaxRecords and BatchSize ``max.poll.records``)
  once none of its records wait in the buffer and those handed out are acknowledged (implicit mode:
  by the next poll), carrying the acknowledgements made since (they wait for it). Each acquired
  record holds one of the share partition's record locks (``group.share.partition.max.record.locks``)
  until it is acknowledged, so a fetch sent earlier finds the window taken by this member's own records
  and comes back with part of it, a round trip for fewer records. ``commit`` sends a ShareAcknowledge
  to each broker with acknowledgements at once, and so do partitions no longer fetched; RENEWs go in a
  ShareAcknowledge with IsRenewAck (a renewing ShareFetch fetches nothing).
* ``poll`` first settles the last poll's records: implicit mode ACCEPTs them all; explicit mode insists
  that each was acknowledged (``acknowledge``) and raises RuntimeError otherwise.
* Every answered acknowledgement becomes a ``completed`` entry (offsets per partition, and the error),
  for the acknowledgement commit callback, which the consumer calls from its own calls as Kafka does.
* Closing: the last poll's records (implicit mode) are ACCEPTed and records fetched but never handed
  out are RELEASEd, in a final ShareAcknowledge (epoch -1) to each broker with a session.
"""
from __future__ import annotations

import itertools
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Union

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import (
    ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
)

from ...errors import KafkaConnectionError, error_for_code
from ..cluster_metadata import METADATA_REFRESH_ERRORS
from ..consumer.memory import Lease, MemoryPool
from ..consumer.record import record_offset
from ..group.protocol import error_name
from ..topic_partition import TopicPartition
from .acknowledgements import Acknowledgements
from .completed_fetch import ShareCompletedFetch
from .config import ShareConsumerConfig
from .record import AcknowledgeType, ShareConsumerRecord
from .session import FINAL_EPOCH, SESSION_ERRORS, ShareSession

__all__ = ["ShareFetcher", "ShareRequest", "Commit", "AcknowledgementResult", "RENEW_VERSION"]

log = logging.getLogger(__name__)

RENEW_VERSION = 2  # ShareFetch / ShareAcknowledge: IsRenewAck and ShareAcquireMode
_TYPES = {int(kind): kind for kind in AcknowledgeType}
_AUTHORIZATION_ERRORS = frozenset({ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED})

# (offsets acknowledged per partition, None or the error): what the acknowledgement commit callback gets
AcknowledgementResult = tuple[dict[TopicPartition, set[int]], Union[Exception, None]]


@dataclass
class Commit:
    """One ``commit``: the brokers still to answer, and each partition's outcome (None: acknowledged)."""

    commit_id: int
    waiting: set[int] = field(default_factory=set)
    results: dict[TopicPartition, Exception | None] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return not self.waiting


@dataclass
class ShareRequest:
    """A request for broker ``node``; hand it back with its answer. ``wanted`` is the session's partitions
    once a ShareFetch is answered; ``acknowledgements`` what the request carries."""

    node: int
    body: ShareFetchRequest | ShareAcknowledgeRequest
    acknowledgements: dict[TopicPartition, Acknowledgements]
    wanted: dict[TopicPartition, uuid.UUID] = field(default_factory=dict)
    commit: Commit | None = None

    @property
    def is_fetch(self) -> bool:
        return isinstance(self.body, ShareFetchRequest)

    @property
    def final(self) -> bool:
        return self.body.share_session_epoch == FINAL_EPOCH


class ShareFetcher:
    """See the module docstring. ``member_id`` is the share group member's."""

    def __init__(self, config: ShareConsumerConfig, member_id: str, pool: MemoryPool | None = None):
        self.config = config
        self._explicit = config.explicit
        self.group_id = config.group_id or ""
        self.member_id = member_id
        self.pool = pool if pool is not None else MemoryPool(config.buffer_memory)
        self.renew_supported = True  # cleared by the driver when a broker's ShareAcknowledge is below v2
        self.metadata_refresh_needed = False
        self.completed: list[AcknowledgementResult] = []
        # whether ``completed`` gets the acknowledgements that succeeded too (for a callback), not only failures
        self.report_acknowledged = True
        self.errors: list[Exception] = []  # raised by the next poll
        self._topic_ids: dict[str, uuid.UUID] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._assigned_ids: dict[uuid.UUID, tuple[int, ...]] = {}
        self._assignment: dict[TopicPartition, uuid.UUID] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._sessions: dict[int, ShareSession] = {}
        self._in_flight: set[int] = set()
        self._buffered: deque[tuple[int, ShareCompletedFetch]] = deque()  # (node, fetch), in arrival order
        self._delivered: dict[TopicPartition, dict[int, bool]] = {}  # explicit: last poll's offset -> renewed
        self._handed_out: dict[TopicPartition, list[tuple[int, int]]] = {}  # implicit: last poll's offset runs
        self._pending: dict[TopicPartition, Acknowledgements] = {}
        self._commits: dict[int, Commit] = {}  # by node: the commit its next ShareAcknowledge serves
        self._commit_ids = itertools.count()
        self.closed = False

    # ---- assignment and metadata --------------------------------------------------------------------
    def set_topic_ids(self, topic_ids: Mapping[str, uuid.UUID]) -> None:
        self._topic_ids = dict(topic_ids)
        self._topic_names = {topic_id: name for name, topic_id in topic_ids.items()}
        self._resolve_assignment()

    def set_assignment(self, assignment: Mapping[uuid.UUID, tuple[int, ...]]) -> None:
        """The member's assignment (topic id -> partitions). Records of partitions taken away that were
        fetched but not handed out are RELEASEd."""
        self._assigned_ids = dict(assignment)
        self._resolve_assignment()

    def _resolve_assignment(self) -> None:
        assignment = {TopicPartition(self._topic_names[topic_id], p): topic_id
                      for topic_id, partitions in self._assigned_ids.items() if topic_id in self._topic_names
                      for p in partitions}
        if any(topic_id not in self._topic_names for topic_id in self._assigned_ids):
            self.metadata_refresh_needed = True
        gone = set(self._assignment) - set(assignment)
        self._assignment = assignment
        if gone:
            self._abandon(lambda tp: tp in gone)

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def update_leaders(self, leaders: Mapping[TopicPartition, int | None]) -> None:
        self._leaders = {tp: node for tp, node in leaders.items() if node is not None}
        if any(tp not in self._leaders for tp in self._assignment):
            self.metadata_refresh_needed = True

    def pending_partitions(self) -> set[TopicPartition]:
        """Partitions with acknowledgements still to send (assigned or not)."""
        return {tp for tp, acks in self._pending.items() if acks}

    def topics(self) -> set[str]:
        return {tp.topic for tp in self._assignment} | {tp.topic for tp in self._pending}

    # ---- the application's side -----------------------------------------------------------------------
    def poll(self, max_records: int) -> list[ShareConsumerRecord]:
        """Settle the last poll's records, then hand out up to ``max_records`` buffered ones."""
        if self.errors:
            raise self.errors.pop(0)
        self._settle()
        out: list[ShareConsumerRecord] = []
        while self._buffered and len(out) < max_records:
            _, fetch = self._buffered[0]
            if fetch.topic_partition not in self._assignment:
                self._drop_first()
                continue
            taken = fetch.take(max_records - len(out))
            if taken:
                out += taken
                self._hand_out(fetch.topic_partition, taken)
            if fetch.drained:
                self._drop_first()
                if fetch.failure is not None:
                    if out:
                        self.errors.append(fetch.failure)
                        break
                    raise fetch.failure
        return out

    def _hand_out(self, tp: TopicPartition, taken: list[ShareConsumerRecord]) -> None:
        """Note the records handed out, to be acknowledged: each offset in explicit mode, runs of
        consecutive offsets in implicit mode (all ACCEPTed together by the next poll)."""
        if self._explicit:
            self._delivered.setdefault(tp, {}).update(dict.fromkeys(map(record_offset, taken), False))
            return
        runs = self._handed_out.setdefault(tp, [])
        first = taken[0].offset
        if taken[-1].offset - first + 1 == len(taken):  # no gap: the usual case
            spans = [(first, taken[-1].offset)]
        else:
            spans = []
            for offset in map(record_offset, taken):
                if spans and spans[-1][1] + 1 == offset:
                    spans[-1] = (spans[-1][0], offset)
                else:
                    spans.append((offset, offset))
        if runs and runs[-1][1] + 1 == spans[0][0]:
            runs[-1] = (runs[-1][0], spans.pop(0)[1])
        runs += spans

    def _drop_first(self) -> None:
        _, fetch = self._buffered.popleft()
        fetch.release()
        if fetch.automatic:
            self._pending_for(fetch.topic_partition).extend(fetch.automatic)

    def _settle(self) -> None:
        """Implicit mode: ACCEPT what the last poll handed out. Explicit: every record must be acknowledged."""
        if self._explicit:
            for tp, offsets in self._delivered.items():
                waiting = [offset for offset, renewed in offsets.items() if not renewed]
                if waiting:
                    raise RuntimeError(f"explicit acknowledgement mode: {len(waiting)} records of {tp} from the "
                                       f"last poll are not acknowledged (offset {waiting[0]} first)")
            return
        for tp, runs in self._handed_out.items():
            acks = self._pending_for(tp)
            for first, last in runs:
                acks.add_range(first, last, AcknowledgeType.ACCEPT)
        self._handed_out.clear()

    def acknowledge(self, tp: TopicPartition, offset: int, kind: AcknowledgeType | int) -> None:
        """Acknowledge one record of the last poll (explicit mode). RENEW keeps it acquired, still to be
        acknowledged; the others end it."""
        kind = _TYPES.get(kind) or AcknowledgeType(kind)  # (a lookup: the enum's call costs more than the rest)
        if not self._explicit:
            raise RuntimeError("acknowledge() needs share.acknowledgement.mode=explicit")
        offsets = self._delivered.get(tp)
        if offsets is None or offset not in offsets:
            raise RuntimeError(f"record {tp}@{offset} is not waiting for an acknowledgement")
        if kind == AcknowledgeType.RENEW:
            if not self.renew_supported:
                raise RuntimeError("the broker does not support RENEW (ShareAcknowledge v2, KIP-1222)")
            offsets[offset] = True
        else:
            del offsets[offset]
            if not offsets:
                del self._delivered[tp]
        self._pending_for(tp).add(offset, kind)

    def commit(self) -> Commit:
        """Send every acknowledgement made so far (implicit mode: the last poll's records ACCEPTed)."""
        if not self.config.explicit:
            self._settle()
        commit = Commit(next(self._commit_ids))
        for tp in self._pending:
            node = self._leaders.get(tp)
            if node is None:
                self.metadata_refresh_needed = True
                continue
            commit.waiting.add(node)
        for node in commit.waiting:
            self._commits[node] = commit  # a later commit takes over the node's acknowledgements
        return commit

    def _pending_for(self, tp: TopicPartition) -> Acknowledgements:
        acks = self._pending.get(tp)
        if acks is None:
            acks = self._pending[tp] = Acknowledgements()
        return acks

    def _abandon(self, which: Callable[[TopicPartition], bool]) -> None:
        """RELEASE the records fetched but not handed out of the partitions ``which`` picks."""
        kept: deque[tuple[int, ShareCompletedFetch]] = deque()
        for node, fetch in self._buffered:
            if which(fetch.topic_partition):
                acks = self._pending_for(fetch.topic_partition)
                acks.extend(fetch.automatic)
                for first, last in fetch.undelivered():
                    acks.add_range(first, last, AcknowledgeType.RELEASE)
                fetch.release()
            else:
                kept.append((node, fetch))
        self._buffered = kept

    # ---- requests ----------------------------------------------------------------------------------------
    def prepare_requests(self) -> list[ShareRequest]:
        """The requests to send now: at most one per broker, none to a broker with one in flight."""
        if self.closed:
            return []
        nodes = {self._leaders[tp] for tp in self._assignment if tp in self._leaders}
        nodes |= {self._leaders[tp] for tp in self._pending if tp in self._leaders} | set(self._commits)
        nodes -= self._in_flight
        if not nodes:
            return []
        busy = self._busy_nodes()
        requests = []
        for node in sorted(nodes):
            wanted = {tp: topic_id for tp, topic_id in self._assignment.items() if self._leaders.get(tp) == node}
            if wanted and node in busy and node not in self._commits and not self._renewing_at(node):
                continue  # the usual poll while records are handed out: the acknowledgements wait for the fetch
            session = self._sessions.setdefault(node, ShareSession(node))
            acks = self._take_acks(node, session)
            renewing = any(a.has(AcknowledgeType.RENEW) for a in acks.values())
            if node in self._commits and not acks and not self._pending_at(node):  # nothing left to send there
                self._finish_commit(node, self._commits[node])
            # acknowledgements wait for the next fetch (one round trip for both) unless a commit or a
            # renewal wants them now, or no fetch goes to that broker any more
            if session.is_open and (node in self._commits or renewing or (acks and not wanted)):
                request = self._acknowledge_request(node, session.epoch, acks, renewing)
                request.commit = self._commits.pop(node, None)
            elif wanted and node not in busy:
                fetched = {tp: a for tp, a in acks.items() if tp in wanted}
                self._restore({tp: a for tp, a in acks.items() if tp not in wanted})
                request = self._fetch_request(node, session, wanted, fetched)
            else:
                self._restore(acks)
                commit = self._commits.get(node)
                if commit is not None and not session.is_open and not wanted:  # no session to send them in
                    self._finish_commit(node, commit)
                continue
            self._in_flight.add(node)
            requests.append(request)
        return requests

    def _busy_nodes(self) -> set[int]:
        """Brokers not to fetch from yet: records of theirs wait in the buffer, or records handed out are
        still to be acknowledged (RENEWed ones aside: they hold their locks on purpose)."""
        busy = {node for node, fetch in self._buffered if fetch.remaining}
        busy |= {self._leaders[tp] for tp in self._handed_out if tp in self._leaders}
        for tp, offsets in self._delivered.items():
            node = self._leaders.get(tp)
            if node is not None and not all(offsets.values()):
                busy.add(node)
        return busy

    def _renewing_at(self, node: int) -> bool:
        """Whether RENEWs of ``node``'s partitions wait to be sent."""
        return any(acks.has(AcknowledgeType.RENEW) for tp, acks in self._pending.items()
                   if self._leaders.get(tp) == node)

    def _pending_at(self, node: int) -> bool:
        return any(acks and self._leaders.get(tp) == node for tp, acks in self._pending.items())

    def _take_acks(self, node: int, session: ShareSession) -> dict[TopicPartition, Acknowledgements]:
        """The pending acknowledgements of ``node``'s partitions (none before its session is open)."""
        if not session.is_open:
            return {}
        taken = {tp: acks for tp, acks in self._pending.items() if self._leaders.get(tp) == node and acks}
        for tp in taken:
            del self._pending[tp]
        return taken

    def _restore(self, acks: Mapping[TopicPartition, Acknowledgements]) -> None:
        """Put acknowledgements back (not sent after all, or to send again): later ones win."""
        for tp, taken in acks.items():
            self._pending_for(tp).merge(taken)

    def _fetch_request(self, node: int, session: ShareSession, wanted: dict[TopicPartition, uuid.UUID],
                       acks: dict[TopicPartition, Acknowledgements]) -> ShareRequest:
        Request = ShareFetchRequest
        added, forgotten = session.changes(wanted)
        named = dict(added)
        named.update((tp, wanted[tp]) for tp in acks)
        config = self.config
        body = Request(
            group_id=self.group_id, member_id=self.member_id, share_session_epoch=session.epoch,
            max_wait_ms=config.fetch_max_wait_ms, min_bytes=config.fetch_min_bytes, max_bytes=config.fetch_max_bytes,
            max_records=config.max_poll_records, batch_size=config.max_poll_records,
            share_acquire_mode=config.acquire_mode_code,
            topics=[Request.FetchTopic(topic_id=topic_id, partitions=[
                Request.FetchPartition(partition_index=p, acknowledgement_batches=[
                    Request.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=t)
                    for f, l, t in (acks[tp].batches() if tp in acks else ())])
                for p, tp in parts]) for topic_id, parts in _by_topic(named)],
            forgotten_topics_data=[Request.ForgottenTopic(topic_id=topic_id, partitions=[p for p, _ in parts])
                                   for topic_id, parts in _by_topic(forgotten)])
        return ShareRequest(node, body, acks, wanted)

    def _acknowledge_request(self, node: int, epoch: int, acks: dict[TopicPartition, Acknowledgements],
                             renewing: bool = False) -> ShareRequest:
        Request = ShareAcknowledgeRequest
        body = Request(group_id=self.group_id, member_id=self.member_id, share_session_epoch=epoch,
                       is_renew_ack=renewing, topics=[Request.AcknowledgeTopic(topic_id=topic_id, partitions=[
                           Request.AcknowledgePartition(partition_index=p, acknowledgement_batches=[
                               Request.AcknowledgementBatch(first_offset=f, last_offset=l, acknowledge_types=t)
                               for f, l, t in acks[tp].batches()])
                           for p, tp in parts]) for topic_id, parts in _by_topic(
                               {tp: self._topic_id(tp) for tp in acks})])
        return ShareRequest(node, body, acks)

    def _topic_id(self, tp: TopicPartition) -> uuid.UUID:
        return self._assignment.get(tp) or self._topic_ids[tp.topic]

    # ---- answers -----------------------------------------------------------------------------------------
    def handle_fetch_response(self, request: ShareRequest, response: ShareFetchResponse,
                              lease: Lease | None = None) -> None:
        node = request.node
        self._in_flight.discard(node)
        session = self._sessions.setdefault(node, ShareSession(node))
        if not self._top_level(request, session, response.error_code, response.error_message):
            if lease is not None:
                lease.release()
            return
        session.fetched(request.wanted)
        results: dict[TopicPartition, Exception | None] = dict.fromkeys(request.acknowledgements)
        for topic in response.responses:
            name = self._topic_names.get(topic.topic_id)
            for p in topic.partitions:
                if name is None:
                    continue
                tp = TopicPartition(name, p.partition_index)
                if tp in results and p.acknowledge_error_code:
                    results[tp] = error_for_code(p.acknowledge_error_code, p.acknowledge_error_message or "")
                if p.error_code:
                    self._partition_error(tp, p.error_code)
                if p.acquired_records and tp in self._assignment:
                    records = p.records or b""
                    share = lease.split(min(len(records), lease.size)) if lease is not None else Lease(self.pool, 0)
                    acquired = [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records]
                    self._buffered.append((node, ShareCompletedFetch(tp, records, acquired, share,
                                                                     self.config.check_crcs)))
                elif p.acquired_records:  # taken away meanwhile: give them back
                    for a in p.acquired_records:
                        self._pending_for(tp).add_range(a.first_offset, a.last_offset, AcknowledgeType.RELEASE)
        if lease is not None:
            lease.release()
        self._complete(request, results)

    def handle_acknowledge_response(self, request: ShareRequest, response: ShareAcknowledgeResponse) -> None:
        node = request.node
        self._in_flight.discard(node)
        session = self._sessions.setdefault(node, ShareSession(node))
        if not self._top_level(request, session, response.error_code, response.error_message):
            return
        if request.final:
            session.reset()
        else:
            session.advance()
        results: dict[TopicPartition, Exception | None] = dict.fromkeys(request.acknowledgements)
        for topic in response.responses:
            name = self._topic_names.get(topic.topic_id)
            for p in topic.partitions:
                tp = TopicPartition(name, p.partition_index) if name is not None else None
                if tp in results and p.error_code:
                    results[tp] = error_for_code(p.error_code, p.error_message or "")
                    if p.error_code in METADATA_REFRESH_ERRORS:
                        self.metadata_refresh_needed = True
        self._complete(request, results)

    def handle_failure(self, request: ShareRequest, error: Exception) -> None:
        """No answer (the connection failed, or the request timed out): the session starts afresh, and the
        acknowledgements it carried are reported failed (the broker may have applied them or not)."""
        self._in_flight.discard(request.node)
        self._sessions.setdefault(request.node, ShareSession(request.node)).reset()
        self.metadata_refresh_needed = True
        self._complete(request, dict.fromkeys(request.acknowledgements, error))

    def _top_level(self, request: ShareRequest, session: ShareSession, code: int, message: str | None) -> bool:
        """Whether a response's top-level error code lets its parts be read."""
        if code == ErrorCode.NONE:
            return True
        session.reset()
        if code in SESSION_ERRORS and not request.final:  # refused as a whole: send them again
            log.debug("share session with node %d: %s, opening a new one", request.node, error_name(code))
            self._restore(request.acknowledgements)
            if request.commit is not None:
                self._commits.setdefault(request.node, request.commit)
            return False
        error = error_for_code(code, message or "")
        if code in _AUTHORIZATION_ERRORS:
            self.errors.append(error)
        self._complete(request, dict.fromkeys(request.acknowledgements, error))
        return False

    def _partition_error(self, tp: TopicPartition, code: int) -> None:
        if code in METADATA_REFRESH_ERRORS:
            self.metadata_refresh_needed = True
        elif code in _AUTHORIZATION_ERRORS:
            self.errors.append(error_for_code(code, f"share fetch of {tp}"))
        else:
            log.debug("share fetch of %s: %s", tp, error_name(code))

    def _complete(self, request: ShareRequest, results: Mapping[TopicPartition, Exception | None]) -> None:
        for tp, error in results.items():
            if error is None and not self.report_acknowledged:
                continue  # nobody to tell: the offsets need not be listed one by one
            offsets = request.acknowledgements[tp].acknowledged_offsets()
            if offsets:
                self.completed.append(({tp: offsets}, error))
        if request.commit is not None:
            request.commit.results.update(results)
            self._finish_commit(request.node, request.commit)

    def _finish_commit(self, node: int, commit: Commit) -> None:
        commit.waiting.discard(node)
        if self._commits.get(node) is commit:
            del self._commits[node]

    # ---- closing -------------------------------------------------------------------------------------------
    @property
    def in_flight(self) -> bool:
        return bool(self._in_flight)

    def close_requests(self) -> list[ShareRequest]:
        """The final acknowledgements (epoch -1), one per broker with a session; nothing is sent after."""
        if not self.config.explicit:
            self._settle()
        self._abandon(lambda tp: True)
        self.closed = True
        requests = []
        for node, session in self._sessions.items():
            if not session.is_open:
                continue
            acks = self._take_acks(node, session)
            requests.append(self._acknowledge_request(node, FINAL_EPOCH, acks))
            self._in_flight.add(node)
        return requests

    def release_all(self) -> None:
        """Give every buffered response's bytes back to the pool (the consumer closed)."""
        for _, fetch in self._buffered:
            fetch.release()
        self._buffered.clear()


def _by_topic(partitions: Mapping[TopicPartition, uuid.UUID]) -> Iterable[tuple[uuid.UUID, list[tuple[int, TopicPartition]]]]:
    topics: dict[uuid.UUID, list[tuple[int, TopicPartition]]] = {}
    for tp, topic_id in partitions.items():
        topics.setdefault(topic_id, []).append((tp.partition, tp))
    return topics.items()
