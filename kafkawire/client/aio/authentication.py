"""What secures each of a client's connections: its TLS context, and the SASL exchange run on a new
connection right after ApiVersions and again to re-authenticate (KIP-368).

The exchange is Kafka's since 1.0: SaslHandshake v1 names the mechanism (the broker answers with the
ones it enables), then SaslAuthenticate requests carry the mechanism's tokens (``core.sasl_client``)
until it is complete. SaslAuthenticate v1+ answers with the session's lifetime, after which the broker
closes a connection that has not re-authenticated; the connection schedules that itself.

Failures raise Kafka's exceptions: UnsupportedSaslMechanismException (the broker does not enable the
mechanism), IllegalSaslStateException (e.g. a listener without SASL), SaslAuthenticationException
(wrong credentials, a refused token, or a broker that cannot prove it holds the SCRAM credential).
"""
from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import SaslAuthenticateRequest, SaslHandshakeRequest
from kafkawire.sasl import SaslError

from ..core.sasl_client import SaslExchange
from ..core.security_config import SecurityConfig
from ..errors import (
    AuthenticationException, IllegalSaslStateException, SaslAuthenticationException,
    UnsupportedSaslMechanismException,
)
from .tls import client_context

if TYPE_CHECKING:
    from .connection import BrokerConnection

__all__ = ["ConnectionSecurity"]

_HANDSHAKE_VERSION = 1  # v0 sends tokens as bare frames; Kafka 4 serves v1 only (KIP-896)


class ConnectionSecurity:
    """The TLS context (None without TLS) and the SASL exchanges (none without SASL) of a client."""

    def __init__(self, config: SecurityConfig, clock: Callable[[], float] = time.time):
        self.protocol = config.security_protocol
        self.ssl_context: ssl.SSLContext | None = client_context(config) if config.uses_tls else None
        self.client_certificate = config.uses_tls and config.client_certificate is not None
        self.mechanism: str | None = config.sasl_mechanism if config.uses_sasl else None
        self._exchanges = config.sasl_exchanges(clock) if config.uses_sasl else None
        self._user = config.sasl_user if config.uses_sasl else None
        self.authentications = 0  # completed, re-authentications included

    @classmethod
    def of(cls, config: SecurityConfig) -> ConnectionSecurity | None:
        """The security for ``config``, or None for PLAINTEXT."""
        return cls(config) if config.security_protocol != "PLAINTEXT" else None

    async def authenticate(self, connection: BrokerConnection) -> int:
        """Run the SASL exchange on ``connection``; returns the session lifetime in ms (0: unlimited).
        Raises an AuthenticationException when the broker refuses."""
        mechanism = self.mechanism
        if self._exchanges is None or mechanism is None:
            return 0
        where = f"{connection.host}:{connection.port}"
        handshake = await connection.request(SaslHandshakeRequest(mechanism=mechanism),
                                             connection.api_version(SaslHandshakeRequest.API_KEY, _HANDSHAKE_VERSION),
                                             authentication=True)
        if handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise UnsupportedSaslMechanismException(
                f"{where} does not enable SASL mechanism {mechanism} (sasl.mechanism); it enables "
                f"{', '.join(handshake.mechanisms) or 'none'}")
        if handshake.error_code == ErrorCode.ILLEGAL_SASL_STATE:
            raise IllegalSaslStateException(f"{where} refused SaslHandshake (ILLEGAL_SASL_STATE): is its listener "
                                            f"a SASL one (security.protocol {self.protocol})?")
        if handshake.error_code:
            raise SaslAuthenticationException(f"SaslHandshake with {where} failed with error code "
                                              f"{handshake.error_code}", handshake.error_code)
        version = connection.api_version(SaslAuthenticateRequest.API_KEY)
        try:
            exchange: SaslExchange = self._exchanges()
            token: bytes | None = exchange.first()
            while token is not None:
                answer = await connection.request(SaslAuthenticateRequest(auth_bytes=token), version,
                                                  authentication=True)
                if answer.error_code:
                    raise self._refused(where, answer.error_message or _code_name(answer.error_code),
                                        answer.error_code)
                token = exchange.step(answer.auth_bytes)
        except SaslError as error:
            raise self._refused(where, str(error), ErrorCode.SASL_AUTHENTICATION_FAILED) from None
        self.authentications += 1
        return max(0, answer.session_lifetime_ms) if version >= 1 else 0

    def _refused(self, where: str, message: str, code: int) -> AuthenticationException:
        user = f", user {self._user}" if self._user else ""  # never the password
        text = f"SASL authentication with {where} ({self.mechanism}{user}) failed: {message}"
        if code == ErrorCode.ILLEGAL_SASL_STATE:
            return IllegalSaslStateException(text)
        return SaslAuthenticationException(text, code)


def _code_name(code: int) -> str:
    name = ErrorCode.of(code)
    return name.name if isinstance(name, ErrorCode) else f"error code {code}"
