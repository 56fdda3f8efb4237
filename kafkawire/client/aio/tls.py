"""TLS for a client's connections: the SSLContext its settings describe (``client_context``) and what a
failed handshake means (``handshake_failure``, ``is_refusal``, ``closed_early_hint``).

The context verifies the broker's certificate chain against ``ssl.ca.location`` (or the system's
certificates) and, with ``ssl.endpoint.identification.algorithm=https`` (the default), that the
certificate names the host connected to (a DNS name, or an IP address in its subjectAltName), as Kafka
2.0+ and librdkafka 2.0+ do by default.
"""
from __future__ import annotations

import os
import ssl
import sys

from ..core.security_config import SecurityConfig
from ..errors import ConfigError, SslAuthenticationException

__all__ = ["client_context", "handshake_failure", "is_refusal", "closed_early_hint"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def client_context(config: SecurityConfig) -> ssl.SSLContext:
    """The SSLContext for ``config`` (loads its files now: a file that does not load is a ConfigError)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog and not sys.flags.ignore_environment:  # as ssl.create_default_context: secrets for a capture's decryption
        context.keylog_filename = keylog
    versions = sorted(_VERSIONS[name] for name in config.ssl_enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    trusted = config.trusted_certificates
    try:
        if trusted is None:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        elif os.path.isdir(trusted[1]):
            context.load_verify_locations(capath=trusted[1])
        else:
            context.load_verify_locations(cafile=trusted[1])
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"{trusted[0] if trusted else 'the system CA certificates'}: cannot load the trusted "
                          f"certificates: {error}") from None
    own = config.client_certificate
    if own is not None:
        name, certificate, key = own
        try:
            context.load_cert_chain(certificate, key, password=config.ssl_key_password)
        except (OSError, ssl.SSLError) as error:
            raise ConfigError(f"{name}: cannot load the client certificate and key: {error}") from None
    context.check_hostname = config.ssl_endpoint_identification_algorithm == "https" \
        and config.enable_ssl_certificate_verification
    if not config.enable_ssl_certificate_verification:
        context.verify_mode = ssl.CERT_NONE
    return context


def handshake_failure(host: str, port: int, error: ssl.SSLError) -> SslAuthenticationException:
    """The exception for a TLS handshake with ``host:port`` that failed with ``error``."""
    if isinstance(error, ssl.SSLCertVerificationError):
        reason = error.verify_message or str(error)
        hint = ("ssl.ca.location must hold the CA that signed it" if error.verify_code in (18, 19, 20, 21)
                else "set ssl.endpoint.identification.algorithm= (empty) to skip the host name check"
                if error.verify_code in (62, 64) else "")  # host name, IP address mismatch
        return SslAuthenticationException(f"TLS handshake with {host}:{port} failed: the broker's certificate is "
                                          f"not trusted: {reason}" + (f" ({hint})" if hint else ""))
    return SslAuthenticationException(f"TLS handshake with {host}:{port} failed: {error.reason or error}")


def is_refusal(error: ssl.SSLError) -> bool:
    """Whether a TLS error is a refusal (a certificate, an alert), not the connection ending midway (as
    when a broker restarts), which is retried: Kafka treats an EOF during the handshake so too."""
    return not isinstance(error, (ssl.SSLEOFError, ssl.SSLZeroReturnError, ssl.SSLSyscallError))


def closed_early_hint(has_client_certificate: bool, during_handshake: bool = False) -> str:
    """What to add when a broker closes a TLS connection before its first answer: a listener that
    requires client certificates (ssl.client.auth=required) does that to a client it will not accept,
    and may send no alert saying why; a listener without TLS, during the handshake."""
    listener = "; is the listener a TLS one (security.protocol)?" if during_handshake else ""
    if has_client_certificate:
        return f"{listener}; the broker may not trust this client's certificate (ssl.certificate.location)"
    return (f"{listener}; if the broker's listener requires client certificates (ssl.client.auth=required), "
            "set ssl.certificate.location and ssl.key.location")
