"""Streams groups under the authorizer, as Kafka authorizes them: READ on the group and DESCRIBE on
every topic of the topology to heartbeat, CREATE (cluster or topic) for the internal topics, which
are otherwise reported missing in the status; DESCRIBE on the group for StreamsGroupDescribe."""
from __future__ import annotations

import pytest

from support.broker_harness import BrokerThread
from support.broker_wire import create_topic
from support.security_harness import make_certificates, plain_client, secured_config
from support.streams_member import StreamsMember, topology
from kafkawire import messages as m
from kafkawire.broker.security.acls import Operation as Op, PatternType as PT, Permission as P, ResourceType as RT
from kafkawire.error_codes import ErrorCode

SHAPE = topology({"id": "0", "sources": ["words"], "changelogs": ["wc-counts-changelog"]})


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    certs = make_certificates(tmp_path_factory.mktemp("streams-acl-certs"))
    config = secured_config(tmp_path_factory.mktemp("streams-acl-broker"), certs, authorizer=True)
    with BrokerThread(config=config) as running:
        running.sasl_port = int(running.broker.bootstrap_for("SASL_PLAINTEXT").rsplit(":", 1)[1])
        with plain_client(running.sasl_port, "admin") as admin:
            create_topic(admin, "words", 2)
            grants = [("alice", RT.GROUP, "wc", Op.READ), ("alice", RT.TOPIC, "words", Op.DESCRIBE),
                      ("alice", RT.TOPIC, "wc-", Op.DESCRIBE), ("bob", RT.GROUP, "wc", Op.READ),
                      ("bob", RT.TOPIC, "words", Op.DESCRIBE), ("bob", RT.TOPIC, "wc-", Op.DESCRIBE),
                      ("bob", RT.TOPIC, "wc-", Op.CREATE)]
            answer = admin.request(m.CreateAclsRequest(creations=[m.CreateAclsRequest.AclCreation(
                resource_type=kind, resource_name=name, host="*", operation=op, permission_type=P.ALLOW,
                resource_pattern_type=PT.PREFIXED if name.endswith("-") else PT.LITERAL, principal=f"User:{user}")
                for user, kind, name, op in grants]), 3)
            assert all(r.error_code == 0 for r in answer.results)
        yield running


def test_read_on_the_group_and_describe_on_its_topics_are_needed(broker):
    with plain_client(broker.sasl_port, "eve") as eve:
        answer = eve.request(StreamsMember("wc", "e", SHAPE).heartbeat(), 0)
        assert answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
        (described,) = eve.request(m.StreamsGroupDescribeRequest(group_ids=["wc"]), 0).groups
        assert described.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    with plain_client(broker.sasl_port, "alice") as alice:
        hidden = topology({"id": "0", "sources": ["words", "secret"]})
        answer = alice.request(StreamsMember("wc", "a", hidden).heartbeat(), 0)
        assert (answer.error_code, answer.error_message) == (
            ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The client is not authorized to describe topics: secret.")


def test_internal_topics_need_create(broker):
    with plain_client(broker.sasl_port, "alice") as alice:
        member = StreamsMember("wc", "a", SHAPE)
        member.received(alice.request(member.heartbeat(), 0))
        ((code, detail),) = member.status
        assert code == 3 and detail.endswith("Unauthorized to CREATE on topics wc-counts-changelog.")
        assert broker.broker.topics.get("wc-counts-changelog") is None
    with plain_client(broker.sasl_port, "bob") as bob:
        member = StreamsMember("wc", "b", SHAPE)
        member.received(bob.request(member.heartbeat(), 0))
        assert len(broker.broker.topics.get("wc-counts-changelog").partitions) == 2
        member.received(bob.request(member.heartbeat(), 0))
        assert member.status == [] and member.active
