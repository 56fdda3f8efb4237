"""Share consumption of a partition whose first segments are in the remote tier: confluent-kafka's
ShareConsumer gets every record once, those read from the remote tier as well as the local ones, as a
consumer's fetch reads them."""
from __future__ import annotations

import time

from support.broker_harness import BrokerThread, RawClient
from support.broker_wire import batch_of, create_topic, produce

BATCHES, RECORDS_PER_BATCH = 8, 10


def test_share_consumer_reads_records_in_the_remote_tier(tmp_path):
    from confluent_kafka import ShareConsumer
    with BrokerThread(data_dir=tmp_path / "data", remote_dir=tmp_path / "remote", auto_create_topics=False,
                      retention_check_interval_ms=3_600_000, share_auto_offset_reset="earliest") as broker:
        with RawClient(broker.port) as client:
            create_topic(client, "tiered", 1, {"remote.storage.enable": "true", "segment.bytes": "2000",
                                               "local.retention.bytes": "1"})
            for _ in range(BATCHES):
                assert produce(client, "tiered", 0, batch_of(400, records=RECORDS_PER_BATCH)).error_code == 0
        partition_log = broker.broker.topics.log("tiered", 0)
        broker.loop.call_soon_threadsafe(lambda: partition_log.apply_retention(time.time_ns() // 1_000_000))
        deadline = time.monotonic() + 10
        while partition_log.local_log_start_offset == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        local_start = partition_log.local_log_start_offset
        assert 0 < local_start and partition_log.log_start_offset == 0  # the first records only remotely
        total = BATCHES * RECORDS_PER_BATCH
        consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "remote-share"})
        consumer.subscribe(["tiered"])
        try:
            got: list = []
            deadline = time.monotonic() + 30
            while len(got) < total and time.monotonic() < deadline:
                for message in consumer.poll(1.0):
                    assert message.error() is None, message.error()
                    got.append(message)
            consumer.commit_sync(15)
        finally:
            consumer.close()
        assert sorted(message.offset() for message in got) == list(range(total))
