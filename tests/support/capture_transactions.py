"""A synthetic capture of transactional producers for the capture's transaction tests: requests and
responses encoded by kafkawire's codecs (InitProducerId, AddPartitionsToTxn v3 and v4, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn v3 and v5, Produce with transactional batches, a read_committed Fetch with
transaction markers), on several TCP connections (coordinator, partition leader, group coordinator,
another instance of the producer, a broker's verification) at chosen capture times, so that what the
transactions view and problems must say is known exactly (``EXPECTED``).

``build(path)`` writes it as one pcapng file.
"""
from __future__ import annotations

import struct
from pathlib import Path

from kafkawire import messages as m
from kafkawire.error_codes import ErrorCode
from kafkawire.framing import Correlator, encode_response
from kafkawire.pcap.writer import TcpConversationWriter, file_header
from kafkawire.records import RecordBatchBuilder
from kafkawire.records.builder import transaction_marker_batch

BROKER = ("10.7.0.1", 9092)
T0 = 1_750_000_000_000_000_000  # ns, a whole number of microseconds
TOPIC = "events"
ORDERS, AUDIT = "orders-tx", "audit-tx"
ORDERS_PID, AUDIT_PID, IDEMPOTENT_PID = 4000, 5000, 6000

# What the report must say: the transactions view (durations in ms, from each transaction's first
# request to its EndTxn answer, or to the InitProducerId answer that aborted it), and the problems.
EXPECTED_TRANSACTIONS = [
    {"transactional_id": AUDIT, "begun": 1, "committed": 0, "aborted": 0, "open": 1, "mean_ms": None, "max_ms": None},
    # 1: 10 -> 31 committed; 2: 40 -> 81 aborted; 3: 100 -> 2001 aborted by the new instance (hanging);
    # 4: 2030 -> 2051 committed (EndTxn v5 bumps the epoch to 2); 5: 2061 (a produce) -> 2071 aborted
    {"transactional_id": ORDERS, "begun": 5, "committed": 2, "aborted": 3, "open": 0,
     "mean_ms": (21 + 41 + 1901 + 21 + 10) / 5, "max_ms": 1901.0},
]
_ZOMBIE = f"transactional id {ORDERS!r}: producer id {ORDERS_PID} epoch 0 wrote to 1 partition(s)"
EXPECTED_PROBLEMS = {
    "hanging_transaction": [f"{_ZOMBIE} and sent no EndTxn within its transaction timeout of 1000 ms"],
    "fenced_producer": [f"{_ZOMBIE} and was answered PRODUCER_FENCED",
                        f"{_ZOMBIE} after InitProducerId gave it producer id {ORDERS_PID} epoch 1"],
}
# The transactional produces: (capture ms of the response, producer epoch, partitions).
EXPECTED_PRODUCES = [(21, 0, [0, 1]), (51, 0, [0]), (111, 0, [1]), (2011, 0, [0]), (2021, 0, [0]), (2041, 1, [0]),
                     (2061, 2, [1]), (2121, 0, [0])]


class _Connection:
    """One client's TCP connection to the broker; its packets are kept with their capture times."""

    def __init__(self, capture: Capture, port: int, client_id: str):
        self.capture = capture
        self.writer = TcpConversationWriter((f"10.7.0.{port % 200 + 2}", port), BROKER, seed=port)
        self.correlator = Correlator(client_id=client_id, first_correlation_id=1)
        self.opened = False

    def call(self, at_ms: int, body, version: int, response) -> None:
        """A request at ``at_ms`` answered 1 ms later (``response`` None: never answered)."""
        if not self.opened:
            self.capture.add(at_ms, self.writer.open(self.capture.ns(at_ms)))
            self.opened = True
        data = self.correlator.request(body, version)
        self.capture.add(at_ms, self.writer.client_data(data, self.capture.ns(at_ms)))
        if response is not None:
            correlation_id = struct.unpack_from(">i", data, 8)[0]
            answer = encode_response(body.API_KEY, version, correlation_id, response)
            self.capture.add(at_ms + 1, self.writer.server_data(answer, self.capture.ns(at_ms + 1)))


class Capture:
    def __init__(self):
        self.blocks: list[tuple[int, int, bytes]] = []  # (ms, order, pcapng blocks)

    @staticmethod
    def ns(ms: int) -> int:
        return T0 + ms * 1_000_000

    def add(self, ms: int, blocks: bytes) -> None:
        self.blocks.append((ms, len(self.blocks), blocks))

    def connection(self, port: int, client_id: str) -> _Connection:
        return _Connection(self, port, client_id)

    def write(self, path: Path) -> Path:
        path.write_bytes(file_header() + b"".join(blocks for *_, blocks in sorted(self.blocks)))
        return path


# ---- the messages ----------------------------------------------------------------------------------------

def init_producer_id(transactional_id, timeout_ms: int, producer_id: int, epoch: int):
    return (m.InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=timeout_ms), 4,
            m.InitProducerIdResponse(producer_id=producer_id, producer_epoch=epoch))


def add_partitions(transactional_id: str, producer_id: int, epoch: int, partitions: list[int]):
    return (m.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
            name=TOPIC, partitions=partitions)]), 3,
        m.AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
            m.AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=TOPIC, results_by_partition=[
                m.AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=p)
                for p in partitions])]))


def verify_partitions(transactional_id: str, producer_id: int, epoch: int):
    """A broker's v4 verification (KIP-890 part 1): verify_only, which begins no transaction."""
    return (m.AddPartitionsToTxnRequest(transactions=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch, verify_only=True,
        topics=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=[0])])]), 4,
        m.AddPartitionsToTxnResponse(results_by_transaction=[m.AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
            transactional_id=transactional_id, topic_results=[
                m.AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=TOPIC, results_by_partition=[
                    m.AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=0)])])]))


def end_txn(transactional_id: str, producer_id: int, epoch: int, committed: bool, version: int = 3):
    bumped = {"producer_id": producer_id, "producer_epoch": epoch + 1} if version >= 5 else {}
    return (m.EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
                            committed=committed), version, m.EndTxnResponse(**bumped))


def produce(transactional_id, producer_id: int, epoch: int, partitions: list[int], error=ErrorCode.NONE,
            transactional: bool = True, sequence: int = 0):
    blobs = []
    for partition in partitions:
        builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                     transactional=transactional)
        builder.append(b"value-%d" % partition, key=b"key", timestamp=1_750_000_000_000)
        blobs.append(builder.build())
    return (m.ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=1000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            m.ProduceRequest.PartitionProduceData(index=p, records=blob) for p, blob in zip(partitions, blobs)])]), 9,
        m.ProduceResponse(responses=[m.ProduceResponse.TopicProduceResponse(name=TOPIC, partition_responses=[
            m.ProduceResponse.PartitionProduceResponse(index=p, error_code=error, base_offset=-1 if error else 0)
            for p in partitions])]))


def read_committed_fetch():
    """A read_committed Fetch answered with a transactional batch and the COMMIT marker after it."""
    data = RecordBatchBuilder(base_offset=0, producer_id=ORDERS_PID, producer_epoch=0, base_sequence=0,
                              transactional=True)
    data.append(b"value-0", key=b"key", timestamp=1_750_000_000_000)
    marker = transaction_marker_batch(True, producer_id=ORDERS_PID, producer_epoch=0, coordinator_epoch=0,
                                      base_offset=1)
    return (m.FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=1, topics=[
        m.FetchRequest.FetchTopic(topic=TOPIC, partitions=[m.FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), 11,
        m.FetchResponse(responses=[m.FetchResponse.FetchableTopicResponse(topic=TOPIC, partitions=[
            m.FetchResponse.PartitionData(partition_index=0, high_watermark=2, last_stable_offset=2,
                                          records=data.build() + marker)])]))


def build(path: Path) -> Path:
    capture = Capture()
    coordinator = capture.connection(42001, "app-1")   # the first instance's transaction coordinator
    leader = capture.connection(42002, "app-1")        # its partition leader
    group = capture.connection(42003, "app-1")         # its group coordinator
    second = capture.connection(42004, "app-2")        # a second instance, which fences the first
    second_leader = capture.connection(42005, "app-2")
    audit = capture.connection(42006, "audit")         # another transactional id, on one connection
    idempotent = capture.connection(42007, "plain")    # an idempotent producer: no transactions
    broker = capture.connection(42008, "broker-2")     # a broker verifying a partition (KIP-890)
    consumer = capture.connection(42009, "reader")

    coordinator.call(0, *init_producer_id(ORDERS, 1000, ORDERS_PID, 0))
    coordinator.call(10, *add_partitions(ORDERS, ORDERS_PID, 0, [0, 1]))
    leader.call(20, *produce(ORDERS, ORDERS_PID, 0, [0, 1]))
    coordinator.call(30, *end_txn(ORDERS, ORDERS_PID, 0, committed=True))
    coordinator.call(40, *add_partitions(ORDERS, ORDERS_PID, 0, [0]))
    leader.call(50, *produce(ORDERS, ORDERS_PID, 0, [0], sequence=1))
    coordinator.call(60, m.AddOffsetsToTxnRequest(transactional_id=ORDERS, producer_id=ORDERS_PID, producer_epoch=0,
                                                  group_id="g"), 3, m.AddOffsetsToTxnResponse())
    group.call(70, m.TxnOffsetCommitRequest(
        transactional_id=ORDERS, group_id="g", producer_id=ORDERS_PID, producer_epoch=0, topics=[
            m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="input", partitions=[
                m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]), 3,
        m.TxnOffsetCommitResponse(topics=[m.TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
            name="input", partitions=[m.TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(partition_index=0)])]))
    coordinator.call(80, *end_txn(ORDERS, ORDERS_PID, 0, committed=False))
    coordinator.call(100, *add_partitions(ORDERS, ORDERS_PID, 0, [1]))
    leader.call(110, *produce(ORDERS, ORDERS_PID, 0, [1], sequence=2))
    consumer.call(150, *read_committed_fetch())
    # the first instance goes quiet past the 1000 ms timeout; a second one takes the transactional id over
    second.call(2000, *init_producer_id(ORDERS, 1000, ORDERS_PID, 1))
    leader.call(2010, *produce(ORDERS, ORDERS_PID, 0, [0], error=ErrorCode.PRODUCER_FENCED, sequence=3))
    leader.call(2020, *produce(ORDERS, ORDERS_PID, 0, [0], sequence=3))  # a broker that let a zombie write
    second.call(2030, *add_partitions(ORDERS, ORDERS_PID, 1, [0]))
    second_leader.call(2040, *produce(ORDERS, ORDERS_PID, 1, [0]))
    second.call(2050, *end_txn(ORDERS, ORDERS_PID, 1, committed=True, version=5))  # epoch 2 from here on
    second_leader.call(2060, *produce(ORDERS, ORDERS_PID, 2, [1]))  # transaction version 2: no AddPartitions
    second.call(2070, *end_txn(ORDERS, ORDERS_PID, 2, committed=False, version=5))
    broker.call(2080, *verify_partitions(ORDERS, ORDERS_PID, 3))
    audit.call(2100, *init_producer_id(AUDIT, 500, AUDIT_PID, 0))
    audit.call(2110, *add_partitions(AUDIT, AUDIT_PID, 0, [0]))
    audit.call(2120, *produce(AUDIT, AUDIT_PID, 0, [0]))
    idempotent.call(2200, *init_producer_id(None, -1, IDEMPOTENT_PID, 0))
    idempotent.call(2210, *produce(None, IDEMPOTENT_PID, 0, [0], transactional=False))
    idempotent.call(2300, m.MetadataRequest(topics=[]), 12, m.MetadataResponse())  # the capture's last frame at 2301
    return capture.write(path)
