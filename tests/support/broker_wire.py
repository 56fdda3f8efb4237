"""Raw wire requests to a broker for the tests: topics, produce, fetch and the records they carry,
each through kafkawire's codec at a chosen version (tests/broker_harness.RawClient sends them)."""
from __future__ import annotations

import time

from kafkawire import messages as m
from kafkawire.codec.primitives import ZERO_UUID
from kafkawire.records import RecordBatchBuilder

FETCH_VERSION = 12  # names, flexible; sessions and v19 are tested with their own versions


def batch_of(size: int, records: int = 1) -> bytes:
    """A record batch of exactly ``size`` bytes, timestamped now (so retention by time keeps it)."""
    now = time.time_ns() // 1_000_000
    for total in range(max(0, size - 200), size):
        builder = RecordBatchBuilder()
        for i in range(records):  # spread ``total`` value bytes over the records
            builder.append(b"x" * (total // records + (i < total % records)), timestamp=now)
        data = builder.build()
        if len(data) == size:
            return data
    raise ValueError(f"cannot make a batch of exactly {size} bytes")


def create_topic(client, name: str, partitions: int, configs: dict | None = None) -> None:
    request = m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=5000)
    (result,) = client.request(request, 7).topics
    assert result.error_code == 0, result


def produce(client, topic: str, partition: int, records: bytes, version: int = 9):
    request = m.ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[m.ProduceRequest.TopicProduceData(
        name=topic, partition_data=[m.ProduceRequest.PartitionProduceData(index=partition, records=records)])])
    (topic_response,) = client.request(request, version).responses
    return topic_response.partition_responses[0]


def fetch(client, partitions, *, max_bytes=0x7FFFFFFF, min_bytes=0, max_wait_ms=0, version=FETCH_VERSION,
          session_id=0, session_epoch=-1, forgotten=(), topic_ids=None):
    """partitions: [(topic, partition, offset, partition_max_bytes)] or with a 5th remote max bytes."""
    topics: dict = {}
    for topic, partition, offset, partition_max, *remote in partitions:
        topics.setdefault(topic, []).append(m.FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=partition_max,
            remote_partition_max_bytes=remote[0] if remote else 0, current_leader_epoch=-1, log_start_offset=-1))
    request = m.FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
        session_id=session_id, session_epoch=session_epoch,
        topics=[m.FetchRequest.FetchTopic(topic=t, topic_id=(topic_ids or {}).get(t, ZERO_UUID), partitions=ps)
                for t, ps in topics.items()],
        forgotten_topics_data=[m.FetchRequest.ForgottenTopic(topic=t, topic_id=(topic_ids or {}).get(t, ZERO_UUID),
                                                             partitions=list(ps)) for t, ps in forgotten],
        rack_id="")
    return client.request(request, version)


def by_partition(response, names: dict | None = None) -> dict:
    """The response's partitions by (topic, partition), in response order; ``names`` maps topic ids
    to names for v13+ responses, which carry ids only."""
    return {(t.topic or (names or {}).get(t.topic_id), p.partition_index): p
            for t in response.responses for p in t.partitions}
