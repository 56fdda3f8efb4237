"""CRC-32C (Castagnoli), the checksum of a record batch: the crc32c package's C function, loaded
without the package's ``__init__`` (which reads its own version with ``importlib.metadata``, the
largest part of the cost of importing it).
"""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING
from importlib.machinery import ExtensionFileLoader, ModuleSpec, PathFinder
from types import ModuleType

__all__ = ["crc32c"]


def _load_extension() -> ModuleType:
    """``crc32c._crc32c``: the one already imported, else loaded from the package's folder."""
    loaded = sys.modules.get("crc32c._crc32c")
    if loaded is not None:
        return loaded
    package = PathFinder.find_spec("crc32c")  # found, not imported
    spec: ModuleSpec | None = None
    if package is not None and package.submodule_search_locations:
        spec = PathFinder.find_spec("crc32c._crc32c", list(package.submodule_search_locations))
    if spec is None or not isinstance(spec.loader, ExtensionFileLoader):
        import crc32c as whole  # an unusual install: the package's own import
        return whole
    module = spec.loader.create_module(spec)
    spec.loader.exec_module(module)
    sys.modules[spec.name] = module  # the package, imported later, uses this one
    return module


if TYPE_CHECKING:  # the package's typed signature
    from crc32c import crc32c as crc32c
else:
    crc32c = _load_extension().crc32c
