"""Signed OAUTHBEARER tokens on the broker, checked against a JSON Web Key Set served over real HTTPS on
loopback (a trustme CA, which the broker trusts through its OAUTHBEARER JAAS entry's
``ssl.truststore.location``, as Kafka takes the JWKS endpoint's trust from that entry's ``ssl.*`` options).
Keys are made at test time; tokens are signed with PyJWT; the clients are confluent-kafka (an ``oauth_cb``
returning the signed token) and a raw client that reads the exact error codes.
"""
from __future__ import annotations

import http.server
import json
import logging
import ssl
import threading
import time
from pathlib import Path

import jwt
import pytest
import trustme
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from support.broker_harness import BrokerThread, RawClient
from kafkawire import messages as m
from kafkawire.broker import Broker
from kafkawire.broker.config.broker_config import BrokerConfig
from kafkawire.error_codes import ErrorCode
from kafkawire.sasl.oauthbearer import client_initial_response, unsecured_token

ISSUER, AUDIENCE = "https://issuer.example", "kafka"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class SigningKey:
    """A key pair of the identity provider: its public half goes in the key set, its private half signs."""

    def __init__(self, kid: str, algorithm: str):
        self.kid, self.algorithm = kid, algorithm
        if algorithm.startswith("RS"):
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        else:
            self.private = ec.generate_private_key(ec.SECP256R1())
            public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(self.private.public_key()))
        self.jwk = {**public, "kid": kid, "alg": algorithm, "use": "sig"}

    def token(self, subject: str = "alice", **claims) -> str:
        now = time.time()
        payload = {"sub": subject, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now), "exp": int(now) + 600,
                   "scope": "kafka", **claims}
        return jwt.encode({k: v for k, v in payload.items() if v is not None}, self.private,
                          algorithm=self.algorithm, headers={"kid": self.kid})


class JwksServer:
    """An HTTPS JWKS endpoint on loopback: serves ``keys``, counts its GETs, fails (HTTP 500) on command."""

    def __init__(self, folder: Path):
        ca = trustme.CA()
        self.ca_path = folder / "jwks-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_path))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
        self.keys: list[dict] = []
        self.fetches = 0
        self.failing = False
        self.hanging = False  # answers nothing until closed
        self._released = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.fetches += 1
                if server.hanging:
                    server._released.wait(60)
                body = b"down" if server.failing else json.dumps({"keys": server.keys}).encode()
                self.send_response(500 if server.failing else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://localhost:{self.httpd.server_address[1]}/.well-known/jwks.json"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._released.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def oauth_config(folder: Path, jwks_url: str, ca_path: Path, **extra: str) -> BrokerConfig:
    """SIGNED checks signed tokens against the key set; UNSECURED takes Kafka's unsecured tokens."""
    settings = {
        "listeners": "SIGNED://127.0.0.1:0,UNSECURED://127.0.0.1:0",
        "listener.security.protocol.map": "SIGNED:SASL_PLAINTEXT,UNSECURED:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.signed.oauthbearer.sasl.jaas.config":
            f'{OAUTH_MODULE} required ssl.truststore.location="{ca_path}";',
        "listener.name.unsecured.oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE} required;",
        "listener.name.signed.sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        "listener.name.signed.oauthbearer.sasl.oauthbearer.expected.audience": f"other,{AUDIENCE}",
        "listener.name.signed.sasl.oauthbearer.expected.issuer": ISSUER,
        "listener.name.signed.sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "500",
        **extra,
    }
    return BrokerConfig.from_properties(settings, data_dir=folder, port=0, group_initial_rebalance_delay_ms=0)


@pytest.fixture(scope="module")
def keys():
    return {"rsa": SigningKey("rsa-1", "RS256"), "ec": SigningKey("ec-1", "ES256")}


@pytest.fixture()
def jwks(tmp_path, keys):
    server = JwksServer(tmp_path)
    server.keys = [keys["rsa"].jwk]
    yield server
    server.close()


@pytest.fixture()
def broker(tmp_path, jwks, caplog):
    caplog.set_level(logging.INFO, logger="kafkawire")
    with BrokerThread(config=oauth_config(tmp_path / "data", jwks.url, jwks.ca_path)) as running:
        yield running


def _authenticate(broker: BrokerThread, token: str, listener: str = "SIGNED"):
    """SaslHandshake and SaslAuthenticate with ``token``: the final SaslAuthenticate answer."""
    port = int(broker.broker.bootstrap_for(listener).rsplit(":", 1)[1])
    with RawClient(port) as client:
        assert client.request(m.SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        answer = client.request(m.SaslAuthenticateRequest(auth_bytes=client_initial_response(token)), 2)
        if answer.error_code == 0 and answer.auth_bytes:  # an error challenge: the client acknowledges it
            assert b"invalid_token" in bytes(answer.auth_bytes)
            answer = client.request(m.SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
        return answer


def _confluent_error(broker: BrokerThread, token: str, within: float = 10.0):
    """confluent-kafka's first error with an oauth_cb giving ``token`` (None if it lists topics instead)."""
    from confluent_kafka.admin import AdminClient
    errors = []
    admin = AdminClient({"bootstrap.servers": broker.broker.bootstrap_for("SIGNED"),
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                         "sasl.oauthbearer.method": "default", "error_cb": errors.append,
                         "oauth_cb": lambda config: (token, time.time() + 600)})
    deadline = time.monotonic() + within
    while not errors and time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=0.5)
            return None
        except Exception:
            admin.poll(0.05)
    return errors[0] if errors else "neither an error nor an answer"


def test_kafkawire_client_authenticates_with_a_signed_token(broker, keys):
    from kafkawire.client import AdminClient
    settings = {"bootstrap.servers": broker.broker.bootstrap_for("SIGNED"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda config: (keys["rsa"].token(), time.time() + 600)}
    with AdminClient(settings) as admin:
        assert admin.list_topics().result(timeout=10) is not None


def test_confluent_kafka_authenticates_with_a_signed_token_and_refused_ones_fail(broker, keys):
    from confluent_kafka import KafkaError
    assert _confluent_error(broker, keys["rsa"].token()) is None
    error = _confluent_error(broker, keys["rsa"].token(aud="someone-else"))
    assert error.code() == KafkaError._AUTHENTICATION and "audience" in error.str().lower(), error


@pytest.mark.parametrize("claims,why", [
    ({}, None),
    ({"aud": ["x", AUDIENCE]}, None),
    ({"aud": "someone-else"}, "audience"),
    ({"aud": None}, "aud"),
    ({"iss": "https://elsewhere.example"}, "issuer"),
    ({"exp": int(time.time()) - 120}, "expired"),  # beyond the default 30 s of clock skew
    ({"iat": None}, "iat"),
    ({"sub": None}, "sub"),
], ids=["valid", "one-of-the-audiences", "wrong-audience", "no-audience", "wrong-issuer", "expired", "no-iat",
        "no-subject"])
def test_claims_are_checked(broker, keys, claims, why):
    answer = _authenticate(broker, keys["rsa"].token(**claims))
    if why is None:
        assert answer.error_code == ErrorCode.NONE and answer.session_lifetime_ms > 500_000, answer
    else:
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, answer
        assert why in answer.error_message.lower(), answer.error_message


def test_forged_and_unsigned_tokens_are_refused(broker, keys):
    forger = SigningKey("rsa-1", "RS256")  # claims the set's key id with another private key
    answer = _authenticate(broker, forger.token())
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and "signature" in answer.error_message
    genuine = keys["rsa"].token().split(".")
    tampered = jwt.utils.base64url_encode(json.dumps({"sub": "admin", "iss": ISSUER, "aud": AUDIENCE,
                                                      "iat": int(time.time()), "exp": int(time.time()) + 60}).encode())
    answer = _authenticate(broker, f"{genuine[0]}.{tampered.decode()}.{genuine[2]}")
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and "signature" in answer.error_message
    answer = _authenticate(broker, unsecured_token("admin", 60, issued_at_s=time.time()))
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and "'none'" in answer.error_message
    shared_secret = jwt.encode({"sub": "admin", "iss": ISSUER, "aud": AUDIENCE, "iat": int(time.time()),
                                "exp": int(time.time()) + 60}, "a-shared-secret-of-32-bytes-long", algorithm="HS256", headers={"kid": "rsa-1"})
    answer = _authenticate(broker, shared_secret)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and "HS256" in answer.error_message


def test_the_key_set_is_fetched_over_https_once_for_many_authentications(broker, jwks, keys):
    assert jwks.fetches == 1  # at start, over HTTPS (the server speaks nothing else)
    for _ in range(20):
        assert _authenticate(broker, keys["rsa"].token()).error_code == ErrorCode.NONE
    assert _confluent_error(broker, keys["rsa"].token()) is None
    assert jwks.fetches == 1


def test_a_rotated_key_is_found_by_reading_the_set_again_at_most_once_a_minute_per_key_id(broker, jwks, keys):
    rotated = keys["ec"]
    jwks.keys = [rotated.jwk]  # the provider rotates: the old key is gone, a new kid signs
    answer = _authenticate(broker, rotated.token(subject="bob"))
    assert answer.error_code == ErrorCode.NONE, answer
    assert jwks.fetches == 2
    assert _confluent_error(broker, rotated.token(subject="bob")) is None
    unknown = SigningKey("never-published", "ES256")
    for _ in range(5):  # an unknown kid reads the set once, then not again for a minute
        answer = _authenticate(broker, unknown.token())
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and "never-published" in answer.error_message
    assert jwks.fetches == 3
    answer = _authenticate(broker, keys["rsa"].token())  # the set read last has no rsa-1 any more
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_the_key_set_is_read_again_every_refresh_ms(tmp_path, jwks, keys):
    config = oauth_config(tmp_path / "data", jwks.url, jwks.ca_path,
                          **{"listener.name.signed.sasl.oauthbearer.jwks.endpoint.refresh.ms": "100"})
    with BrokerThread(config=config) as broker:
        jwks.keys = [keys["ec"].jwk]
        deadline = time.monotonic() + 30
        while jwks.fetches < 3 and time.monotonic() < deadline:  # read twice more, with no token asking
            time.sleep(0.02)
        assert jwks.fetches >= 3
        assert _authenticate(broker, keys["ec"].token()).error_code == ErrorCode.NONE
        assert _authenticate(broker, keys["rsa"].token()).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_a_failing_key_set_endpoint_refuses_unknown_keys_and_keeps_the_known_ones(broker, jwks, keys):
    jwks.failing = True
    started = time.monotonic()
    answer = _authenticate(broker, keys["ec"].token())  # a new kid: the read fails, with retries
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, answer
    assert "last read failed" in answer.error_message and "500" in answer.error_message
    assert time.monotonic() - started < 10  # retry.backoff.max.ms is 500 ms: no hang
    assert jwks.fetches > 2  # retried
    assert _authenticate(broker, keys["rsa"].token()).error_code == ErrorCode.NONE  # the set read before is kept
    jwks.failing, jwks.hanging = False, True  # an endpoint that never answers: each attempt times out
    started = time.monotonic()
    answer = _authenticate(broker, SigningKey("ec-2", "ES256").token())
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and "timed out" in answer.error_message, answer
    assert time.monotonic() - started < 10


def test_the_unsecured_listener_is_warned_of_and_still_takes_unsecured_tokens(broker, caplog):
    warnings = [r.getMessage() for r in caplog.get_records("setup")  # logged as the broker started
                if r.levelno == logging.WARNING and "unsecured" in r.getMessage()]
    assert len(warnings) == 1 and "UNSECURED" in warnings[0], warnings
    answer = _authenticate(broker, unsecured_token("carol", 60, issued_at_s=time.time()), listener="UNSECURED")
    assert answer.error_code == ErrorCode.NONE


def test_a_key_set_in_a_file_url(tmp_path, keys):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [keys["ec"].jwk]}))
    with BrokerThread(config=oauth_config(tmp_path / "data", path.as_uri(), tmp_path / "unused.pem")) as broker:
        assert _authenticate(broker, keys["ec"].token()).error_code == ErrorCode.NONE
        path.write_text(json.dumps({"keys": [keys["ec"].jwk, keys["rsa"].jwk]}))  # a key added to the file
        assert _authenticate(broker, keys["rsa"].token()).error_code == ErrorCode.NONE


def test_a_broker_whose_key_set_cannot_be_read_does_not_start(tmp_path, jwks):
    import asyncio
    jwks.failing = True
    broker = Broker(oauth_config(tmp_path / "data", jwks.url, jwks.ca_path))

    async def start() -> None:
        try:
            await broker.start()
        finally:
            await broker.close()
    with pytest.raises(ValueError, match="cannot be read"):
        asyncio.run(start())
    other_ca = trustme.CA()  # and one that does not trust the endpoint's certificate
    other_ca.cert_pem.write_to_path(str(tmp_path / "other.pem"))
    jwks.failing = False
    broker = Broker(oauth_config(tmp_path / "data2", jwks.url, tmp_path / "other.pem"))
    with pytest.raises(ValueError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(start())


def test_without_pyjwt_a_listener_for_signed_tokens_refuses_to_start_in_one_line(tmp_path):
    """The base install has no PyJWT (the oauthbearer extra brings it): the broker says what to install."""
    import subprocess
    import sys
    properties = tmp_path / "server.properties"
    properties.write_text("\n".join([
        "listeners=SIGNED://127.0.0.1:0", "listener.security.protocol.map=SIGNED:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=OAUTHBEARER", f"sasl.jaas.config={OAUTH_MODULE} required;",
        "sasl.oauthbearer.jwks.endpoint.url=https://localhost:1/jwks.json", ""]))
    without_pyjwt = "import sys; sys.modules['jwt'] = None; from kafkawire.cli import main; sys.exit(main())"
    result = subprocess.run([sys.executable, "-c", without_pyjwt, "broker", "--config", str(properties),
                             "--data-dir", str(tmp_path / "data")], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'kafkawire[oauthbearer]'" in lines[0], result.stderr
