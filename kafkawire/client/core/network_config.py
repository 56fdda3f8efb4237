"""How every client connects, under Kafka's names and defaults (CommonClientConfigs): the connection
settings ProducerConfig, ConsumerConfig and AdminConfig share, and the exponential backoff with jitter
Kafka's ``ClusterConnectionStates`` applies to them.

* ``request.timeout.ms`` (30000): how long one request may wait for its answer before its connection is
  closed and the request fails (to be retried where its call's timeout allows).
* ``reconnect.backoff.ms`` (50) and ``reconnect.backoff.max.ms`` (1000): the wait before connecting
  again to a broker after a failed attempt, doubling with each consecutive failure up to the maximum.
* ``socket.connection.setup.timeout.ms`` (10000) and ``socket.connection.setup.timeout.max.ms``
  (30000): how long one attempt may take to open the socket (and its TLS handshake), doubling with each
  consecutive attempt that timed out, up to the maximum.

Both vary by 20% either way at random, as Kafka's do, so that clients restarted together do not
reconnect in lockstep.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..errors import ConfigError
from .properties import INT64_MAX, dotted, integer
from .security_config import SecurityConfig

__all__ = ["NetworkConfig", "ExponentialBackoff"]

_JITTER = 0.2  # Kafka's CommonClientConfigs.RETRY_BACKOFF_JITTER and CONNECTION_SETUP_TIMEOUT_JITTER
_MULTIPLIER = 2


class ExponentialBackoff:
    """``initial * 2 ** attempts``, with +/-20% jitter, capped at ``maximum`` (Kafka's ExponentialBackoff)."""

    def __init__(self, initial_ms: float, maximum_ms: float, jitter: float = _JITTER,
                 rng: random.Random | None = None):
        self.initial_ms = initial_ms
        self.maximum_ms = maximum_ms
        self.jitter = jitter
        self._random = rng or random.Random()
        # past this exponent the term is above the maximum anyway
        self._max_exponent = (math.log(maximum_ms / initial_ms, _MULTIPLIER)
                              if maximum_ms > initial_ms > 0 else 0.0)

    def backoff_ms(self, attempts: int) -> float:
        if self._max_exponent == 0:
            return float(self.initial_ms)
        term = self.initial_ms * math.pow(_MULTIPLIER, min(float(attempts), self._max_exponent))
        factor = self._random.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter > 0 else 1.0
        return min(factor * term, float(self.maximum_ms))


@dataclass(frozen=True)
class NetworkConfig(SecurityConfig):
    """The connection settings every client shares (see the module docstring)."""

    request_timeout_ms: int = 30000  # one request's wait for its response (checked by each client's config)
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    socket_connection_setup_timeout_ms: int = 10000
    socket_connection_setup_timeout_max_ms: int = 30000

    def _resolve_network(self) -> None:
        for name in ("reconnect_backoff_ms", "reconnect_backoff_max_ms", "socket_connection_setup_timeout_ms",
                     "socket_connection_setup_timeout_max_ms"):
            self._set(name, integer(name, getattr(self, name), 0, INT64_MAX))
        if self.socket_connection_setup_timeout_ms == 0:
            raise ConfigError(f"{dotted('socket_connection_setup_timeout_ms')} must be above 0")
