"""The transaction coordinator's rules, call by call: Kafka's answers for InitProducerId, AddPartitions,
EndTxn under transaction versions 1 and 2, fencing, timeouts, expiry and recovery after a restart.
The partition logs are recording stand-ins here; the wire tests and the real clients use real ones."""
from __future__ import annotations

import pytest

from kafkawire.broker.storage.errors import LogAppendError
from kafkawire.broker.transactions.coordinator import TransactionCoordinator
from kafkawire.broker.transactions.markers import MarkerWriter
from kafkawire.broker.transactions.metadata import TxnState
from kafkawire.broker.transactions.producer_ids import ProducerIdBlock
from kafkawire.broker.transactions.state_log import TransactionStateLog
from kafkawire.error_codes import ErrorCode as E

from support.fake_clock import FakeClock

TOPIC = ("orders", 0)
OTHER = ("orders", 1)


class RecordingLog:
    """Records the markers written to it; ``fail`` makes the next writes fail as a full disk would."""

    def __init__(self):
        self.markers: list[tuple[int, int, bool, int]] = []
        self.fail = False

    def append_marker(self, producer_id, producer_epoch, commit, coordinator_epoch):
        if self.fail:
            raise LogAppendError(E.KAFKA_STORAGE_ERROR, "disk full")
        self.markers.append((producer_id, producer_epoch, commit, coordinator_epoch))
        return len(self.markers) - 1


class Harness:
    def __init__(self, data_dir, clock=None):
        self.data_dir = data_dir
        self.clock = clock or FakeClock(1_000.0)
        self.logs = {TOPIC: RecordingLog(), OTHER: RecordingLog()}
        self.completed_offsets: list[tuple[int, bool, set[int]]] = []
        self.coordinator = self.open()

    def open(self) -> TransactionCoordinator:
        markers = MarkerWriter(lambda topic, index: self.logs.get((topic, index)), lambda topic, index: None,
                               lambda pid, commit, parts: self.completed_offsets.append((pid, commit, parts)))
        coordinator = TransactionCoordinator(
            TransactionStateLog(self.data_dir), ProducerIdBlock(self.data_dir / "producer_ids.json"), markers,
            max_timeout_ms=900_000, id_expiration_ms=7 * 86_400_000, clock=self.clock)
        coordinator.load()
        return coordinator

    def restart(self) -> TransactionCoordinator:
        self.coordinator.close()
        self.coordinator = self.open()
        return self.coordinator


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    yield h
    h.coordinator.close()


def test_init_gives_a_producer_id_and_bumps_the_epoch_on_every_init(harness):
    c = harness.coordinator
    first = c.init_producer_id("tx", 60_000)
    assert (first.error, first.producer_epoch) == (E.NONE, 0)
    second = c.init_producer_id("tx", 60_000)
    assert (second.error, second.producer_id, second.producer_epoch) == (E.NONE, first.producer_id, 1)
    assert c.init_producer_id("other", 60_000).producer_id != first.producer_id


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_init_refuses_a_timeout_out_of_bounds(harness, timeout):
    assert harness.coordinator.init_producer_id("tx", timeout).error == E.INVALID_TRANSACTION_TIMEOUT


def test_init_refuses_an_empty_transactional_id(harness):
    assert harness.coordinator.init_producer_id("", 60_000).error == E.INVALID_REQUEST


@pytest.mark.parametrize("client_version", [1, 2])
def test_a_new_instance_fences_the_old_one_and_aborts_its_open_transaction(harness, client_version):
    c = harness.coordinator
    old = c.init_producer_id("tx", 60_000)
    assert c.add_partitions("tx", old.producer_id, old.producer_epoch, [TOPIC], client_version) == E.NONE
    # the new instance's first call aborts the open transaction, and it is asked to retry
    assert c.init_producer_id("tx", 60_000).error == E.CONCURRENT_TRANSACTIONS
    # the abort marker fences the old epoch (transaction version 2 bumps once more for the abort)
    fence_epoch = old.producer_epoch + client_version
    assert harness.logs[TOPIC].markers == [(old.producer_id, fence_epoch, False, c.coordinator_epoch)]
    new = c.init_producer_id("tx", 60_000)
    assert new.error == E.NONE and new.producer_epoch > old.producer_epoch
    # the old instance is fenced from everything
    assert c.add_partitions("tx", old.producer_id, old.producer_epoch, [OTHER]) == E.PRODUCER_FENCED
    assert c.end_transaction("tx", old.producer_id, old.producer_epoch, True, 1).error == E.PRODUCER_FENCED


def test_init_with_an_expected_producer_id_that_is_not_this_ids_is_fenced(harness):
    c = harness.coordinator
    current = c.init_producer_id("tx", 60_000)
    assert c.init_producer_id("tx", 60_000, current.producer_id + 100, 0).error == E.PRODUCER_FENCED
    # the producer's own id and epoch (KIP-360: bump after an abortable error) is accepted
    bumped = c.init_producer_id("tx", 60_000, current.producer_id, current.producer_epoch)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, current.producer_epoch + 1)


def test_add_partitions_checks_the_producer(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 60_000)
    assert c.add_partitions("unknown", init.producer_id, 0, [TOPIC]) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", init.producer_id + 1, 0, [TOPIC]) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", init.producer_id, init.producer_epoch + 1, [TOPIC]) == E.PRODUCER_FENCED
    assert c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC]) == E.NONE
    assert c.describe("tx").state is TxnState.ONGOING
    assert c.verify_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC, OTHER]) == {
        TOPIC: E.NONE, OTHER: E.TRANSACTION_ABORTABLE}


def test_transaction_version_1_commit_keeps_the_epoch(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 60_000)
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC, OTHER])
    end = c.end_transaction("tx", init.producer_id, init.producer_epoch, True, client_version=1)
    assert (end.error, end.producer_epoch) == (E.NONE, init.producer_epoch)
    assert harness.logs[TOPIC].markers == harness.logs[OTHER].markers == [
        (init.producer_id, init.producer_epoch, True, c.coordinator_epoch)]
    assert c.describe("tx").state is TxnState.COMPLETE_COMMIT and not c.describe("tx").partitions
    # a retried commit succeeds; an abort now is refused
    assert c.end_transaction("tx", init.producer_id, init.producer_epoch, True, 1).error == E.NONE
    assert c.end_transaction("tx", init.producer_id, init.producer_epoch, False, 1).error == E.INVALID_TXN_STATE


def test_transaction_version_2_bumps_the_epoch_on_every_transaction(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 60_000)
    assert c.verify_or_add("tx", init.producer_id, init.producer_epoch, TOPIC, add=True) == E.NONE
    end = c.end_transaction("tx", init.producer_id, init.producer_epoch, True, client_version=2)
    assert (end.error, end.producer_id, end.producer_epoch) == (E.NONE, init.producer_id, init.producer_epoch + 1)
    # the markers carry the new epoch, fencing late writes of the old one
    assert harness.logs[TOPIC].markers == [(init.producer_id, init.producer_epoch + 1, True, c.coordinator_epoch)]
    # a retry with the old epoch is recognised as one
    retry = c.end_transaction("tx", init.producer_id, init.producer_epoch, True, client_version=2)
    assert (retry.error, retry.producer_epoch) == (E.NONE, end.producer_epoch)
    # the old epoch cannot start anything
    assert c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC]) == E.PRODUCER_FENCED
    # aborting a transaction that wrote nothing moves the epoch on as well
    empty = c.end_transaction("tx", end.producer_id, end.producer_epoch, False, client_version=2)
    assert (empty.error, empty.producer_epoch) == (E.NONE, end.producer_epoch + 1)
    assert len(harness.logs[TOPIC].markers) == 1


def test_an_exhausted_epoch_moves_the_transactional_id_to_a_new_producer_id(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 60_000)
    metadata = c.describe("tx")
    metadata.producer_epoch = 32766  # as if 32766 transactions had run
    rotated = c.init_producer_id("tx", 60_000)
    assert rotated.error == E.NONE and rotated.producer_id != init.producer_id and rotated.producer_epoch == 0


def test_end_transaction_errors(harness):
    c = harness.coordinator
    assert c.end_transaction("nobody", 1, 0, True, 1).error == E.INVALID_PRODUCER_ID_MAPPING
    init = c.init_producer_id("tx", 60_000)
    # nothing was added: there is no transaction to commit
    assert c.end_transaction("tx", init.producer_id, init.producer_epoch, True, 1).error == E.INVALID_TXN_STATE
    assert c.end_transaction("tx", init.producer_id + 7, init.producer_epoch, True, 1).error == \
        E.INVALID_PRODUCER_ID_MAPPING


def test_markers_that_fail_leave_the_transaction_prepared_until_they_are_written(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 60_000)
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC, OTHER])
    harness.logs[OTHER].fail = True
    end = c.end_transaction("tx", init.producer_id, init.producer_epoch, True, 1)
    assert end.error == E.CONCURRENT_TRANSACTIONS
    assert c.describe("tx").state is TxnState.PREPARE_COMMIT
    assert c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC]) == E.CONCURRENT_TRANSACTIONS
    harness.logs[OTHER].fail = False
    c.retry_incomplete()
    assert c.describe("tx").state is TxnState.COMPLETE_COMMIT
    assert harness.logs[OTHER].markers == [(init.producer_id, init.producer_epoch, True, c.coordinator_epoch)]
    assert c.end_transaction("tx", init.producer_id, init.producer_epoch, True, 1).error == E.NONE


def test_a_prepared_transaction_completes_after_a_restart(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 60_000)
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC])
    harness.logs[TOPIC].fail = True  # the crash comes before the markers
    c.end_transaction("tx", init.producer_id, init.producer_epoch, False, 1)
    harness.logs[TOPIC].fail = False
    epoch_before = c.coordinator_epoch
    c = harness.restart()
    assert c.coordinator_epoch == epoch_before + 1
    assert c.describe("tx").state is TxnState.COMPLETE_ABORT
    assert harness.logs[TOPIC].markers == [(init.producer_id, init.producer_epoch, False, c.coordinator_epoch)]


def test_state_survives_a_restart(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 45_000)
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC])
    c = harness.restart()
    metadata = c.describe("tx")
    assert (metadata.state, metadata.partitions, metadata.timeout_ms) == (TxnState.ONGOING, {TOPIC}, 45_000)
    # producer ids are never handed out twice across restarts
    assert c.init_producer_id("another", 60_000).producer_id != init.producer_id


def test_open_transactions_past_their_timeout_are_aborted(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 10_000)
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC])
    harness.clock.now += 5
    assert c.abort_timed_out() == []
    harness.clock.now += 6
    assert c.abort_timed_out() == ["tx"]
    assert c.describe("tx").state is TxnState.COMPLETE_ABORT
    assert harness.logs[TOPIC].markers[0][2] is False
    # the producer that let it time out is fenced
    assert c.add_partitions("tx", init.producer_id, init.producer_epoch, [TOPIC]) == E.PRODUCER_FENCED


def test_idle_transactional_ids_expire(harness):
    c = harness.coordinator
    c.init_producer_id("idle", 60_000)
    init = c.init_producer_id("busy", 60_000)
    c.add_partitions("busy", init.producer_id, init.producer_epoch, [TOPIC])
    harness.clock.now += 7 * 86_400 + 1
    assert c.expire_transactional_ids() == ["idle"]
    assert c.describe("idle") is None and c.describe("busy") is not None
    assert harness.restart().describe("idle") is None


def test_offsets_partitions_complete_the_groups_offsets(harness):
    c = harness.coordinator
    init = c.init_producer_id("tx", 60_000)
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [("__consumer_offsets", 7), TOPIC])
    c.end_transaction("tx", init.producer_id, init.producer_epoch, True, 1)
    assert harness.completed_offsets == [(init.producer_id, True, {7})]


def test_list_filters(harness):
    c = harness.coordinator
    a = c.init_producer_id("app-a", 60_000)
    c.init_producer_id("app-b", 60_000)
    c.add_partitions("app-a", a.producer_id, a.producer_epoch, [TOPIC])
    assert [t.transactional_id for t in c.list(set(), set())] == ["app-a", "app-b"]
    assert [t.transactional_id for t in c.list({"Ongoing"}, set())] == ["app-a"]
    assert [t.transactional_id for t in c.list(set(), {a.producer_id})] == ["app-a"]
    assert [t.transactional_id for t in c.list(set(), set(), pattern="app-b")] == ["app-b"]
    harness.clock.now += 2
    assert [t.transactional_id for t in c.list(set(), set(), min_duration_ms=1000)] == ["app-a"]
    assert c.list(set(), set(), min_duration_ms=5000) == []
