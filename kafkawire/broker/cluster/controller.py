"""The controller of an in-process cluster: which brokers are live, and for each partition its replicas,
in-sync replicas, leader and leader epoch; where each group and transactional id is coordinated.

Partitions are placed when first asked about (a topic's partitions at once, as a controller assigns
them at creation): replicas on ``replication.factor`` brokers, leaders spread round-robin from the
topic's first partition on. The nodes share one copy of each log (the data would be the same on every
replica), so moving a leader moves no data: it bumps the leader epoch, here and in the log, whose next
batches carry it, as a new leader's do.
"""
from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from ...error_codes import ErrorCode
from ..node_view import NodeAddress, PartitionInfo, QuorumVoter
from ..topics import Topic, TopicManager
from .reassignments import Reassignments

__all__ = ["Controller", "PartitionState"]


@dataclass
class PartitionState:
    replicas: list[int]
    isr: list[int]
    leader: int  # -1: every replica offline
    leader_epoch: int
    # (epoch, start offset) of each leader epoch, oldest first: the log's leader-epoch-checkpoint
    epochs: list[tuple[int, int]] = field(default_factory=list)
    # an ongoing reassignment's replicas joining and leaving (``replicas`` holds both meanwhile)
    adding: list[int] = field(default_factory=list)
    removing: list[int] = field(default_factory=list)


class Controller:
    def __init__(self, node_ids: list[int], topics: TopicManager, *, min_insync_replicas: int = 1,
                 default_replication_factor: int = 1):
        self.nodes = list(node_ids)
        self.live = set(node_ids)
        self.topics = topics
        self.min_insync_replicas = min_insync_replicas
        self.default_replication_factor = default_replication_factor
        self._partitions: dict[tuple[object, int], PartitionState] = {}  # (topic id, index) -> state
        self._placed_topics: dict[object, int] = {}  # topic id -> order of placement
        # the metadata quorum: every node is a voter (combined mode); the epoch goes up with each new
        # controller, and a stopped voter is known by where it was when it stopped: node -> (offset, ms)
        self.quorum_epoch = 1
        self._quorum_leader = self.controller_id
        self._voters_stopped: dict[int, tuple[int, int]] = {}
        self.reassignments = Reassignments(self)
        # (node id, listener name) -> the node's advertised (host, port) there; set by the Cluster
        self.address: Callable[[int, str], tuple[str, int] | None] = lambda node, listener: None

    @property
    def controller_id(self) -> int:
        live = [node for node in self.nodes if node in self.live]
        return live[0] if live else -1

    # ---- partitions -----------------------------------------------------------------------------
    def state(self, topic_name: str, index: int) -> PartitionState | None:
        topic = self.topics.get(topic_name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        found = self._partitions.get((topic.topic_id, index))
        return found if found is not None else self._place(topic, index)

    def _place(self, topic: Topic, index: int) -> PartitionState:
        order = self._placed_topics.setdefault(topic.topic_id, len(self._placed_topics))
        count = len(self.nodes)
        factor = topic.replication_factor if topic.replication_factor > 0 else self.default_replication_factor
        factor = min(max(factor, 1), count)
        start = (order + index) % count
        replicas = [self.nodes[(start + step) % count] for step in range(factor)]
        isr = [node for node in replicas if node in self.live]
        epoch = topic.partitions[index].leader_epoch
        state = PartitionState(replicas, isr, isr[0] if isr else -1, epoch, [(epoch, 0)])
        self._partitions[(topic.topic_id, index)] = state
        return state

    def _require(self, topic: str, partition: int) -> PartitionState:
        state = self.state(topic, partition)
        if state is None:
            raise KeyError(f"no partition {topic}-{partition}")
        return state

    def set_leader(self, topic: str, partition: int, state: PartitionState, leader: int) -> None:
        """A new leader (or none): the leader epoch goes up, in the log too."""
        state.leader = leader
        state.leader_epoch += 1
        self.topics.metadata_cache.changed(topic)
        partition_log = self.topics.log(topic, partition)
        if partition_log is not None:
            partition_log.leader_epoch = state.leader_epoch
            state.epochs.append((state.leader_epoch, partition_log.log_end_offset))

    def each_placed(self):
        for topic in list(self.topics.topics.values()):
            for index in range(len(topic.partitions)):
                yield topic.name, index, self.state(topic.name, index)

    def leader(self, topic: str, partition: int) -> int:
        return self._require(topic, partition).leader

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        """Elect ``to`` (default: the next in-sync replica after the leader) leader of the partition;
        returns the new leader."""
        state = self._require(topic, partition)
        candidates = [node for node in state.isr if node in self.live]
        if to is None:
            if not candidates:
                raise ValueError(f"{topic}-{partition} has no live in-sync replica")
            after = candidates.index(state.leader) + 1 if state.leader in candidates else 0
            to = candidates[after % len(candidates)]
        elif to not in candidates:
            raise ValueError(f"broker {to} is not a live in-sync replica of {topic}-{partition} "
                             f"(replicas {state.replicas}, ISR {state.isr})")
        self.set_leader(topic, partition, state, to)
        return to

    def set_isr(self, topic: str, partition: int, isr: list[int] | None = None) -> list[int]:
        """Shrink (or restore, with None: every live replica) the partition's in-sync replicas. The
        leader stays in the ISR, as Kafka's always does."""
        state = self._require(topic, partition)
        if isr is None:
            isr = [node for node in state.replicas if node in self.live]
        unknown = [node for node in isr if node not in state.replicas]
        if unknown:
            raise ValueError(f"{unknown} are not replicas of {topic}-{partition} (replicas {state.replicas})")
        if state.leader >= 0 and state.leader not in isr:
            isr = [state.leader, *isr]
        state.isr = [node for node in state.replicas if node in isr]
        self.topics.metadata_cache.changed(topic)
        return list(state.isr)

    # ---- brokers --------------------------------------------------------------------------------
    def broker_stopped(self, node: int) -> None:
        """Its partitions leave the ISR; those it led get a live in-sync leader (or none)."""
        self.live.discard(node)
        self.topics.metadata_cache.changed()  # offline replicas, ISRs and leaders of every topic
        for topic, index, state in self.each_placed():
            if node in state.isr:
                state.isr = [replica for replica in state.isr if replica != node]
            if state.leader == node:
                successors = [replica for replica in state.isr if replica in self.live]
                self.set_leader(topic, index, state, successors[0] if successors else -1)
        self._voters_stopped[node] = (self.topics.metadata_changes, int(time.time() * 1000))
        self._follow_controller()

    def broker_started(self, node: int, restore_leaders: bool = True) -> None:
        """It rejoins the ISR of its partitions; offline partitions get it as leader, and (with
        ``restore_leaders``, a preferred-leader election) those whose first replica it is."""
        self.live.add(node)
        self.topics.metadata_cache.changed()
        for topic, index, state in self.each_placed():
            if node in state.replicas and node not in state.isr:
                state.isr = [replica for replica in state.replicas if replica in state.isr or replica == node]
            if state.leader < 0 or (restore_leaders and state.replicas[0] == node and state.leader != node):
                self.set_leader(topic, index, state, node)
        self._voters_stopped.pop(node, None)
        self._follow_controller()
        self.reassignments.catch_up()  # its adding replicas catch up now

    # ---- coordinators ---------------------------------------------------------------------------
    def coordinator(self, key_type: int, key: str) -> int:
        """The group's or transactional id's coordinator: a broker picked by the key's hash (as the
        leader of its __consumer_offsets or __transaction_state partition), or the next live one."""
        count = len(self.nodes)
        start = zlib.crc32(f"{key_type}:{key}".encode()) % count
        for step in range(count):
            node = self.nodes[(start + step) % count]
            if node in self.live:
                return node
        return -1

    # ---- the metadata quorum ---------------------------------------------------------------------
    def _follow_controller(self) -> None:
        """A new controller leads the quorum in a new epoch."""
        if self.controller_id != self._quorum_leader:
            self._quorum_leader = self.controller_id
            self.quorum_epoch += 1

    def quorum(self, high_watermark: int, now_ms: int) -> tuple[int, list[QuorumVoter]]:
        """(leader epoch, voters) as the controller, the quorum's leader, describes them: a live voter
        shares the leader's state, so it has fetched and caught up just now."""
        voters = []
        for node in self.nodes:
            offset, seen_ms = self._voters_stopped.get(node, (high_watermark, now_ms))
            voters.append(QuorumVoter(node, offset, seen_ms, seen_ms))
        return self.quorum_epoch, voters

    # ---- what a node answers --------------------------------------------------------------------
    def leader_error(self, node: int, topic: str, partition: int, current_leader_epoch: int) -> int:
        """Kafka's Partition checks: the leader epoch the client knows against the current one, then
        whether ``node`` leads the partition."""
        state = self.state(topic, partition)
        if state is None:
            return ErrorCode.NONE  # the handler answers for unknown partitions itself
        if current_leader_epoch >= 0 and node in state.replicas:
            if current_leader_epoch < state.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if current_leader_epoch > state.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE if state.leader == node else ErrorCode.NOT_LEADER_OR_FOLLOWER

    def isr_error(self, topic: str, partition: int, acks: int) -> int:
        """acks=all needs min.insync.replicas in-sync replicas (the topic's, else the broker's)."""
        if acks != -1:
            return ErrorCode.NONE
        state = self.state(topic, partition)
        found = self.topics.get(topic)
        if state is None or found is None:
            return ErrorCode.NONE
        needed = int(found.configs.get("min.insync.replicas", self.min_insync_replicas))
        return ErrorCode.NOT_ENOUGH_REPLICAS if len(state.isr) < needed else ErrorCode.NONE

    def end_offset_for(self, topic: str, partition: int, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch's answer, as Kafka's LeaderEpochFileCache.endOffsetFor gives it: (the
        largest epoch at most ``epoch``, the start offset of the next epoch, or the log end offset for
        the current one); (-1, -1) for an unknown or future epoch."""
        state = self._require(topic, partition)
        partition_log = self.topics.log(topic, partition)
        if epoch < 0 or partition_log is None:
            return -1, -1
        if epoch == state.leader_epoch:
            return epoch, partition_log.log_end_offset
        later = [(e, start) for e, start in state.epochs if e > epoch]
        if not later:
            return -1, -1
        earlier = [e for e, _ in state.epochs if e <= epoch]
        return (earlier[-1] if earlier else epoch), later[0][1]

    def partition_info(self, topic: str, partition: int) -> PartitionInfo:
        state = self._require(topic, partition)
        return PartitionInfo(state.leader, state.leader_epoch, list(state.replicas), list(state.isr),
                             [node for node in state.replicas if node not in self.live])

    def brokers(self, listener: str) -> list[NodeAddress]:
        found = []
        for node in self.nodes:
            address = self.address(node, listener) if node in self.live else None
            if address is not None:
                found.append(NodeAddress(node, address[0], address[1]))
        return found
