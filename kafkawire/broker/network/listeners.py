"""The broker's listeners, configured as Kafka's: ``listeners`` (``NAME://host:port,...``),
``advertised.listeners`` (what Metadata tells clients, per listener name) and
``listener.security.protocol.map`` (``NAME:PROTOCOL,...``; the names PLAINTEXT, SSL, SASL_PLAINTEXT and
SASL_SSL map to themselves by default). An empty host listens on every interface; port 0 picks one.
The listeners ``controller.listener.names`` names answer as a KRaft controller's do; they come after
the broker's listeners, and are PLAINTEXT when the protocol map is left at its default (as Kafka's).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Listener", "parse_listeners", "PROTOCOLS", "DEFAULT_PROTOCOL_MAP"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in PROTOCOLS)
_ENDPOINT = re.compile(r"([A-Za-z0-9_-]+)://(\[[0-9a-fA-F:]*\]|[^:\[\]]*):(\d+)")


@dataclass
class Listener:
    name: str  # the listener name, upper case as Kafka keeps it
    protocol: str  # its security protocol
    host: str  # where to bind ("" = every interface)
    port: int  # 0 = any free port; the server sets the bound one
    advertised_host: str
    advertised_port: int | None = None  # None: the bound port
    controller: bool = False  # named in controller.listener.names

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def advertised(self, bound_port: int) -> tuple[str, int]:
        return self.advertised_host, self.advertised_port if self.advertised_port is not None else bound_port


def _endpoints(text: str, key: str) -> list[tuple[str, str, int]]:
    endpoints = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT.fullmatch(item)
        if match is None:
            raise ValueError(f"{key}: {item!r} is not NAME://host:port")
        host = match[2][1:-1] if match[2].startswith("[") else match[2]
        port = int(match[3])
        if not 0 <= port <= 65535:
            raise ValueError(f"{key}: port {port} of {item!r} is out of range")
        endpoints.append((match[1].upper(), host, port))
    names = [name for name, _, _ in endpoints]
    if len(set(names)) != len(names):
        raise ValueError(f"{key}: each listener name may appear once ({text!r})")
    return endpoints


def parse_listeners(listeners: str, advertised: str | None = None, protocol_map: str = DEFAULT_PROTOCOL_MAP,
                    default_advertised_host: str = "127.0.0.1", controller_names: str = "") -> list[Listener]:
    """The listeners in order, the broker's first (the first is the one ``Broker.bootstrap`` names);
    raises ValueError with the key named."""
    controllers = [name.strip().upper() for name in controller_names.split(",") if name.strip()]
    protocols = {name: "PLAINTEXT" for name in controllers} if protocol_map == DEFAULT_PROTOCOL_MAP else {}
    for item in (part.strip() for part in protocol_map.split(",")):
        if not item:
            continue
        name, colon, protocol = item.partition(":")
        if not colon or protocol.upper() not in PROTOCOLS:
            raise ValueError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL with PROTOCOL one of "
                             f"{', '.join(PROTOCOLS)}")
        protocols[name.strip().upper()] = protocol.upper()
    found = _endpoints(listeners, "listeners")
    if not found:
        raise ValueError("listeners: at least one listener is needed")
    advertised_by_name = {name: (host, port) for name, host, port in _endpoints(advertised or "", "advertised.listeners")}
    unknown = set(advertised_by_name) - {name for name, _, _ in found}
    if unknown:
        raise ValueError(f"advertised.listeners: {sorted(unknown)} are not in listeners")
    missing = [name for name in controllers if name not in {name for name, _, _ in found}]
    if missing:  # a combined broker and controller listens on its controller listeners
        raise ValueError(f"controller.listener.names: {', '.join(missing)} not in listeners")
    if all(name in controllers for name, _, _ in found):
        raise ValueError("listeners: every listener is a controller listener; a broker listener is needed")
    result = []
    for name, host, port in found:
        if name not in protocols:
            raise ValueError(f"listener.security.protocol.map: no security protocol for listener {name}")
        if name in advertised_by_name:
            advertised_host, advertised_port = advertised_by_name[name]
            result.append(Listener(name, protocols[name], host, port, advertised_host or default_advertised_host,
                                   advertised_port or None))
        else:
            result.append(Listener(name, protocols[name], host, port, host or default_advertised_host))
        result[-1].controller = name in controllers
    return sorted(result, key=lambda listener: listener.controller)  # (a stable sort)
