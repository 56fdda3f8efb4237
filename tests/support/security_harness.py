"""A broker with every kind of listener for the security tests, its certificates made at test time
(trustme: a CA, the broker's certificate, a client certificate), and a raw client that authenticates
with SASL PLAIN before sending requests."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

from support.broker_harness import RawClient
from kafkawire import messages as m
from kafkawire.broker.config.broker_config import BrokerConfig
from kafkawire.sasl.plain import plain_message

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "eve": "eve-secret"}
SCRAM_USERS = {"scram-256": ("SCRAM-SHA-256", "s256-secret"), "scram-512": ("SCRAM-SHA-512", "s512-secret")}


@dataclass
class Certificates:
    folder: Path
    ca: Path  # the CA that signed the broker's and the client's certificates
    server: Path  # the broker's key and certificate chain
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: trusting only it, a client must refuse the broker


def make_certificates(folder: Path) -> Certificates:
    folder.mkdir(parents=True, exist_ok=True)
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.example", common_name="alice", organization_unit_name="ServiceUsers")
    paths = Certificates(folder, folder / "ca.pem", folder / "server.pem", folder / "client.pem",
                         folder / "client.key", folder / "other-ca.pem")
    ca.cert_pem.write_to_path(str(paths.ca))
    other.cert_pem.write_to_path(str(paths.other_ca))
    server.private_key_and_cert_chain_pem.write_to_path(str(paths.server))
    client.cert_chain_pems[0].write_to_path(str(paths.client_cert))
    client.private_key_pem.write_to_path(str(paths.client_key))
    return paths


def secured_config(data_dir: Path, certs: Certificates, *, authorizer: bool = False, **properties: str) -> BrokerConfig:
    """A broker with PLAINTEXT, SASL_PLAINTEXT, SASL_SSL and SSL listeners (the SSL one, MTLS, requires a
    client certificate) and every mechanism enabled."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            + " ".join(f'user_{name}="{password}"' for name, password in PLAIN_USERS.items()) + ";")
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
                     "SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                                          "SSL:SSL,MTLS:SSL",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "sasl.jaas.config": jaas,
        "ssl.keystore.location": str(certs.server), "ssl.truststore.location": str(certs.ca),
        "listener.name.mtls.ssl.client.auth": "required",
        **properties,
    }
    if authorizer:
        settings.update({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                         "super.users": "User:admin"})
    scram = [f"{mechanism}=[name={user},password={password}]" for user, (mechanism, password) in SCRAM_USERS.items()]
    return BrokerConfig.from_properties(settings, data_dir=data_dir, port=0, group_initial_rebalance_delay_ms=0,
                                        scram_credentials=scram)


def plain_client(port: int, user: str, password: str | None = None) -> RawClient:
    """A RawClient authenticated with SASL PLAIN (SaslHandshake v1, SaslAuthenticate v2)."""
    client = RawClient(port, client_id=f"raw-{user}")
    handshake = client.request(m.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert handshake.error_code == 0, handshake
    answer = client.request(m.SaslAuthenticateRequest(
        auth_bytes=plain_message(user, password if password is not None else PLAIN_USERS[user])), 2)
    assert answer.error_code == 0, answer
    return client
