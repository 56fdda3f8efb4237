"""The settings that secure a client's connections, shared by ProducerConfig and ConsumerConfig, under the
names Kafka's clients take (Java's, and librdkafka's where Java has none):

* ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL.
* TLS: the trusted certificates in ``ssl.ca.location`` (a PEM file or a directory; Java's
  ``ssl.truststore.location`` with ``ssl.truststore.type=PEM`` is the same; neither: the system's), the
  client's own certificate for brokers that ask (``ssl.certificate.location`` and ``ssl.key.location``,
  or Java's ``ssl.keystore.location`` of type PEM holding both), ``ssl.key.password`` for an encrypted
  key, ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks that the broker's
  certificate names the host connected to; empty turns that off), ``enable.ssl.certificate.verification``
  (librdkafka's; false trusts any certificate) and ``ssl.enabled.protocols`` (TLSv1.2, TLSv1.3).
* SASL: ``sasl.mechanism`` (Kafka's default GSSAPI is refused: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
  OAUTHBEARER), the user in ``sasl.username`` and ``sasl.password`` or in Java's ``sasl.jaas.config``
  (``...PlainLoginModule required username="alice" password="alice-secret";``; a delegation token with
  ``...ScramLoginModule required username="<token id>" password="<hmac>" tokenauth="true";``), and for OAUTHBEARER a
  token callback ``oauth_cb`` (confluent-kafka's) or an unsecured development token
  (``enable.sasl.oauthbearer.unsecure.jwt=true`` with ``sasl.oauthbearer.config="principal=alice"``,
  or Java's OAuthBearerLoginModule with ``unsecuredLoginStringClaim_sub="alice"``).

Everything is checked when the config is built; a missing credential or a setting that contradicts
another is a ConfigError naming the property. Files are read when the client is made.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafkawire.sasl import MECHANISMS
from kafkawire.sasl.jaas import parse_jaas

from ..errors import ConfigError
from .properties import PropertyConfig, boolean, dotted
from .sasl_client import (
    OAuthBearerTokens, OAuthCallback, PlainExchange, SaslExchange, ScramExchange, UnsecuredTokenSettings,
)

__all__ = ["SecurityConfig", "SECURITY_PROTOCOLS", "TLS_VERSIONS"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
_LOGIN_MODULES = {"PLAIN": "PlainLoginModule", "SCRAM-SHA-256": "ScramLoginModule",
                  "SCRAM-SHA-512": "ScramLoginModule", "OAUTHBEARER": "OAuthBearerLoginModule"}
_OPTIONAL_TEXT = ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location", "ssl_key_password",
                  "ssl_truststore_location", "ssl_keystore_location", "sasl_username", "sasl_password",
                  "sasl_jaas_config", "sasl_oauthbearer_config")


@dataclass(frozen=True)
class SecurityConfig(PropertyConfig):
    """The security settings (see the module docstring); secrets are left out of the repr."""

    security_protocol: str = "PLAINTEXT"
    ssl_ca_location: str | None = None
    ssl_truststore_location: str | None = None
    ssl_truststore_type: str = "PEM"
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_keystore_location: str | None = None
    ssl_keystore_type: str = "PEM"
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_endpoint_identification_algorithm: str = "https"
    enable_ssl_certificate_verification: bool = True
    ssl_enabled_protocols: tuple[str, ...] = TLS_VERSIONS
    sasl_mechanism: str = "GSSAPI"
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_jaas_config: str | None = field(default=None, repr=False)
    sasl_oauthbearer_config: str | None = None
    enable_sasl_oauthbearer_unsecure_jwt: bool = False
    oauth_cb: OAuthCallback | None = field(default=None, repr=False)

    # ---- derived values ---------------------------------------------------------------------------
    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def trusted_certificates(self) -> tuple[str, str] | None:
        """``(property, path)`` of the trusted certificates, None for the system's."""
        for name in ("ssl_ca_location", "ssl_truststore_location"):
            if getattr(self, name):
                return dotted(name), getattr(self, name)
        return None

    @property
    def client_certificate(self) -> tuple[str, str, str | None] | None:
        """``(property, certificate path, key path or None when the certificate file holds the key)``."""
        if self.ssl_certificate_location:
            return "ssl.certificate.location", self.ssl_certificate_location, self.ssl_key_location
        if self.ssl_keystore_location:
            return "ssl.keystore.location", self.ssl_keystore_location, None
        return None

    @property
    def sasl_user(self) -> str | None:
        """The SASL user name (PLAIN and SCRAM), for messages."""
        return self._credentials()[0] if self.uses_sasl and self.sasl_mechanism != "OAUTHBEARER" else None

    def sasl_exchanges(self, clock: Callable[[], float] = time.time) -> Callable[[], SaslExchange]:
        """A maker of SASL exchanges for this client's connections (OAUTHBEARER tokens are shared between
        them, and fetched again as they age)."""
        mechanism = self.sasl_mechanism
        if mechanism == "OAUTHBEARER":
            tokens = self._oauthbearer_tokens()
            return lambda: tokens.exchange(clock())
        username, password = self._credentials()
        if mechanism == "PLAIN":
            return lambda: PlainExchange(username, password)
        # a delegation token (KIP-48): ScramLoginModule's tokenauth="true" option
        token_auth = (self._jaas_options() or {}).get("tokenauth", "").strip().lower() == "true"
        return lambda: ScramExchange(mechanism, username, password, token_auth=token_auth)

    # ---- checks -----------------------------------------------------------------------------------
    def _resolve_security(self) -> None:
        set_ = self._set
        protocol = self.security_protocol
        if not isinstance(protocol, str) or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, not {protocol!r}")
        set_("security_protocol", protocol.strip().upper())
        for name in _OPTIONAL_TEXT:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{dotted(name)} must be a string, not {type(value).__name__}")
            if value == "":
                set_(name, None)  # an empty location is no location, as in Kafka's property files
        self._resolve_tls()
        for name in ("enable_ssl_certificate_verification", "enable_sasl_oauthbearer_unsecure_jwt"):
            set_(name, boolean(name, getattr(self, name)))
        mechanism = self.sasl_mechanism
        if not isinstance(mechanism, str) or not mechanism.strip():
            raise ConfigError(f"sasl.mechanism must be a mechanism name, not {mechanism!r}")
        set_("sasl_mechanism", mechanism.strip().upper())
        if self.oauth_cb is not None and not callable(self.oauth_cb):
            raise ConfigError(f"oauth_cb must be a callable, not {self.oauth_cb!r}")
        if self.uses_sasl:
            self._check_sasl()

    def _resolve_tls(self) -> None:
        set_ = self._set
        endpoint = self.ssl_endpoint_identification_algorithm
        text = endpoint.strip().lower() if isinstance(endpoint, str) else None
        if text not in ("https", "", "none"):
            raise ConfigError(f"ssl.endpoint.identification.algorithm must be https or empty, not {endpoint!r}")
        set_("ssl_endpoint_identification_algorithm", "" if text == "none" else text)
        for name in ("ssl_truststore_type", "ssl_keystore_type"):
            kind = getattr(self, name)
            if not isinstance(kind, str) or kind.strip().upper() != "PEM":
                raise ConfigError(f"{dotted(name)}: only PEM files are supported, not {kind!r}")
            set_(name, "PEM")
        protocols = self.ssl_enabled_protocols
        if isinstance(protocols, str):
            protocols = tuple(p.strip() for p in protocols.split(",") if p.strip())
        if not isinstance(protocols, (list, tuple)) or not protocols \
                or any(p not in TLS_VERSIONS for p in protocols):
            raise ConfigError(f"ssl.enabled.protocols must list some of {', '.join(TLS_VERSIONS)}, not {protocols!r}")
        set_("ssl_enabled_protocols", tuple(protocols))
        if self.ssl_ca_location and self.ssl_truststore_location:
            raise ConfigError("set one of ssl.ca.location and ssl.truststore.location, not both")
        if self.ssl_keystore_location and (self.ssl_certificate_location or self.ssl_key_location):
            raise ConfigError("set ssl.keystore.location or ssl.certificate.location (with ssl.key.location), "
                              "not both")
        if self.ssl_key_location and not self.ssl_certificate_location:
            raise ConfigError("ssl.key.location needs ssl.certificate.location")

    def _check_sasl(self) -> None:
        mechanism = self.sasl_mechanism
        if mechanism not in MECHANISMS:
            raise ConfigError(f"sasl.mechanism {mechanism} is not supported by this client; use one of "
                              f"{', '.join(MECHANISMS)}")
        if mechanism == "OAUTHBEARER":
            self._oauthbearer_tokens()
        else:
            self._credentials()

    def _jaas_options(self) -> dict[str, str] | None:
        if self.sasl_jaas_config is None:
            return None
        try:
            entry = parse_jaas(self.sasl_jaas_config)
        except ValueError as error:
            raise ConfigError(f"sasl.jaas.config: {error}") from None
        expected = _LOGIN_MODULES.get(self.sasl_mechanism, "")
        if not entry.module.endswith("." + expected) and entry.module != expected:
            raise ConfigError(f"sasl.jaas.config names {entry.module}, but sasl.mechanism {self.sasl_mechanism} "
                              f"needs a {expected}")
        return entry.options

    def _credentials(self) -> tuple[str, str]:
        options = self._jaas_options() or {}
        username = self.sasl_username if self.sasl_username is not None else options.get("username")
        password = self.sasl_password if self.sasl_password is not None else options.get("password")
        if not username or password is None:
            raise ConfigError(f"sasl.mechanism {self.sasl_mechanism} needs sasl.username and sasl.password (or "
                              "username and password in sasl.jaas.config)")
        return username, password

    def _oauthbearer_tokens(self) -> OAuthBearerTokens:
        if self.oauth_cb is not None:
            return OAuthBearerTokens(callback=self.oauth_cb, callback_config=self.sasl_oauthbearer_config)
        if self.enable_sasl_oauthbearer_unsecure_jwt:
            if not self.sasl_oauthbearer_config:
                raise ConfigError("enable.sasl.oauthbearer.unsecure.jwt needs sasl.oauthbearer.config "
                                  "(principal=<name>)")
            try:
                settings = UnsecuredTokenSettings.from_librdkafka(self.sasl_oauthbearer_config)
            except ValueError as error:
                raise ConfigError(f"sasl.oauthbearer.config: {error}") from None
            return OAuthBearerTokens(unsecured=settings)
        options = self._jaas_options()
        if options is None:
            raise ConfigError("sasl.mechanism OAUTHBEARER needs oauth_cb (a token callback), or an unsecured "
                              "development token: enable.sasl.oauthbearer.unsecure.jwt=true with "
                              "sasl.oauthbearer.config=\"principal=<name>\" (or sasl.jaas.config)")
        try:
            return OAuthBearerTokens(unsecured=UnsecuredTokenSettings.from_jaas(options))
        except ValueError as error:
            raise ConfigError(f"sasl.jaas.config: {error}") from None
