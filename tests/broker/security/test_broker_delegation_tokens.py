"""Delegation tokens (KIP-48, issue 35): created, renewed, expired and described with kafkawire's
AdminClient, checked as Kafka checks them (owners, renewers, CREATE_TOKENS / DESCRIBE_TOKENS on USER,
DESCRIBE on DELEGATION_TOKEN, no token requests on PLAINTEXT or token-authenticated connections), and
used to authenticate: kafka-python's SCRAM (with the ``tokenauth=true`` extension added through its
mechanism registry, as it has no option for it) and kafkawire's own clients."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import TopicAuthorizationFailedError
from kafka.net import sasl as kafka_python_sasl
from kafka.net.sasl.scram import SaslMechanismScram, ScramClient

from support.broker_harness import RawClient
from support.fake_clock import FakeClock
from kafkawire import messages as m
from kafkawire.broker.apis.delegation_tokens import DelegationTokenApis
from kafkawire.broker.apis.state import RequestContext
from kafkawire.broker.background import BrokerThread
from kafkawire.broker.config.broker_config import BrokerConfig
from kafkawire.broker.delegation_tokens import DelegationTokens
from kafkawire.broker.network.listeners import Listener
from kafkawire.client.admin import (
    AclBinding, AclOperation, AclPermissionType, AdminClient, ResourcePatternType, ResourceType,
)
from kafkawire.client.errors import AuthenticationException, KafkaError
from kafkawire.error_codes import ErrorCode
from kafkawire.sasl.scram import MECHANISMS as SCRAM

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
SECRET = "the-delegation-token-secret"


def _config(data_dir, **properties: str) -> BrokerConfig:
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{name}="{password}"' for name, password in USERS.items()) + ";")
    return BrokerConfig.from_properties({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin", "delegation.token.secret.key": SECRET, **properties},
        data_dir=data_dir, port=0, group_initial_rebalance_delay_ms=0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerThread(_config(tmp_path_factory.mktemp("tokens"))) as running:
        with _admin(running, "admin") as admin:  # alice may use the tok- topics and groups
            bindings = [AclBinding(kind, "tok-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.ALL,
                                   AclPermissionType.ALLOW) for kind in (ResourceType.TOPIC, ResourceType.GROUP)]
            for future in admin.create_acls(bindings).values():
                future.result(30)
        yield running


def _sasl(broker) -> str:
    return broker.broker.bootstrap_for("SASL_PLAINTEXT")


def _admin(broker, user: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": _sasl(broker), "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]})


def _code(future) -> int:
    with pytest.raises(KafkaError) as raised:
        future.result(30)
    return raised.value.code


class _TokenScramClient(ScramClient):
    """kafka-python's SCRAM client with KIP-48's extension in its client-first message."""

    def first_message(self):
        bare = b"n=" + self.user + b",r=" + self.nonce + b",tokenauth=true"
        self.auth_message += bare
        return b"n,," + bare


class _TokenScram(SaslMechanismScram):
    def __init__(self, **config):
        super().__init__(**config)
        self._scram_client = _TokenScramClient(config["sasl_plain_username"], config["sasl_plain_password"],
                                               config["sasl_mechanism"])


@pytest.fixture
def kafka_python_token_scram():
    """SCRAM-SHA-512 in kafka-python's registry replaced by the token-authenticating one for the test."""
    original = kafka_python_sasl.get_sasl_mechanism("SCRAM-SHA-512")
    kafka_python_sasl.register_sasl_mechanism("SCRAM-SHA-512", _TokenScram, overwrite=True)
    yield
    kafka_python_sasl.register_sasl_mechanism("SCRAM-SHA-512", original, overwrite=True)


def _token_settings(token) -> dict:
    return {"sasl_mechanism": "SCRAM-SHA-512", "security_protocol": "SASL_PLAINTEXT",
            "sasl_plain_username": token.token_id, "sasl_plain_password": token.hmac_base64}


def test_kafka_python_authenticates_with_a_token_as_its_owner(broker, kafka_python_token_scram):
    topic = f"tok-{uuid.uuid4().hex[:8]}"
    with _admin(broker, "alice") as admin:
        token = admin.create_delegation_token().result(30)
    assert token.owner == token.token_requester == "User:alice" and len(token.hmac) == 64  # HMAC-SHA512
    producer = KafkaProducer(bootstrap_servers=_sasl(broker), **_token_settings(token))
    producer.send(topic, b"with a token").get(30)  # alice's ACLs apply: the principal is the owner
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=_sasl(broker), auto_offset_reset="earliest",
                             group_id=f"tok-{topic}", consumer_timeout_ms=20_000, **_token_settings(token))
    assert next(consumer).value == b"with a token"
    consumer.close()
    denied = KafkaProducer(bootstrap_servers=_sasl(broker), enable_idempotence=False, max_block_ms=10_000,
                           **_token_settings(token))
    with pytest.raises(TopicAuthorizationFailedError):  # bob's topics are not alice's
        denied.send(f"bob-{topic}", b"x").get(10)
    denied.close()


def _token_admin(broker, token) -> AdminClient:
    """kafkawire's AdminClient authenticated with the token (ScramLoginModule's tokenauth option)."""
    return AdminClient({"bootstrap.servers": _sasl(broker), "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "SCRAM-SHA-256", "default.api.timeout.ms": 5000, "request.timeout.ms": 5000,
                        "sasl.jaas.config":
                        f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                        f'username="{token.token_id}" password="{token.hmac_base64}" tokenauth="true";'})


def _authenticates(broker, token) -> bool:
    with _token_admin(broker, token) as admin:
        try:
            admin.describe_cluster().result(10)
        except AuthenticationException:
            return False
        return True


def test_renewal_extends_expiry_and_expiry_ends_authentication(broker):
    with _admin(broker, "alice") as alice, _admin(broker, "bob") as bob:
        token = alice.create_delegation_token(["User:bob"], max_lifetime_ms=3_600_000).result(30)
        assert token.max_timestamp == token.issue_timestamp + 3_600_000  # under the broker's 7 days
        assert _authenticates(broker, token)
        renewed = bob.renew_delegation_token(token.hmac, renew_time_period_ms=600_000).result(30)  # a renewer
        assert token.issue_timestamp + 600_000 <= renewed <= token.max_timestamp
        with _admin(broker, "carol") as carol:  # neither owner nor renewer
            assert _code(carol.renew_delegation_token(token.hmac)) == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        expiry = alice.expire_delegation_token(token.hmac, expiry_time_period_ms=0).result(30)  # expires now
        while int(time.time() * 1000) <= expiry:  # (a token expires once its expiry has passed)
            time.sleep(0.005)
        assert _code(bob.renew_delegation_token(token.hmac)) == ErrorCode.DELEGATION_TOKEN_EXPIRED
        assert not _authenticates(broker, token)
        other = alice.create_delegation_token().result(30)
        assert alice.expire_delegation_token(other.hmac).result(30) > 0  # -1: removed at once
        assert _code(alice.renew_delegation_token(other.hmac)) == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_owners_requesters_and_acls(broker):
    with _admin(broker, "alice") as alice, _admin(broker, "bob") as bob, _admin(broker, "admin") as admin:
        assert _code(alice.create_delegation_token(owner="User:bob")) == \
            ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        assert _code(alice.create_delegation_token(["Group:x"])) == ErrorCode.INVALID_PRINCIPAL_TYPE
        mine = alice.create_delegation_token().result(30)
        assert mine.token_id not in {t.token_id for t in bob.describe_delegation_token().result(30)}
        # KIP-373: carol may create bob's tokens with CREATE_TOKENS on the USER User:bob
        grant = AclBinding(ResourceType.USER, "User:bob", ResourcePatternType.LITERAL, "User:carol", "*",
                           AclOperation.CREATE_TOKENS, AclPermissionType.ALLOW)
        admin.create_acls([grant])[grant].result(30)
        with _admin(broker, "carol") as carol:
            for_bob = carol.create_delegation_token(owner="User:bob").result(30)
            assert (for_bob.owner, for_bob.token_requester) == ("User:bob", "User:carol")
            assert {t.token_id for t in carol.describe_delegation_token().result(30)} >= {for_bob.token_id}
        of_bob = bob.describe_delegation_token(["User:bob"]).result(30)  # owned, or renewed, by bob
        assert all(t.owner == "User:bob" or "User:bob" in t.renewers for t in of_bob)
        assert [t.hmac for t in of_bob if t.owner == "User:bob"] == [for_bob.hmac]
        assert bob.describe_delegation_token([]).result(30) == []
        # bob sees alice's token once allowed DESCRIBE on it, or DESCRIBE_TOKENS on User:alice
        seen = AclBinding(ResourceType.DELEGATION_TOKEN, mine.token_id, ResourcePatternType.LITERAL, "User:bob",
                          "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
        admin.create_acls([seen])[seen].result(30)
        assert mine.token_id in {t.token_id for t in bob.describe_delegation_token(["User:alice"]).result(30)}
        assert {t.token_id for t in admin.describe_delegation_token(["User:alice"]).result(30)} >= {mine.token_id}
        assert for_bob.token_id not in {t.token_id for t in alice.describe_delegation_token().result(30)}
        owners = AclBinding(ResourceType.USER, "User:bob", ResourcePatternType.LITERAL, "User:alice", "*",
                            AclOperation.DESCRIBE_TOKENS, AclPermissionType.ALLOW)
        admin.create_acls([owners])[owners].result(30)
        assert for_bob.token_id in {t.token_id for t in alice.describe_delegation_token().result(30)}


def test_no_token_requests_on_plaintext_or_with_a_token(broker):
    with RawClient(broker.broker.ports["PLAINTEXT"]) as client:
        response = client.request(m.CreateDelegationTokenRequest(renewers=[]), 3)
        assert response.error_code == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert (response.principal_type, response.principal_name) == ("User", "ANONYMOUS")
        assert client.request(m.DescribeDelegationTokenRequest(owners=None), 3).error_code == \
            ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    with _admin(broker, "alice") as alice:
        token = alice.create_delegation_token().result(30)
    with _token_admin(broker, token) as as_token:
        assert _code(as_token.create_delegation_token()) == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        assert _code(as_token.describe_delegation_token()) == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def test_tokens_are_persisted_and_the_expired_swept(tmp_path):
    config = _config(tmp_path, **{"delegation.token.expiry.check.interval.ms": "50"})
    with BrokerThread(config) as running, _admin(running, "alice") as alice:
        kept = alice.create_delegation_token().result(30)
        brief = alice.create_delegation_token(max_lifetime_ms=200).result(30)
        deadline = time.monotonic() + 20  # swept once past its max lifetime
        while brief.token_id in {t.token_id for t in alice.describe_delegation_token().result(30)}:
            assert time.monotonic() < deadline, "the expired token was not swept"
            time.sleep(0.05)
    with BrokerThread(_config(tmp_path)) as restarted, _admin(restarted, "alice") as alice:
        (found,) = alice.describe_delegation_token().result(30)
        assert (found.token_id, found.hmac, found.expiry_timestamp) == (kept.token_id, kept.hmac, kept.expiry_timestamp)
        assert _authenticates(restarted, kept)


def test_tokens_are_disabled_without_a_secret_key(broker):
    context = type("Context", (), {"may_manage_tokens": True, "principal": "User:alice"})()
    apis = DelegationTokenApis(broker.broker.handlers.state, DelegationTokens(None, None, 1, 1))
    for call, request in ((apis.create_delegation_token, m.CreateDelegationTokenRequest(renewers=[])),
                          (apis.renew_delegation_token, m.RenewDelegationTokenRequest(hmac=b"x")),
                          (apis.expire_delegation_token, m.ExpireDelegationTokenRequest(hmac=b"x")),
                          (apis.describe_delegation_token, m.DescribeDelegationTokenRequest(owners=None))):
        assert asyncio.run(call(request, 2, context)).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_lifetimes_renewals_and_the_sweep_follow_kafkas_rules(tmp_path):
    clock = FakeClock(1_000.0)  # seconds
    tokens = DelegationTokens(tmp_path / "tokens.json", SECRET, max_lifetime_ms=10_000, expiry_time_ms=4_000,
                              clock=clock)
    token = tokens.create("User:alice", "User:alice", ["User:bob"], max_lifetime_ms=50_000)  # capped at 10 s
    assert (token.issue_ms, token.expiry_ms, token.max_ms) == (1_000_000, 1_004_000, 1_010_000)
    token_hmac = hmac.new(SECRET.encode(), token.token_id.encode(), hashlib.sha512).digest()
    assert tokens.hmac(token.token_id) == token_hmac
    clock.now += 3
    assert tokens.renew(token_hmac, "User:bob", -1) == (0, 1_007_000)  # -1: delegation.token.expiry.time.ms
    clock.now += 3
    assert tokens.renew(token_hmac, "User:bob", 60_000) == (0, 1_010_000)  # never past the max lifetime
    assert tokens.renew(token_hmac, "User:carol", 1) == (ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH, -1)
    reloaded = DelegationTokens(tmp_path / "tokens.json", SECRET, 10_000, 4_000, clock=clock)
    assert reloaded.tokens() == tokens.tokens()
    assert reloaded.authenticating(token.token_id, SCRAM["SCRAM-SHA-512"]) is not None
    clock.now = 1_010.001
    assert reloaded.authenticating(token.token_id, SCRAM["SCRAM-SHA-512"]) is None  # expired: no login
    assert tokens.expire(token_hmac, "User:alice", -1) == (ErrorCode.DELEGATION_TOKEN_EXPIRED, -1)
    assert tokens.sweep() == 1 and tokens.tokens() == []
    assert tokens.renew(token_hmac, "User:alice", -1) == (ErrorCode.DELEGATION_TOKEN_NOT_FOUND, -1)


def test_which_connections_may_manage_tokens():
    sasl, tls = (Listener(name, name, "127.0.0.1", 0, "127.0.0.1") for name in ("SASL_SSL", "SSL"))
    plaintext = Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0, "127.0.0.1")

    def context(listener, principal="User:alice", token=False) -> RequestContext:
        return RequestContext(listener, 0, principal, "127.0.0.1", "c", token_authenticated=token)
    assert context(sasl).may_manage_tokens and context(tls, "User:CN=alice").may_manage_tokens  # 2-way TLS
    assert not context(tls, "User:ANONYMOUS").may_manage_tokens  # 1-way TLS
    assert not context(plaintext, "User:ANONYMOUS").may_manage_tokens
    assert not context(sasl, token=True).may_manage_tokens
