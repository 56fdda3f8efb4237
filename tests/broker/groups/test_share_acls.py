"""Share groups under the authorizer, as Kafka authorizes them: READ on the group for
ShareGroupHeartbeat, ShareFetch and ShareAcknowledge, DESCRIBE on the topics a member subscribes to,
READ on each topic fetched or acknowledged, DESCRIBE on the group for ShareGroupDescribe."""
from __future__ import annotations

import pytest

from support.broker_harness import BrokerThread
from support.broker_wire import create_topic
from kafkawire import messages as m
from kafkawire.broker.security.acls import Operation as Op, PatternType as PT, Permission as P, ResourceType as RT
from kafkawire.error_codes import ErrorCode
from support.security_harness import make_certificates, plain_client, secured_config

GROUP, OPEN, SECRET = "share-readers", "shared", "secret"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("share-acl-certs"))
    config = secured_config(tmp_path_factory.mktemp("share-acl-broker"), certs, authorizer=True)
    with BrokerThread(config=config) as running:
        running.sasl_port = int(running.broker.bootstrap_for("SASL_PLAINTEXT").rsplit(":", 1)[1])
        with plain_client(running.sasl_port, "admin") as admin:
            create_topic(admin, OPEN, 1)
            create_topic(admin, SECRET, 1)
            grants = [(RT.GROUP, GROUP, Op.READ), (RT.TOPIC, OPEN, Op.READ)]
            answer = admin.request(m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
                resource_type=kind, resource_name=name, resource_pattern_type=PT.LITERAL, principal="User:alice",
                host="*", operation=op, permission_type=P.ALLOW) for kind, name, op in grants]), 3)
            assert [r.error_code for r in answer.results] == [0, 0]
        yield running


def _heartbeat(client, topics):
    return client.request(m.ShareGroupHeartbeatRequest(group_id=GROUP, member_id="m", member_epoch=0,
                                                       subscribed_topic_names=topics), 1)


def _fetch(broker, client, epoch=0):
    topics = [m.ShareFetchRequest.FetchTopic(topic_id=broker.broker.topics.get(name).topic_id, partitions=[
        m.ShareFetchRequest.FetchPartition(partition_index=0)]) for name in (OPEN, SECRET)]
    return client.request(m.ShareFetchRequest(group_id=GROUP, member_id="m", share_session_epoch=epoch,
                                              max_records=10, batch_size=10, topics=topics), 1)


def test_a_principal_without_read_on_the_group_is_refused(broker):
    with plain_client(broker.sasl_port, "eve") as eve:
        assert _heartbeat(eve, [OPEN]).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        assert _fetch(broker, eve).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        acknowledge = m.ShareAcknowledgeRequest(group_id=GROUP, member_id="m", share_session_epoch=1)
        assert eve.request(acknowledge, 1).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        (described,) = eve.request(m.ShareGroupDescribeRequest(group_ids=[GROUP]), 1).groups
        assert described.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED


def test_topics_need_describe_to_subscribe_and_read_to_fetch(broker):
    with plain_client(broker.sasl_port, "alice") as alice:
        assert _heartbeat(alice, [OPEN, SECRET]).error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        assert _heartbeat(alice, [OPEN]).error_code == 0  # READ implies DESCRIBE
        fetched = _fetch(broker, alice)
        assert fetched.error_code == 0
        errors = {p.error_code for t in fetched.responses for p in t.partitions}
        assert errors == {0, ErrorCode.TOPIC_AUTHORIZATION_FAILED}
