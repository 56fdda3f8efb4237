"""The transactional producer's TransactionManager, sans I/O: its requests (bodies encoded at every
version it may send), its state moves, and how it maps each error code (as Kafka's TransactionManager
and librdkafka do: retried inside, fatal, fenced, or abortable)."""
from __future__ import annotations

import pytest

from kafkawire.client.core.group.consumer_group_metadata import ConsumerGroupMetadata
from kafkawire.client.core.group.protocol import OffsetAndMetadata
from kafkawire.client.core.topic_partition import TopicPartition
from kafkawire.client.core.transactions.errors import Action, action_for, batch_action
from kafkawire.client.core.transactions.manager import TransactionManager, TransactionState
from kafkawire.client.errors import (
    DeliveryTimeout, KafkaError, ProducerFencedError, TransactionAbortableError, TransactionAbortedError,
    TransactionalIdAuthorizationError, TransactionFatalError, TransactionStateError,
)
from kafkawire.error_codes import ErrorCode as E
from kafkawire.messages import (
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, EndTxnResponse, FindCoordinatorResponse,
    InitProducerIdResponse, TxnOffsetCommitResponse,
)

S = TransactionState
TID = "txn-1"
OUT0, OUT1 = TopicPartition("out", 0), TopicPartition("out", 1)
GROUP = ConsumerGroupMetadata("group-a", 7, "member-1", None)


def found(node: int = 1, code: int = 0, key: str = TID) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
        key=key, node_id=node, host="localhost", port=9092 + node, error_code=code)])


def add_partitions(codes: dict[TopicPartition, int]) -> AddPartitionsToTxnResponse:
    by_topic: dict[str, list] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
            partition_index=tp.partition, partition_error_code=code))
    return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=name, results_by_partition=results)
        for name, results in by_topic.items()])


def offsets_committed(codes: dict[TopicPartition, int]) -> TxnOffsetCommitResponse:
    by_topic: dict[str, list] = {}
    for tp, code in codes.items():
        by_topic.setdefault(tp.topic, []).append(TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
            partition_index=tp.partition, error_code=code))
    return TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
        name=name, partitions=parts) for name, parts in by_topic.items()])


class Driver:
    """Plays the broker for a manager: takes its next request, checks it, answers it."""

    def __init__(self, manager: TransactionManager):
        self.manager = manager
        self.now = 0.0
        self.sent: list[tuple[str, object]] = []

    def next(self, incomplete: bool = False):
        return self.manager.next_request(incomplete, self.now)

    def answer(self, kind: str, response, version: int | None = None, incomplete: bool = False):
        request = self.next(incomplete)
        assert request is not None and request.kind == kind, f"expected {kind}, the manager sends {request}"
        version = request.versions[1] if version is None else version
        body = request.build(version)
        body.encode(version)  # a body the codec accepts at that version
        self.sent.append((kind, body))
        self.manager.handle_response(request, response, version, self.now)
        return body

    def wait(self, ms: float) -> None:
        self.now += ms


def initialized(pid: int = 1000, epoch: int = 0, features: dict | None = None) -> tuple[TransactionManager, Driver]:
    manager = TransactionManager(TID, 60000, retry_backoff_ms=100)
    if features:
        manager.update_features(features)
    driver = Driver(manager)
    result = manager.initialize()
    body = driver.answer("find", found())
    assert (body.key_type, list(body.coordinator_keys)) == (1, [TID])
    body = driver.answer("init", InitProducerIdResponse(producer_id=pid, producer_epoch=epoch))
    assert (body.transactional_id, body.transaction_timeout_ms) == (TID, 60000)
    assert result.done and result.error is None
    manager.acknowledge(result)
    return manager, driver


# ---- the happy paths ---------------------------------------------------------------------------------

def test_a_transaction_adds_partitions_and_offsets_then_commits():
    manager, driver = initialized()
    assert (manager.state, manager.producer_id, manager.producer_epoch) == (S.READY, 1000, 0)
    manager.begin()
    assert manager.maybe_add_partition(OUT0) is True
    assert manager.maybe_add_partition(OUT0) is False  # noted once
    assert not manager.may_send_to(OUT0)  # not before AddPartitionsToTxn is answered
    body = driver.answer("add_partitions", add_partitions({OUT0: 0}))
    assert [(t.name, list(t.partitions)) for t in body.v3_and_below_topics] == [("out", [0])]
    assert (body.v3_and_below_producer_id, body.v3_and_below_producer_epoch) == (1000, 0)
    assert manager.may_send_to(OUT0) and not manager.may_send_to(OUT1)

    sent = manager.send_offsets({TopicPartition("in", 0): OffsetAndMetadata(42)}, GROUP)
    body = driver.answer("add_offsets", AddOffsetsToTxnResponse())
    assert body.group_id == "group-a"
    body = driver.answer("find", found(node=2, key="group-a"))  # the group's coordinator, key type 0
    assert (body.key_type, list(body.coordinator_keys)) == (0, ["group-a"])
    request = driver.next()
    assert request.destination.node_id == 2
    body = request.build(request.versions[1])
    assert (body.generation_id, body.member_id, body.group_id) == (7, "member-1", "group-a")
    assert [(t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in body.topics] == [
        ("in", [(0, 42)])]
    manager.handle_response(request, offsets_committed({TopicPartition("in", 0): 0}), request.versions[1], 0)
    assert sent.done and sent.error is None

    committed = manager.begin_commit()
    assert driver.next(incomplete=True) is None  # EndTxn waits for the transaction's batches
    body = driver.answer("end", EndTxnResponse())
    assert body.committed is True and (body.producer_id, body.producer_epoch) == (1000, 0)
    assert committed.done and committed.error is None
    assert manager.state is S.READY and not manager.may_send_to(OUT0)


def test_an_abort_sends_end_txn_not_committed_and_the_next_transaction_starts_clean():
    manager, driver = initialized()
    manager.begin()
    manager.maybe_add_partition(OUT0)
    driver.answer("add_partitions", add_partitions({OUT0: 0}))
    aborted = manager.begin_abort()
    assert isinstance(manager.aborting_batches, TransactionAbortedError)
    body = driver.answer("end", EndTxnResponse())
    assert body.committed is False and aborted.done and aborted.error is None
    manager.acknowledge(aborted)
    manager.begin()
    manager.maybe_add_partition(OUT1)
    body = driver.answer("add_partitions", add_partitions({OUT1: 0}))
    assert [(t.name, list(t.partitions)) for t in body.v3_and_below_topics] == [("out", [1])]


def test_a_transaction_with_nothing_in_it_ends_without_end_txn():
    manager, driver = initialized()
    manager.begin()
    result = manager.begin_commit()
    assert driver.next() is None and result.done and result.error is None
    assert manager.state is S.READY


def test_transaction_version_2_adds_partitions_implicitly_and_end_txn_bumps_the_epoch():
    manager, driver = initialized(features={"transaction.version": 2})
    manager.begin()
    assert manager.transaction_v2
    manager.maybe_add_partition(OUT0)
    assert manager.may_send_to(OUT0)  # Produce v12+ adds it: no AddPartitionsToTxn
    manager.send_offsets({TopicPartition("in", 0): OffsetAndMetadata(5)}, GROUP)
    driver.answer("find", found(node=2, key="group-a"))
    request = driver.next()
    assert request.kind == "offset_commit" and request.versions == (5, 5)  # no AddOffsetsToTxn
    manager.handle_response(request, offsets_committed({TopicPartition("in", 0): 0}), 5, 0)
    manager.begin_commit()
    request = driver.next()
    assert request.kind == "end" and request.versions == (5, 5)
    manager.handle_response(request, EndTxnResponse(producer_id=1000, producer_epoch=1), 5, 0)
    assert (manager.state, manager.producer_id, manager.producer_epoch) == (S.READY, 1000, 1)


def test_transaction_version_applies_from_the_next_transaction():
    manager, _ = initialized()
    manager.begin()
    manager.update_features({"transaction.version": 2})
    assert not manager.transaction_v2


# ---- retries and coordinator lookups -------------------------------------------------------------

@pytest.mark.parametrize("code", [E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS])
def test_init_producer_id_is_retried_after_the_backoff(code):
    manager = TransactionManager(TID, 60000, retry_backoff_ms=100)
    driver = Driver(manager)
    result = manager.initialize()
    driver.answer("find", found())
    driver.answer("init", InitProducerIdResponse(error_code=code))
    assert not result.done and driver.next() is None
    assert manager.timeout_ms(driver.now) == 100
    driver.wait(100)
    driver.answer("init", InitProducerIdResponse(producer_id=5, producer_epoch=3))
    assert result.done and result.error is None and manager.producer_epoch == 3


@pytest.mark.parametrize("code", [E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE])
def test_a_moved_coordinator_is_looked_up_again(code):
    manager = TransactionManager(TID, 60000, retry_backoff_ms=100)
    driver = Driver(manager)
    result = manager.initialize()
    driver.answer("find", found(node=1))
    driver.answer("init", InitProducerIdResponse(error_code=code))
    driver.answer("find", found(node=3))
    driver.wait(100)
    request = driver.next()
    assert request.kind == "init" and request.destination.node_id == 3
    manager.handle_response(request, InitProducerIdResponse(producer_id=5), request.versions[1], driver.now)
    assert result.done and result.error is None


def test_a_lost_connection_looks_the_coordinator_up_again_and_retries():
    manager = TransactionManager(TID, 60000, retry_backoff_ms=100)
    driver = Driver(manager)
    result = manager.initialize()
    driver.answer("find", found())
    request = driver.next()
    manager.handle_failure(request, driver.now, "connection reset")
    driver.answer("find", found(node=2))
    driver.wait(100)
    driver.answer("init", InitProducerIdResponse(producer_id=9))
    assert result.done and result.error is None


def test_the_first_add_partitions_meeting_concurrent_transactions_retries_sooner():
    manager, driver = initialized()
    manager.begin()
    manager.maybe_add_partition(OUT0)
    driver.answer("add_partitions", add_partitions({OUT0: E.CONCURRENT_TRANSACTIONS}))
    assert manager.timeout_ms(driver.now) == 20  # Kafka's ADD_PARTITIONS_RETRY_BACKOFF_MS
    driver.wait(20)
    driver.answer("add_partitions", add_partitions({OUT0: 0}))
    assert manager.may_send_to(OUT0)


def test_offsets_that_meet_a_retriable_error_are_committed_again():
    manager, driver = initialized()
    manager.begin()
    in0, in1 = TopicPartition("in", 0), TopicPartition("in", 1)
    result = manager.send_offsets({in0: OffsetAndMetadata(1), in1: OffsetAndMetadata(2)}, GROUP)
    driver.answer("add_offsets", AddOffsetsToTxnResponse())
    driver.answer("find", found(node=2, key="group-a"))
    driver.answer("offset_commit", offsets_committed({in0: 0, in1: E.COORDINATOR_LOAD_IN_PROGRESS}))
    driver.wait(100)
    body = driver.answer("offset_commit", offsets_committed({in1: 0}))
    assert [p.partition_index for t in body.topics for p in t.partitions] == [1]
    assert result.done and result.error is None


# ---- fatal errors ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("code", [E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH])
def test_end_txn_fenced_is_fatal_and_every_later_call_raises_it(code):
    manager, driver = initialized()
    manager.begin()
    manager.maybe_add_partition(OUT0)
    driver.answer("add_partitions", add_partitions({OUT0: 0}))
    result = manager.begin_commit()
    driver.answer("end", EndTxnResponse(error_code=code))
    assert isinstance(result.error, ProducerFencedError) and result.error.fatal()
    assert manager.state is S.FATAL_ERROR
    assert manager.aborting_batches is manager.fatal_error  # records not yet sent fail with it
    for call in (manager.begin, manager.begin_abort, manager.initialize, lambda: manager.maybe_add_partition(OUT1)):
        with pytest.raises(ProducerFencedError):
            call()


def test_init_producer_id_fenced_is_fatal():
    manager = TransactionManager(TID, 60000)
    driver = Driver(manager)
    result = manager.initialize()
    driver.answer("find", found())
    driver.answer("init", InitProducerIdResponse(error_code=E.PRODUCER_FENCED))
    assert isinstance(result.error, ProducerFencedError)


def test_transactional_id_authorization_failure_is_fatal():
    manager = TransactionManager(TID, 60000)
    driver = Driver(manager)
    result = manager.initialize()
    driver.answer("find", found(code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    assert isinstance(result.error, TransactionalIdAuthorizationError) and result.error.fatal()
    assert not result.error.txn_requires_abort()


def test_a_fenced_produce_is_fatal_and_an_invalid_epoch_produce_is_abortable():
    manager, _ = initialized()
    manager.begin()
    manager.handle_failed_batch(KafkaError(E.INVALID_PRODUCER_EPOCH, "producing"), sequenced=True)
    assert manager.state is S.ABORTABLE_ERROR  # KIP-588: the coordinator may have aborted a timed-out txn
    manager.handle_failed_batch(KafkaError(E.PRODUCER_FENCED, "producing"), sequenced=True)
    assert manager.state is S.FATAL_ERROR and isinstance(manager.fatal_error, ProducerFencedError)


# ---- abortable errors ------------------------------------------------------------------------------------

def test_an_unauthorized_topic_makes_the_transaction_abortable_then_abort_recovers():
    manager, driver = initialized()
    manager.begin()
    manager.maybe_add_partition(OUT0)
    driver.answer("add_partitions", add_partitions({OUT0: E.TOPIC_AUTHORIZATION_FAILED}))
    assert manager.state is S.ABORTABLE_ERROR
    assert isinstance(manager.aborting_batches, TransactionAbortableError)
    with pytest.raises(TransactionAbortableError) as raised:
        manager.begin_commit()
    assert raised.value.txn_requires_abort() and not raised.value.fatal()
    aborted = manager.begin_abort()
    assert driver.next() is None  # nothing was added: there is no transaction to end at the coordinator
    assert aborted.done and aborted.error is None and manager.state is S.READY


def test_a_failed_batch_under_version_1_ends_the_abort_with_an_epoch_bump():
    manager, driver = initialized(epoch=4)
    manager.begin()
    manager.maybe_add_partition(OUT0)
    driver.answer("add_partitions", add_partitions({OUT0: 0}))
    manager.handle_failed_batch(DeliveryTimeout("expired"), sequenced=True)
    aborted = manager.begin_abort()
    driver.answer("end", EndTxnResponse())
    assert not aborted.done  # the abort completes with InitProducerId carrying the current epoch (KIP-360)
    body = driver.answer("init", InitProducerIdResponse(producer_id=1000, producer_epoch=5))
    assert (body.producer_id, body.producer_epoch) == (1000, 4)
    assert aborted.done and aborted.error is None and manager.producer_epoch == 5 and manager.state is S.READY


@pytest.mark.parametrize("code", [E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID,
                                  E.GROUP_AUTHORIZATION_FAILED])
def test_offsets_of_a_consumer_that_lost_its_partitions_make_the_transaction_abortable(code):
    manager, driver = initialized()
    manager.begin()
    result = manager.send_offsets({TopicPartition("in", 0): OffsetAndMetadata(1)}, GROUP)
    driver.answer("add_offsets", AddOffsetsToTxnResponse())
    driver.answer("find", found(node=2, key="group-a"))
    driver.answer("offset_commit", offsets_committed({TopicPartition("in", 0): code}))
    assert isinstance(result.error, TransactionAbortableError) and result.error.code == code
    assert manager.state is S.ABORTABLE_ERROR


def test_unknown_producer_id_is_abortable_when_the_epoch_can_be_bumped():
    manager, driver = initialized()
    manager.begin()
    manager.maybe_add_partition(OUT0)
    driver.answer("add_partitions", add_partitions({OUT0: E.UNKNOWN_PRODUCER_ID}))
    assert manager.state is S.ABORTABLE_ERROR


def test_unknown_producer_id_is_fatal_when_the_coordinator_cannot_bump_the_epoch():
    manager = TransactionManager(TID, 60000)
    driver = Driver(manager)
    result = manager.initialize()
    driver.answer("find", found())
    driver.answer("init", InitProducerIdResponse(producer_id=1), version=2)  # v2: no KIP-360 bump
    manager.acknowledge(result)
    manager.begin()
    manager.maybe_add_partition(OUT0)
    driver.answer("add_partitions", add_partitions({OUT0: E.UNKNOWN_PRODUCER_ID}))
    assert isinstance(manager.fatal_error, TransactionFatalError)


# ---- the application's mistakes --------------------------------------------------------------------

def test_calls_in_the_wrong_state_raise_transaction_state_error_and_change_nothing():
    manager = TransactionManager(TID, 60000)
    with pytest.raises(TransactionStateError):
        manager.maybe_add_partition(OUT0)  # before init_transactions
    with pytest.raises(TransactionStateError):
        manager.begin()
    manager, _ = initialized()
    with pytest.raises(TransactionStateError):
        manager.maybe_add_partition(OUT0)  # outside a transaction
    with pytest.raises(TransactionStateError):
        manager.begin_commit()
    with pytest.raises(TransactionStateError):
        manager.send_offsets({TopicPartition("in", 0): OffsetAndMetadata(1)}, GROUP)
    manager.begin()
    with pytest.raises(TransactionStateError):
        manager.begin()
    assert manager.state is S.IN_TRANSACTION


def test_a_timed_out_call_resumes_when_made_again_and_blocks_other_calls():
    manager = TransactionManager(TID, 60000)
    driver = Driver(manager)
    first = manager.initialize()  # the application's wait times out: the result stays unacknowledged
    assert manager.initialize() is first
    with pytest.raises(TransactionStateError):
        manager.begin()
    driver.answer("find", found())
    driver.answer("init", InitProducerIdResponse(producer_id=1))
    manager.acknowledge(first)
    manager.begin()
    assert manager.state is S.IN_TRANSACTION


def test_txn_offset_commit_below_v3_refuses_a_group_generation():
    manager, driver = initialized()
    manager.begin()
    manager.send_offsets({TopicPartition("in", 0): OffsetAndMetadata(1)}, GROUP)
    driver.answer("add_offsets", AddOffsetsToTxnResponse())
    driver.answer("find", found(node=2, key="group-a"))
    request = driver.next()
    with pytest.raises(TransactionFatalError):
        request.build(2)
    body = request.build(3)
    assert (body.generation_id, body.member_id) == (7, "member-1")


# ---- the error table ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "code", "action"), [
    ("init", E.CONCURRENT_TRANSACTIONS, Action.RETRY),
    ("init", E.COORDINATOR_LOAD_IN_PROGRESS, Action.RETRY),
    ("init", E.NOT_COORDINATOR, Action.FIND_COORDINATOR),
    ("init", E.PRODUCER_FENCED, Action.FENCED),
    ("init", E.INVALID_PRODUCER_EPOCH, Action.FENCED),
    ("init", E.TRANSACTION_ABORTABLE, Action.ABORTABLE),
    ("init", E.INVALID_TRANSACTION_TIMEOUT, Action.FATAL),
    ("add_partitions", E.TOPIC_AUTHORIZATION_FAILED, Action.ABORTABLE),
    ("add_partitions", E.OPERATION_NOT_ATTEMPTED, Action.SKIP),
    ("add_partitions", E.INVALID_TXN_STATE, Action.FATAL),
    ("add_partitions", E.INVALID_PRODUCER_ID_MAPPING, Action.BUMP_OR_FATAL),
    ("add_offsets", E.GROUP_AUTHORIZATION_FAILED, Action.ABORTABLE),
    ("end", E.INVALID_TXN_STATE, Action.FATAL),
    ("end", E.UNKNOWN_PRODUCER_ID, Action.BUMP_OR_FATAL),
    ("offset_commit", E.REQUEST_TIMED_OUT, Action.FIND_COORDINATOR),
    ("offset_commit", E.UNKNOWN_TOPIC_OR_PARTITION, Action.RETRY),
    ("offset_commit", E.ILLEGAL_GENERATION, Action.ABORTABLE),
    ("offset_commit", E.UNSUPPORTED_FOR_MESSAGE_FORMAT, Action.FATAL),
    ("find", E.COORDINATOR_NOT_AVAILABLE, Action.RETRY),
    ("find", E.GROUP_AUTHORIZATION_FAILED, Action.ABORTABLE),
])
def test_error_codes_map_as_kafkas_transaction_manager(kind, code, action):
    assert action_for(kind, code) is action


def test_failed_batches_map_as_kafkas_handle_failed_batch():
    assert batch_action(E.PRODUCER_FENCED) is Action.FENCED
    assert batch_action(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) is Action.FATAL
    assert batch_action(E.CLUSTER_AUTHORIZATION_FAILED) is Action.FATAL
    assert batch_action(E.INVALID_PRODUCER_EPOCH) is Action.ABORTABLE
    assert batch_action(E.TRANSACTION_ABORTABLE) is Action.ABORTABLE
    assert batch_action(None) is Action.ABORTABLE  # a delivery timeout
