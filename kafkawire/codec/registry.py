"""The API registry behind ``kafkawire.messages.api``: keys, names, versions and header versions."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing where codecs load
if TYPE_CHECKING:
    from .base import Message

REMOVED = (0, -1)  # the versions of a removed API: none


@dataclass(frozen=True)
class ApiInfo:
    """One API key: its request and response messages and the versions they share.

    A removed API (Kafka 4 keeps ControlledShutdown, LeaderAndIsr, StopReplica and UpdateMetadata as
    specs with ``"validVersions": "none"``, so that their keys are not reused) has the empty range
    ``REMOVED`` (0, -1) as its versions (``removed`` says so; ``range(min_version, max_version + 1)`` is
    empty) and no message classes.
    """

    key: int
    name: str  # "Fetch"
    request: str  # class names, "FetchRequest"
    response: str
    valid_versions: tuple[int, int]  # REMOVED (empty) for a removed API
    flexible_versions: tuple[int, int] | None
    response_flexible_versions: tuple[int, int] | None
    deprecated_versions: tuple[int, int] | None = None
    listeners: tuple[str, ...] = ()
    latest_version_unstable: bool = False
    _registry: "Registry | None" = field(default=None, repr=False, compare=False)

    @property
    def removed(self) -> bool:
        return self.valid_versions[1] < self.valid_versions[0]

    @property
    def min_version(self) -> int:
        return self.valid_versions[0]

    @property
    def max_version(self) -> int:
        return self.valid_versions[1]

    def supports(self, version: int) -> bool:
        return self.valid_versions[0] <= version <= self.valid_versions[1]

    def unsupported(self, version: int) -> str:
        """Why ``version`` cannot be read: the API was removed, or the version is outside its range."""
        if self.removed:
            return f"{self.name} (API key {self.key}) was removed from Kafka; it has no versions"
        return f"unsupported {self.name} version {version} (versions {self.min_version}-{self.max_version})"

    def is_flexible(self, version: int) -> bool:
        return self.flexible_versions is not None and version >= self.flexible_versions[0]

    def request_header_version(self, version: int) -> int:
        """RequestHeader version for a request of ``version`` (2 flexible, 1 classic)."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """ResponseHeader version for a response of ``version`` (1 flexible, 0 classic)."""
        if self.name == "ApiVersions":
            return 0  # KIP-511: always v0, so a client can read it before knowing the broker's versions
        flexible = self.response_flexible_versions
        return 1 if flexible is not None and version >= flexible[0] else 0

    @property
    def request_class(self) -> type[Message]:
        if self.removed:
            raise AttributeError(self.unsupported(0))
        assert self._registry is not None  # set by the Registry that holds it
        return self._registry.load(self.request)

    @property
    def response_class(self) -> type[Message]:
        if self.removed:
            raise AttributeError(self.unsupported(0))
        assert self._registry is not None
        return self._registry.load(self.response)


class Registry:
    def __init__(self, package: str, modules: dict[str, str], apis: list[ApiInfo]):
        self.package = package
        self.modules = modules
        self._by_key: dict[int, ApiInfo] = {}
        self._by_name: dict[str, ApiInfo] = {}
        self._loaded: dict[str, type[Message]] = {}
        for info in apis:
            object.__setattr__(info, "_registry", self)
            self._by_key[info.key] = info
            for alias in (info.name, info.request, info.response, info.name.lower()):
                self._by_name[alias] = info

    def api(self, key_or_name: int | str) -> ApiInfo:
        """An API by key (1), name ("Fetch", "fetch") or message name ("FetchRequest")."""
        found = (self._by_key.get(key_or_name) if isinstance(key_or_name, int)
                 else self._by_name.get(key_or_name))
        if found is None:
            raise KeyError(f"unknown API {key_or_name!r}")
        return found

    def apis(self, include_removed: bool = False) -> list[ApiInfo]:
        """The APIs by key: those with versions, and with ``include_removed`` the removed ones too."""
        return [self._by_key[key] for key in sorted(self._by_key) if include_removed or not self._by_key[key].removed]

    def load(self, name: str) -> type[Message]:
        """The generated class ``name``, importing its module on first use."""
        cls = self._loaded.get(name)
        if cls is not None:
            return cls
        module_name = self.modules.get(name)
        if module_name is None:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{self.package}.{module_name}")
        loaded: type[Message] = getattr(module, name)
        self._loaded[name] = loaded
        return loaded

    def message_class(self, name: str) -> type[Message]:
        return self.load(name)
