"""The share consumer's configuration: Kafka's property names and defaults for ``KafkaShareConsumer``.

* ``share.acknowledgement.mode``: ``implicit`` (the default: the records a poll returned are accepted
  by the next poll or commit) or ``explicit`` (the application acknowledges every record itself, with
  ACCEPT, RELEASE or REJECT, before it polls again).
* ``share.acquire.mode`` (KIP-1206): ``batch_optimized`` (the broker may hand out whole batches, past
  ``max.poll.records``) or ``record_limit`` (never more than ``max.poll.records`` per fetch).
* ``max.poll.records`` is ShareFetch's MaxRecords and BatchSize; ``fetch.*`` as the consumer's.
* ``buffer.memory`` (KIP-81, as the consumer's): the bytes of ShareFetch responses held at once.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError
from ..network_config import NetworkConfig
from ..properties import INT32_MAX, INT64_MAX, boolean, choice, dotted, integer, servers

__all__ = ["ShareConsumerConfig", "ACKNOWLEDGEMENT_MODES", "ACQUIRE_MODES"]

ACKNOWLEDGEMENT_MODES = ("implicit", "explicit")
ACQUIRE_MODES = ("batch_optimized", "record_limit")  # ShareFetch's ShareAcquireMode 0 and 1


@dataclass(frozen=True)
class ShareConsumerConfig(NetworkConfig):
    bootstrap_servers: tuple[str, ...] = ()
    client_id: str = ""
    client_rack: str = ""
    group_id: str | None = None
    share_acknowledgement_mode: str = "implicit"
    share_acquire_mode: str = "batch_optimized"
    fetch_max_bytes: int = 52428800
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    max_poll_records: int = 500
    buffer_memory: int = 104857600
    default_api_timeout_ms: int = 60000
    retry_backoff_ms: int = 100
    check_crcs: bool = True

    _KIND = "share consumer"

    def __post_init__(self) -> None:
        set_ = self._set
        set_("bootstrap_servers", servers(self.bootstrap_servers))
        self._resolve_security()
        self._resolve_network()
        for name in ("client_id", "client_rack"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"{dotted(name)} must be a string, not {getattr(self, name)!r}")
        if not isinstance(self.group_id, str) or not self.group_id:
            raise ConfigError(f"a share consumer needs a group.id, not {self.group_id!r}")
        set_("share_acknowledgement_mode", choice("share_acknowledgement_mode",
                                                  str(self.share_acknowledgement_mode).lower(), ACKNOWLEDGEMENT_MODES))
        set_("share_acquire_mode", choice("share_acquire_mode", str(self.share_acquire_mode).lower(), ACQUIRE_MODES))
        for name, low, high in (("fetch_max_bytes", 0, INT32_MAX), ("fetch_min_bytes", 0, INT32_MAX),
                                ("fetch_max_wait_ms", 0, INT32_MAX), ("max_poll_records", 1, INT32_MAX),
                                ("buffer_memory", 1, INT64_MAX), ("request_timeout_ms", 0, INT32_MAX),
                                ("default_api_timeout_ms", 0, INT32_MAX), ("retry_backoff_ms", 0, INT64_MAX)):
            set_(name, integer(name, getattr(self, name), low, high))
        set_("check_crcs", boolean("check_crcs", self.check_crcs))
        if self.buffer_memory < self.fetch_max_bytes:
            raise ConfigError(f"buffer.memory ({self.buffer_memory}) must be at least fetch.max.bytes "
                              f"({self.fetch_max_bytes}): one whole fetch response has to fit (KIP-81)")

    @property
    def explicit(self) -> bool:
        """Whether the application acknowledges each record itself."""
        return self.share_acknowledgement_mode == "explicit"

    @property
    def acquire_mode_code(self) -> int:
        """ShareFetch's ShareAcquireMode (0 batch_optimized, 1 record_limit)."""
        return ACQUIRE_MODES.index(self.share_acquire_mode)
