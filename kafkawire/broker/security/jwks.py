"""The JSON Web Key Set that signed OAUTHBEARER tokens are checked against, kept as Kafka's
``RefreshingHttpsJwks`` keeps it (the ``sasl.oauthbearer.jwks.endpoint.*`` settings):

- ``url``: an ``https://`` (or ``http://``) URL, fetched with PyJWT's ``PyJWKClient``, or a ``file:`` URL
  (Kafka's ``JwksFileVerificationKeyResolver``). Over HTTPS the server is checked against the
  ``ssl.truststore.*`` options of the listener's OAUTHBEARER JAAS entry, as Kafka builds its JWKS socket
  factory from that entry's ``ssl.*`` options; without them, against the system's trusted CAs (Kafka: the JVM's);
- the set is read when the broker starts, and a broker whose set cannot be read does not start (Kafka's
  validator fails its ``init``); then again every ``refresh.ms`` (default one hour) in the background;
- a read retries with exponential backoff from ``retry.backoff.ms`` (default 100) until
  ``retry.backoff.max.ms`` (default 10 000) have passed, each attempt waiting that long at most; a read
  that fails keeps the set already read;
- a token naming a key id that the set lacks starts a read at once, at most once a minute per key id
  (16 ids remembered, ids over 1000 characters never looked for), as Kafka's ``maybeExpediteRefresh``.
  The token waits for that read (Kafka refuses it and lets the client's next attempt find the key), so
  a client authenticates across a key rotation at its first try.

Reads run on a worker thread: the broker's event loop never waits on the network or the disk.
"""
from __future__ import annotations

import asyncio
import json
import logging
import ssl
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

if TYPE_CHECKING:
    from jwt import PyJWK, PyJWKSet

__all__ = ["JwksSettings", "JwksKeys", "URL", "REFRESH_MS", "RETRY_BACKOFF_MS", "RETRY_BACKOFF_MAX_MS"]

log = logging.getLogger(__name__)

URL = "sasl.oauthbearer.jwks.endpoint.url"
REFRESH_MS = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
RETRY_BACKOFF_MS = "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"
RETRY_BACKOFF_MAX_MS = "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"
_DEFAULTS = {REFRESH_MS: 3_600_000, RETRY_BACKOFF_MS: 100, RETRY_BACKOFF_MAX_MS: 10_000}  # Kafka's

_MISSING_KID_RECHECK_S = 60.0  # RefreshingHttpsJwks.MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
_MISSING_KIDS_KEPT = 16
_LONGEST_KID = 1000


@dataclass(frozen=True)
class JwksSettings:
    url: str
    refresh_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    ssl_context: ssl.SSLContext | None  # for an https:// URL

    @classmethod
    def from_options(cls, options: dict[str, str]) -> JwksSettings:
        """The settings of a listener's OAUTHBEARER options (raises ValueError naming a bad one)."""
        url = options[URL].strip()
        scheme = urlparse(url).scheme.lower()
        if scheme not in ("https", "http", "file"):
            raise ValueError(f"{URL} must be an https:// or a file: URL, not {url!r}")
        numbers = {}
        for key, default in _DEFAULTS.items():
            try:
                numbers[key] = int(options.get(key, default))
            except ValueError:
                raise ValueError(f"invalid value {options[key]!r} for {key}") from None
            if numbers[key] < (1 if key == REFRESH_MS else 0):
                raise ValueError(f"{key} must be {'positive' if key == REFRESH_MS else 'at least 0'}")
        return cls(url, numbers[REFRESH_MS], numbers[RETRY_BACKOFF_MS], numbers[RETRY_BACKOFF_MAX_MS],
                   _trust(options) if scheme == "https" else None)


def _trust(options: dict[str, str]) -> ssl.SSLContext:
    """The TLS client context for the JWKS endpoint, from the JAAS entry's ``ssl.truststore.*`` options."""
    store_type = options.get("ssl.truststore.type", "PEM").upper()
    if store_type != "PEM":
        raise ValueError(f"ssl.truststore.type of the OAUTHBEARER JAAS entry: only PEM is supported, not {store_type}")
    location, certificates = options.get("ssl.truststore.location"), options.get("ssl.truststore.certificates")
    try:
        context = ssl.create_default_context(cafile=location or None, cadata=certificates or None)
    except (OSError, ssl.SSLError) as error:
        raise ValueError(f"the OAUTHBEARER JAAS entry's ssl.truststore cannot be loaded: {error}") from None
    if options.get("ssl.endpoint.identification.algorithm", "https") == "":  # Kafka: empty turns it off
        context.check_hostname = False
    return context


def _read_errors() -> tuple[type[BaseException], ...]:
    import jwt
    return (jwt.PyJWTError, OSError, ValueError)


class JwksKeys:
    """One listener's key set: read at ``start``, refreshed in the background, looked up by key id."""

    def __init__(self, settings: JwksSettings):
        import jwt  # (ListenerSecurity checked that PyJWT is installed)
        from urllib.request import url2pathname  # (urllib.request loads http and email: only with a key set)

        self.settings = settings
        self.url = settings.url
        parsed = urlparse(settings.url)
        self._path = Path(url2pathname(parsed.path)) if parsed.scheme.lower() == "file" else None
        # the HTTP client without its own cache: the set is kept here, and kept when a read fails
        self._client = None if self._path is not None else jwt.PyJWKClient(
            settings.url, cache_jwk_set=False, timeout=max(settings.retry_backoff_max_ms, 1) / 1000,
            ssl_context=settings.ssl_context)
        self._keys: list[PyJWK] = []
        self.last_error: str | None = None  # why the last read failed, while the set read before is used
        self.reads = 0  # reads of the set that succeeded
        self._missing: OrderedDict[str, float] = OrderedDict()  # key id -> when it may be looked for again
        self._reading: asyncio.Task[bool] | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._closing = threading.Event()  # stops the retries of a read under way on its thread

    async def start(self) -> None:
        """The first read (raises ValueError when it fails), then the refreshes every ``refresh.ms``."""
        if not await self.refresh():
            raise ValueError(f"the OAUTHBEARER key set at {self.url} cannot be read: {self.last_error}")
        self._refresher = asyncio.get_running_loop().create_task(self._refresh_periodically())
        log.info("OAuth JWKS at %s: refreshed every %d ms", self.url, self.settings.refresh_ms)

    def close(self) -> None:
        self._closing.set()
        for task in (self._refresher, self._reading):
            if task is not None:
                task.cancel()

    async def keys_for(self, kid: str | None) -> list[PyJWK]:
        """The keys that may have signed a token with this key id (all of them without one), after a
        read of the set when the id is new to it (rate-limited)."""
        found = self._matching(kid)
        if found or kid is None or not self._may_look_for(kid):
            return found
        log.info("OAuth JWKS at %s has no key %r: reading it again", self.url, kid[:80])
        await self.refresh()
        return self._matching(kid)

    def _matching(self, kid: str | None) -> list[PyJWK]:
        return [key for key in self._keys if kid is None or key.key_id == kid]

    def _may_look_for(self, kid: str) -> bool:
        if len(kid) > _LONGEST_KID:  # a malformed token: not worth a read nor a place in the memory of ids
            return False
        now = time.monotonic()
        again_at = self._missing.get(kid)
        if again_at is not None and again_at > now:
            return False
        self._missing[kid] = now + _MISSING_KID_RECHECK_S
        self._missing.move_to_end(kid)
        while len(self._missing) > _MISSING_KIDS_KEPT:
            self._missing.popitem(last=False)
        return True

    async def refresh(self) -> bool:
        """Read the set (joining a read under way); False when it failed and the old set is kept."""
        if self._reading is None or self._reading.done():
            self._reading = asyncio.get_running_loop().create_task(self._read_and_keep())
        return await asyncio.shield(self._reading)

    async def _refresh_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.settings.refresh_ms / 1000)
            await self.refresh()

    async def _read_and_keep(self) -> bool:
        try:
            keys = await asyncio.get_running_loop().run_in_executor(None, self._read_with_retries)
        except _read_errors() as error:
            self.last_error = str(error) or type(error).__name__
            if self.reads:  # (the first read's failure stops the broker's start instead)
                log.warning("OAuth JWKS refresh of %s failed; keeping the key set read before: %s",
                            self.url, self.last_error)
            return False
        self._keys = [key for key in keys.keys if key.public_key_use in ("sig", None)]
        for key in self._keys:
            if key.key_id is not None:
                self._missing.pop(key.key_id, None)
        self.last_error = None
        self.reads += 1
        log.debug("OAuth JWKS refresh of %s complete: %d keys", self.url, len(self._keys))
        return True

    def _read_with_retries(self) -> PyJWKSet:
        """On a worker thread: Kafka's ``Retry``, doubling the wait from ``retry.backoff.ms`` until
        ``retry.backoff.max.ms`` have passed."""
        settings = self.settings
        deadline = time.monotonic() + settings.retry_backoff_max_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._read()
            except _read_errors() as error:
                wait = min(settings.retry_backoff_ms / 1000 * 2 ** (attempt - 1), deadline - time.monotonic())
                if wait <= 0 or self._closing.wait(wait):
                    raise
                log.debug("OAuth JWKS read %d of %s failed (%s); again in %.3f s", attempt, self.url, error, wait)

    def _read(self) -> PyJWKSet:
        import jwt
        if self._client is not None:
            return self._client.get_jwk_set(refresh=True)
        assert self._path is not None
        return jwt.PyJWKSet.from_dict(json.loads(self._path.read_text()))
