"""The broker's Prometheus endpoint and request log: bytes and records in and out per topic, requests
and errors per API, connections, the partitions KIP-74's limits cut short, parked fetches; one log
line per request when the request log is on."""
from __future__ import annotations

import logging
import urllib.request

import pytest

from kafkawire import messages as m
from kafkawire.records import RecordBatchBuilder

from support.broker_harness import RawClient, own_broker
from support.broker_wire import batch_of, create_topic, fetch, produce

pytest.importorskip("prometheus_client")


def scrape(broker) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.broker.metrics_port}/metrics", timeout=5).read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


broker = own_broker(metrics_port=0, request_log=True)


def test_traffic_is_counted_per_topic_and_api(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "counted", 1)
        for _ in range(3):
            assert produce(client, "counted", 0, batch_of(1000, records=4)).error_code == 0
        # 3000 bytes from offset 0; a 1500-byte partition limit stops short: cut by PartitionMaxBytes
        response = fetch(client, [("counted", 0, 0, 1500)], max_bytes=1 << 20)
        assert len(response.responses[0].partitions[0].records) == 1500
        # a request limit smaller than the partition's: cut by MaxBytes
        fetch(client, [("counted", 0, 0, 1 << 20)], max_bytes=1500)
        assert client.request(m.ListOffsetsRequest(replica_id=-1, topics=[m.ListOffsetsRequest.ListOffsetsTopic(
            name="nowhere", partitions=[m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]),
            1).topics[0].partitions[0].error_code != 0
        samples = scrape(broker)
        assert samples['kafka_server_socket_server_connections{listener="PLAINTEXT"}'] >= 1
    assert samples['kafka_server_brokertopicmetrics_bytes_in_total{topic="counted"}'] == 3000
    assert samples['kafka_server_brokertopicmetrics_messages_in_total{topic="counted"}'] == 12
    assert samples['kafka_server_brokertopicmetrics_bytes_out_total{topic="counted"}'] == 3000
    assert samples['kafka_network_requestmetrics_requests_total{request="Produce",version="9"}'] == 3
    assert samples['kafka_network_requestmetrics_total_time_seconds_count{request="Fetch"}'] == 2
    assert samples['kafkawire_fetch_partitions_cut_total{limit="partition_max_bytes"}'] == 1
    assert samples['kafkawire_fetch_partitions_cut_total{limit="max_bytes"}'] == 1
    assert samples["kafkawire_fetch_parked"] == 0


def test_the_request_log_has_a_line_per_request(broker, caplog):
    with caplog.at_level(logging.INFO, logger="kafkawire.broker.requests"), RawClient(broker.port, "log-me") as client:
        client.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        client.request(m.FindCoordinatorRequest(key="g", key_type=7), 3)
    lines = [r.getMessage() for r in caplog.records if r.name == "kafkawire.broker.requests"]
    assert any(line.startswith("ApiVersions v3 from log-me (127.0.0.1) in ") for line in lines)
    assert any(line.startswith("FindCoordinator v3 from log-me") and line.endswith("error 42") for line in lines)


def test_share_acknowledgements_and_groups_are_counted(broker):
    with RawClient(broker.port) as client:
        create_topic(client, "shared-counted", 1)
        builder = RecordBatchBuilder()
        for i in range(4):
            builder.append(f"v{i}".encode())
        assert produce(client, "shared-counted", 0, builder.build()).error_code == 0
        topic_id = broker.broker.topics.get("shared-counted").topic_id
        group = "counted-share"
        client.request(m.AlterShareGroupOffsetsRequest(group_id=group, topics=[
            m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestTopic(topic_name="shared-counted", partitions=[
                m.AlterShareGroupOffsetsRequest.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                                       start_offset=0)])]), 0)
        Request = m.ShareFetchRequest

        def share_fetch(epoch, acks=()):
            batches = [Request.AcknowledgementBatch(first_offset=f, last_offset=last, acknowledge_types=t)
                       for f, last, t in acks]
            return client.request(Request(group_id=group, member_id="m1", share_session_epoch=epoch, max_wait_ms=0,
                                          min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10, topics=[
                                              Request.FetchTopic(topic_id=topic_id, partitions=[Request.FetchPartition(
                                                  partition_index=0, acknowledgement_batches=batches)])]), 1)

        acquired = share_fetch(0).responses[0].partitions[0].acquired_records
        assert [(a.first_offset, a.last_offset) for a in acquired] == [(0, 3)]
        acked = share_fetch(1, [(0, 1, [1]), (2, 3, [2, 3])])  # ACCEPT 0-1, RELEASE 2, REJECT 3
        assert acked.responses[0].partitions[0].acknowledge_error_code == 0
        samples = scrape(broker)
    assert samples['kafka_server_sharegroupmetrics_record_acknowledgements_total{ackType="Accept"}'] == 2
    assert samples['kafka_server_sharegroupmetrics_record_acknowledgements_total{ackType="Release"}'] == 1
    assert samples['kafka_server_sharegroupmetrics_record_acknowledgements_total{ackType="Reject"}'] == 1
    assert samples['kafka_server_group_coordinator_metrics_group_count{protocol="share"}'] == 1
