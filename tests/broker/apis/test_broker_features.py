"""UpdateFeatures and the finalized features of ApiVersions (issue 35): kafka-python 3.0's
describe_features/update_features, Kafka's refusals (FeatureControlManager) at the wire level, the
transaction.version level applied to the served versions live and kept across a restart."""
from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient
from kafka.errors import InvalidUpdateVersionError

from kafkawire import messages as m
from kafkawire.broker.cluster import ClusterThread
from kafkawire.messages import ApiKey
from support.broker_harness import BrokerThread, RawClient

TIMEOUT_S = 15
UPGRADE, SAFE, UNSAFE = 1, 2, 3
FAILED = "The update failed for all features since the following feature had an error: "
SUPPORTED = {"metadata.version": (7, 30), "transaction.version": (0, 2), "group.version": (1, 1),
             "share.version": (1, 1)}
# the first version of each API that needs transaction.version 2 (KIP-890 part 2)
KIP_890_VERSIONS = {ApiKey.PRODUCE: 12, ApiKey.END_TXN: 5, ApiKey.TXN_OFFSET_COMMIT: 5}
BEFORE_KIP_890 = {key: first - 1 for key, first in KIP_890_VERSIONS.items()}


@pytest.fixture
def broker(tmp_path):
    with BrokerThread(data_dir=tmp_path) as running:
        yield running


def _admin(broker) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.port}", request_timeout_ms=TIMEOUT_S * 1000)


def _update(client: RawClient, version: int, *rows: tuple[str, int, int],
            validate_only: bool = False) -> m.UpdateFeaturesResponse:
    """UpdateFeatures of (feature, level, upgrade type) rows; v0 has allow_downgrade for a downgrade type."""
    Key = m.UpdateFeaturesRequest.FeatureUpdateKey
    keys = [Key(feature=name, max_version_level=level, allow_downgrade=kind != UPGRADE) if version == 0
            else Key(feature=name, max_version_level=level, upgrade_type=kind) for name, level, kind in rows]
    return client.request(m.UpdateFeaturesRequest(validate_only=validate_only, feature_updates=keys), version)


def _finalized(client: RawClient) -> tuple[dict[str, int], int, dict[int, int]]:
    """(finalized levels, epoch, newest served version of the KIP-890 part 2 APIs)."""
    answer = client.request(m.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    newest = {key.api_key: key.max_version for key in answer.api_keys if key.api_key in KIP_890_VERSIONS}
    return ({f.name: f.max_version_level for f in answer.finalized_features}, answer.finalized_features_epoch,
            newest)


def test_kafka_python_describes_and_updates_features(broker):
    admin = _admin(broker)
    try:
        described = admin.describe_features()
        assert {name: entry["supported"] for name, entry in described.items()} == SUPPORTED
        assert {name: entry["finalized"] for name, entry in described.items()} == {
            name: (high, high) for name, (_, high) in SUPPORTED.items()}
        assert described["transaction.version"]["finalized_epoch"] == 0
        assert admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)}, validate_only=True) == {
            "transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (2, 2)
        assert admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)}) == {"transaction.version": "OK"}
        after = admin.describe_features()["transaction.version"]
        assert (after["finalized"], after["finalized_epoch"]) == ((1, 1), 1)
        with pytest.raises(InvalidUpdateVersionError):
            admin.update_features({"group.version": ("SAFE_DOWNGRADE", 0)})
        assert admin.describe_features()["group.version"]["finalized"] == (1, 1)
    finally:
        admin.close()


def test_transaction_version_caps_the_served_versions_live(broker):
    with RawClient(broker.port) as client:
        served = _finalized(client)[2]
        assert all(served[key] >= first for key, first in KIP_890_VERSIONS.items())
        assert _update(client, 2, ("transaction.version", 1, SAFE)).error_code == 0
        levels, epoch, newest = _finalized(client)
        assert (levels["transaction.version"], epoch) == (1, 1)
        assert newest == BEFORE_KIP_890
        # 0 removes the feature from the finalized ones
        assert _update(client, 2, ("transaction.version", 0, UNSAFE)).error_code == 0
        levels, epoch, newest = _finalized(client)
        assert "transaction.version" not in levels and epoch == 2
        assert _update(client, 1, ("transaction.version", 2, UPGRADE)).error_code == 0
        assert _finalized(client)[::2] == ({**levels, "transaction.version": 2}, served)


def test_a_confluent_transaction_commits_after_a_downgrade(broker):
    from confluent_kafka import Producer
    with RawClient(broker.port) as client:
        assert _update(client, 2, ("transaction.version", 1, SAFE)).error_code == 0
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "transactional.id": "features-tx"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("features-topic", b"value")
    producer.commit_transaction(TIMEOUT_S)


def test_the_finalized_levels_survive_a_restart(tmp_path):
    with BrokerThread(data_dir=tmp_path) as broker, RawClient(broker.port) as client:
        assert _update(client, 0, ("transaction.version", 1, SAFE)).error_code == 0
    with BrokerThread(data_dir=tmp_path) as broker, RawClient(broker.port) as client:
        levels, epoch, newest = _finalized(client)
    assert (levels["transaction.version"], epoch) == (1, 1)
    assert newest == BEFORE_KIP_890


def _invalid(name: str, level: int, reason: str) -> str:
    return f"{FAILED}Invalid update version {level} for feature {name}. {reason}"


REFUSALS = [
    ((("streams.version", 1, UPGRADE),), _invalid("streams.version", 1,
                                                        "Local controller 0 does not support this feature.")),
    ((("transaction.version", 3, UPGRADE),), _invalid("transaction.version", 3,
                                                            "Local controller 0 only supports versions 0-2")),
    ((("share.version", 0, SAFE),), _invalid("share.version", 0, "Local controller 0 only supports versions 1-1")),
    ((("transaction.version", -1, SAFE),), _invalid("transaction.version", -1,
                                                          "A feature version cannot be less than 0.")),
    ((("transaction.version", 1, 7),), _invalid("transaction.version", 1,
                                                      "The controller does not support the given upgrade type.")),
    ((("transaction.version", 1, UPGRADE),), _invalid(
        "transaction.version", 1, "Can't downgrade the version of this feature without setting the upgrade type to "
                                  "either safe or unsafe downgrade.")),
    ((("metadata.version", 29, SAFE),), FAILED + "Invalid metadata.version 29. Refusing to perform the requested "
                                                 "downgrade because it might delete metadata information."),
    ((("metadata.version", 7, UNSAFE),), FAILED + "Invalid metadata.version 7. Unsafe metadata downgrade is "
                                                        "not supported in this version."),
    # one refused row fails them all: transaction.version stays at 2
    ((("transaction.version", 1, SAFE), ("metadata.version", 31, UPGRADE)),
     _invalid("metadata.version", 31, "Local controller 0 only supports versions 7-30")),
]


@pytest.mark.parametrize("version", [1, 2])
def test_refusals_as_kafka_answers_them(broker, version):
    with RawClient(broker.port) as client:
        for rows, message in REFUSALS:
            answer = _update(client, version, *rows)
            assert (answer.error_code, answer.error_message, list(answer.results or [])) == (95, message, [])
        assert _finalized(client)[:2] == ({name: high for name, (_, high) in SUPPORTED.items()}, 0)


def test_a_downgrade_type_cannot_upgrade_and_v0_reads_allow_downgrade(broker):
    with RawClient(broker.port) as client:
        assert _update(client, 1, ("transaction.version", 1, SAFE)).error_code == 0
        answer = _update(client, 1, ("transaction.version", 2, SAFE))
        assert (answer.error_code, answer.error_message) == (95, _invalid(
            "transaction.version", 2, "Can't downgrade to a newer version."))
        # v0 has no upgrade type: allow_downgrade set is a safe downgrade, unset an upgrade
        refused = _update(client, 0, ("transaction.version", 0, UPGRADE))
        assert refused.error_code == 95
        done = _update(client, 0, ("transaction.version", 0, SAFE), ("group.version", 1, UPGRADE))
        assert (done.error_code, done.error_message) == (0, None)
        assert [(r.feature, r.error_code, r.error_message) for r in done.results] == [
            ("transaction.version", 0, "NONE"), ("group.version", 0, "NONE")]
        assert "transaction.version" not in _finalized(client)[0]


def test_validate_only_changes_nothing(broker):
    with RawClient(broker.port) as client:
        answer = _update(client, 2, ("transaction.version", 1, SAFE), validate_only=True)
        assert (answer.error_code, answer.error_message) == (0, None)
        assert _finalized(client)[:2] == ({name: high for name, (_, high) in SUPPORTED.items()}, 0)


def test_a_cluster_shares_its_finalized_features(tmp_path):
    with ClusterThread(brokers=2, data_dir=tmp_path) as running:
        ports = [int(running.cluster.broker(node).bootstrap_for("PLAINTEXT").rsplit(":", 1)[1]) for node in (1, 2)]
        admin = KafkaAdminClient(bootstrap_servers=running.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
        try:
            updated = admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)})
        finally:
            admin.close()
        assert updated == {"transaction.version": "OK"}
        for port in ports:  # every node serves the level, and names the controller (node 1) when refusing
            with RawClient(port) as client:
                levels, epoch, newest = _finalized(client)
                assert (levels["transaction.version"], epoch, newest) == (1, 1, BEFORE_KIP_890)
                assert _update(client, 2, ("transaction.version", 5, UPGRADE)).error_message == _invalid(
                    "transaction.version", 5, "Local controller 1 only supports versions 0-2")
        # a node started again serves the cluster's level, and a change made while it was down
        running.call(running.cluster.stop_broker(2))
        with RawClient(ports[0]) as client:
            assert _update(client, 2, ("transaction.version", 2, UPGRADE)).error_code == 0
        running.call(running.cluster.start_broker(2))
        port = int(running.cluster.broker(2).bootstrap_for("PLAINTEXT").rsplit(":", 1)[1])
        with RawClient(port) as client:
            levels, epoch, newest = _finalized(client)
            assert (levels["transaction.version"], epoch) == (2, 2)
            assert all(newest[key] >= first for key, first in KIP_890_VERSIONS.items())
