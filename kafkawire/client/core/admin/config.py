"""The admin client's configuration: Kafka's AdminClientConfig names and defaults, validated up front
(``AdminConfig.from_properties({"bootstrap.servers": "host:9092"})``), with the connection and security settings
every client shares (``network_config``, ``security_config``)."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ConfigError
from ..network_config import NetworkConfig
from ..properties import INT32_MAX, INT64_MAX, dotted, integer, servers

__all__ = ["AdminConfig"]


@dataclass(frozen=True)
class AdminConfig(NetworkConfig):
    bootstrap_servers: tuple[str, ...] = ()
    client_id: str = ""
    default_api_timeout_ms: int = 60000  # one operation's, retries included, when the call names none
    retry_backoff_ms: int = 100  # the first wait before a retry, doubled each time ...
    retry_backoff_max_ms: int = 1000  # ... up to this
    metadata_max_age_ms: int = 300000

    _KIND = "admin"

    def __post_init__(self) -> None:
        set_ = self._set
        set_("bootstrap_servers", servers(self.bootstrap_servers))
        self._resolve_security()
        self._resolve_network()
        if not isinstance(self.client_id, str):
            raise ConfigError(f"client.id must be a string, not {self.client_id!r}")
        for name, low, high in (("request_timeout_ms", 0, INT32_MAX), ("default_api_timeout_ms", 0, INT32_MAX),
                                ("retry_backoff_ms", 0, INT64_MAX), ("retry_backoff_max_ms", 0, INT64_MAX),
                                ("metadata_max_age_ms", 0, INT64_MAX)):
            set_(name, integer(name, getattr(self, name), low, high))
        if self.default_api_timeout_ms < self.request_timeout_ms:
            raise ConfigError(f"{dotted('default_api_timeout_ms')} ({self.default_api_timeout_ms}) must be at least "
                              f"request.timeout.ms ({self.request_timeout_ms}), as Kafka requires")
