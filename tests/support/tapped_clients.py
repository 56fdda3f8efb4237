"""Real clients through the broker with its wire tap on: captures of their traffic, without capture
privileges (the broker writes its own as pcapng)."""
from __future__ import annotations

import time
from pathlib import Path

from support.broker_harness import BrokerThread


def confluent_round_trip(folder: Path, topic: str, records: int = 20,
                         capture_name: str = "tap.pcapng") -> tuple[Path, int]:
    """(capture, broker port): the tap while confluent-kafka (librdkafka: Fetch v13+, topics by id)
    produces ``records`` records to ``topic`` (two partitions) and a group consumer reads them back."""
    from confluent_kafka import Consumer, Producer
    capture = folder / capture_name
    with BrokerThread(data_dir=folder / "tapped-broker", num_partitions=2, tap_path=str(capture)) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "log_level": 3})
        for n in range(records):
            producer.produce(topic, b"value-%d" % n, partition=n % 2)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-readers", "log_level": 3,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        got, deadline = 0, time.monotonic() + 60
        while got < records and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            got += message is not None and message.error() is None
        consumer.close()
        assert got == records, f"confluent-kafka read {got} of {records} records"
    return capture, broker.port  # the broker's stop closed the tap: the file is whole
