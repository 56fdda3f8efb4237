"""TLS for the broker's SSL and SASL_SSL listeners, configured with Kafka's ``ssl.*`` names.

Keys and certificates are PEM, as Kafka 2.7+ takes them (``ssl.keystore.type=PEM``): the key and its
certificate chain in the file at ``ssl.keystore.location`` (or inline in ``ssl.keystore.key`` and
``ssl.keystore.certificate.chain``), the key's password in ``ssl.key.password``, and the trusted
certificates at ``ssl.truststore.location`` (or inline in ``ssl.truststore.certificates``).
``ssl.client.auth`` is none, requested or required. A client's principal is ``User:`` followed by its
certificate's subject as an RFC 2253 distinguished name (Java's ``X500Principal.getName()``), mapped
through ``ssl.principal.mapping.rules`` (``SslPrincipalMapper``). With ``SSLKEYLOGFILE`` set, the
listeners append their TLS secrets to that file, as Python and curl clients do (for ``kafkawire show
--keylog``; the broker's own ``--tap`` is plaintext anyway).
"""
from __future__ import annotations

import os
import re
import ssl
import sys
from pathlib import Path

__all__ = ["server_context", "subject_dn", "PrincipalMapper", "TLS_PROTOCOLS"]

TLS_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(settings: dict[str, str]) -> ssl.SSLContext:
    """An SSLContext for a listener from its ``ssl.*`` settings (raises ValueError naming the key)."""
    keystore_type = settings.get("ssl.keystore.type", "PEM").upper()
    if keystore_type != "PEM":
        raise ValueError(f"ssl.keystore.type: only PEM key stores are supported, not {keystore_type}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    keylog = os.environ.get("SSLKEYLOGFILE")
    if keylog and not sys.flags.ignore_environment:  # as ssl.create_default_context: secrets for a capture's decryption
        context.keylog_filename = keylog
    protocols = [p.strip() for p in settings.get("ssl.enabled.protocols", "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    unknown = [p for p in protocols if p not in TLS_PROTOCOLS]
    if unknown or not protocols:
        raise ValueError(f"ssl.enabled.protocols: unsupported {unknown or protocols}")
    versions = sorted(TLS_PROTOCOLS[p] for p in protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    password = settings.get("ssl.key.password") or None
    location = settings.get("ssl.keystore.location")
    if location:
        _load_chain(context, location, password, "ssl.keystore.location")
    elif settings.get("ssl.keystore.certificate.chain") and settings.get("ssl.keystore.key"):
        import tempfile  # (only a listener with PEM material in its settings writes it out)
        with tempfile.TemporaryDirectory() as scratch:  # the ssl module loads keys from files only
            path = Path(scratch) / "keystore.pem"
            path.write_text(settings["ssl.keystore.key"] + "\n" + settings["ssl.keystore.certificate.chain"])
            _load_chain(context, str(path), password, "ssl.keystore.key")
    else:
        raise ValueError("ssl.keystore.location (or ssl.keystore.key and ssl.keystore.certificate.chain) "
                         "is required for an SSL listener")
    trusted = settings.get("ssl.truststore.location")
    try:
        if trusted:
            context.load_verify_locations(cafile=trusted)
        elif settings.get("ssl.truststore.certificates"):
            context.load_verify_locations(cadata=settings["ssl.truststore.certificates"])
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"ssl.truststore: cannot load the trusted certificates: {error}") from None
    client_auth = settings.get("ssl.client.auth", "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise ValueError(f"ssl.client.auth must be none, requested or required, not {client_auth!r}")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    ciphers = settings.get("ssl.cipher.suites")
    if ciphers:
        try:
            context.set_ciphers(":".join(c.strip() for c in ciphers.split(",")))
        except ssl.SSLError as error:
            raise ValueError(f"ssl.cipher.suites: {error}") from None
    return context


def _load_chain(context: ssl.SSLContext, path: str, password: str | None, key: str) -> None:
    try:
        context.load_cert_chain(path, password=password)
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"{key}: cannot load the key and certificate chain: {error}") from None


# getpeercert()'s attribute names -> RFC 2253 keywords; others are written as dotted OIDs
_KEYWORDS = {"commonName": "CN", "localityName": "L", "stateOrProvinceName": "ST", "organizationName": "O",
             "organizationalUnitName": "OU", "countryName": "C", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "givenName": "2.5.4.42", "surname": "2.5.4.4", "initials": "2.5.4.43", "pseudonym": "2.5.4.65"}
_IA5 = {"emailAddress"}


def subject_dn(certificate: dict) -> str:
    """The subject of a certificate from ``SSLSocket.getpeercert()`` as Java's RFC 2253 string: the
    relative names in reverse order (most specific first), ``+`` within a multi-valued one."""
    names = []
    for rdn in reversed(certificate.get("subject", ())):
        names.append("+".join(_attribute(name, value) for name, value in rdn))
    return ",".join(names)


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    oid = _OIDS.get(name, name)
    raw = value.encode("utf-8")
    tag = 0x16 if name in _IA5 else 0x13 if value.isascii() else 0x0C  # IA5String, PrintableString, UTF8String
    return f"{oid}=#{bytes([tag, len(raw)]).hex()}{raw.hex()}"  # as Java writes names without a keyword


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: ``RULE:pattern/replacement/[L|U]`` and ``DEFAULT``, comma-separated,
    the first rule whose pattern matches the whole name wins (Kafka's SslPrincipalMapper)."""

    def __init__(self, rules: str = "DEFAULT"):
        self.rules: list[tuple[re.Pattern, str, str] | None] = []  # None is DEFAULT
        text = rules.strip()
        position = 0
        while position < len(text):
            match = _SPLITTER.match(text, position)
            if match is None or match.end() == position:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule at {text[position:]!r}")
            position = match.end()
            if match.group(2):
                self.rules.append(None)
            elif match.group(3) is not None:
                replacement = re.sub(r"\$(\d)", r"\\\1", match.group(4))
                self.rules.append((re.compile(match.group(3)), replacement, match.group(5)))
            elif match.group(6):
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule {match.group(6)!r}")

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            if rule is None:
                return distinguished_name
            pattern, replacement, case = rule
            if pattern.fullmatch(distinguished_name):
                mapped = pattern.sub(replacement, distinguished_name)
                return mapped.lower() if case == "L" else mapped.upper() if case == "U" else mapped
        raise ValueError(f"No rules apply to {distinguished_name}")
