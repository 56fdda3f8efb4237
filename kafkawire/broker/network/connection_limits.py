"""Which connections the broker accepts: ``max.connections``, ``max.connections.per.ip`` (with its
overrides), and the process's descriptor limit, split between connections and partition log files.

Kafka's acceptor stops accepting at ``max.connections``; an asyncio server has already accepted the
socket when it hears of it, so a connection over a limit is closed at once (and logged at most once
a minute, not per connection). The descriptor limit is raised to its hard limit at start, and the
connections' share of it is capped so that ``accept()`` never fails with EMFILE.
"""
from __future__ import annotations

import logging
import os
import time

__all__ = ["ConnectionLimits", "descriptor_budget"]

log = logging.getLogger(__name__)

# Descriptors kept for everything but connections and log files: the listening socket, the tap,
# the offsets file, worker threads' files, Python's own.
_RESERVED = 64


def descriptor_budget() -> tuple[int, int]:
    """``(connections, log files)``: how many descriptors each may hold, after raising the soft limit
    to the hard one where the platform allows. Log files get a quarter, at least 64 and at most 4096."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                soft = target
            except (ValueError, OSError):
                pass
    except ImportError:  # not POSIX
        soft = 8192
    in_use = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 16
    available = max(soft - in_use - _RESERVED, 64)
    files = min(max(available // 4, 64), 4096)
    return max(available - files, 16), files


class ConnectionLimits:
    """Counts the open connections, in all and by client address."""

    def __init__(self, max_connections: int, limit_for_host, descriptor_cap: int):
        self.max_connections = min(max_connections, descriptor_cap)
        self._limit_for_host = limit_for_host
        self.total = 0
        self.by_host: dict[str, int] = {}
        self.refused = 0
        self._last_warning = 0.0

    def admit(self, host: str) -> bool:
        """Count a new connection from ``host``, or refuse it (False) when over a limit."""
        count = self.by_host.get(host, 0)
        if self.total >= self.max_connections:
            return self._refuse(host, f"max.connections ({self.max_connections}) reached")
        limit = self._limit_for_host(host)
        if count >= limit:
            return self._refuse(host, f"max.connections.per.ip ({limit}) reached for {host}")
        self.total += 1
        self.by_host[host] = count + 1
        return True

    def release(self, host: str) -> None:
        self.total -= 1
        count = self.by_host.get(host, 0) - 1
        if count > 0:
            self.by_host[host] = count
        else:
            self.by_host.pop(host, None)

    def _refuse(self, host: str, reason: str) -> bool:
        self.refused += 1
        now = time.monotonic()
        if now - self._last_warning >= 60:
            self._last_warning = now
            log.warning("refusing connections: %s (%d refused so far)", reason, self.refused)
        return False
