"""One listener's security, resolved from the broker's settings as Kafka resolves them: a
``listener.name.<listener>.<key>`` setting wins over ``<key>``, and a mechanism's JAAS entry is
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (else ``sasl.jaas.config``).

Everything a listener cannot honour is refused when the broker starts, naming the key: GSSAPI (Kafka's
default ``sasl.enabled.mechanisms``), a PLAIN mechanism without users, a key store that does not load,
signed OAUTHBEARER tokens without PyJWT installed (the ``oauthbearer`` extra).
"""
from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING

from ..network.listeners import Listener
from .tls import PrincipalMapper, server_context

if TYPE_CHECKING:
    from .jaas import JaasEntry
    from .signed_tokens import SignedTokenValidator

__all__ = ["ListenerSecurity"]

log = logging.getLogger(__name__)

_LOGIN_MODULES = {"PLAIN": "PlainLoginModule", "SCRAM-SHA-256": "ScramLoginModule",
                  "SCRAM-SHA-512": "ScramLoginModule", "OAUTHBEARER": "OAuthBearerLoginModule"}


class ListenerSecurity:
    """What a listener needs to secure its connections: the TLS context, the SASL mechanisms and their
    settings, the principal mapping, and the re-authentication period."""

    def __init__(self, listener: Listener, settings: dict[str, str]):
        self.listener = listener
        self._settings = settings
        self.ssl_context: ssl.SSLContext | None = None
        self.principal_mapper = PrincipalMapper(self.get("ssl.principal.mapping.rules") or "DEFAULT")
        if listener.tls:
            self.ssl_context = server_context({key: value for key in _SSL_KEYS
                                               if (value := self.get(key)) is not None})
        self.mechanisms: tuple[str, ...] = ()
        self.plain_users: dict[str, str] = {}
        self.oauth: dict[str, str] = {}
        self.oauth_validator: SignedTokenValidator | None = None
        if listener.sasl:
            self._configure_sasl()
        reauth = self.get("connections.max.reauth.ms")
        try:
            self.reauth_ms = int(reauth) if reauth else 0
        except ValueError:
            raise ValueError(f"invalid value {reauth!r} for connections.max.reauth.ms") from None

    def get(self, key: str) -> str | None:
        prefixed = self._settings.get(f"listener.name.{self.listener.name.lower()}.{key}")
        return prefixed if prefixed is not None else self._settings.get(key)

    def jaas(self, mechanism: str) -> JaasEntry | None:
        """The mechanism's JAAS entry: its own (``listener.name.<l>.<mechanism>.sasl.jaas.config``), or
        the shared ``sasl.jaas.config`` when that names the mechanism's login module."""
        own = self._settings.get(f"listener.name.{self.listener.name.lower()}.{mechanism.lower()}.sasl.jaas.config")
        text = own if own is not None else self.get("sasl.jaas.config")
        if text is None:
            return None
        from .jaas import parse_jaas  # (only a SASL listener has JAAS entries)
        try:
            entry = parse_jaas(text)
        except ValueError as error:
            raise ValueError(f"sasl.jaas.config of listener {self.listener.name}: {error}") from None
        if not entry.module.endswith(_LOGIN_MODULES[mechanism]):
            if own is not None:
                raise ValueError(f"the JAAS entry for {mechanism} on listener {self.listener.name} names "
                                 f"{entry.module}, not a {_LOGIN_MODULES[mechanism]}")
            return None  # the shared entry is another mechanism's
        return entry

    def _configure_sasl(self) -> None:
        from ...sasl import MECHANISMS  # (the SASL modules: only a SASL listener loads them)
        from .jaas import plain_users
        text = self.get("sasl.enabled.mechanisms") or "GSSAPI"  # Kafka's default
        mechanisms = tuple(m.strip().upper() for m in text.split(",") if m.strip())
        unsupported = [m for m in mechanisms if m not in MECHANISMS]
        if unsupported or not mechanisms:
            raise ValueError(f"sasl.enabled.mechanisms of listener {self.listener.name}: {unsupported or text!r} "
                             f"not supported; use {', '.join(MECHANISMS)}")
        self.mechanisms = mechanisms
        for mechanism in mechanisms:
            entry = self.jaas(mechanism)
            if mechanism == "PLAIN":
                self.plain_users = plain_users(entry) if entry is not None else {}
                if not self.plain_users:
                    raise ValueError(f"listener {self.listener.name} enables PLAIN but its JAAS entry "
                                     f"(listener.name.{self.listener.name.lower()}.plain.sasl.jaas.config) "
                                     f"names no user_<name>=\"<password>\"")
            if mechanism == "OAUTHBEARER":
                self._configure_oauthbearer(entry)

    def _configure_oauthbearer(self, entry: JaasEntry | None) -> None:
        """Signed tokens when a key set is named (``sasl.oauthbearer.jwks.endpoint.url``), else Kafka's
        unsecured tokens, which anyone can make for any principal: said in a warning at start."""
        from . import jwks, signed_tokens  # (only a listener with OAUTHBEARER needs them)
        # the broker settings of Kafka's OAUTHBEARER validator (also read from the JAAS entry's options)
        settings = (jwks.URL, jwks.REFRESH_MS, jwks.RETRY_BACKOFF_MS, jwks.RETRY_BACKOFF_MAX_MS, *signed_tokens.OPTIONS)
        self.oauth = dict(entry.options) if entry is not None else {}
        for key in settings:  # Kafka's ConfigurationUtils: the mechanism-prefixed key wins
            value = self.get(f"oauthbearer.{key}")
            value = value if value is not None else self.get(key)
            if value is not None:
                self.oauth[key] = value
        if jwks.URL not in self.oauth:
            log.warning("listener %s accepts unsecured OAUTHBEARER tokens (alg none, unsigned): any client can "
                        "claim any principal; set %s to accept only signed tokens", self.listener.name, jwks.URL)
            return
        try:
            import jwt
            missing = not jwt.algorithms.has_crypto
        except ImportError:
            missing = True
        if missing:
            raise ValueError(f"listener {self.listener.name} checks signed OAUTHBEARER tokens ({jwks.URL}), "
                             f"which needs PyJWT and cryptography: pip install 'kafkawire[oauthbearer]'")
        try:
            self.oauth_validator = signed_tokens.SignedTokenValidator(self.oauth)
        except ValueError as error:
            raise ValueError(f"listener {self.listener.name}: {error}") from None

    async def start(self) -> None:
        """Read the OAUTHBEARER key set, if the listener has one (raises ValueError if it cannot)."""
        if self.oauth_validator is not None:
            await self.oauth_validator.start()

    def close(self) -> None:
        if self.oauth_validator is not None:
            self.oauth_validator.close()

    def principal_from_certificate(self, distinguished_name: str | None) -> str:
        """``User:`` and the mapped subject of a client certificate, or ``User:ANONYMOUS`` without one."""
        if not distinguished_name:
            return "User:ANONYMOUS"
        return "User:" + self.principal_mapper.name(distinguished_name)


_SSL_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
             "ssl.key.password", "ssl.truststore.location", "ssl.truststore.certificates", "ssl.client.auth",
             "ssl.enabled.protocols", "ssl.cipher.suites")
