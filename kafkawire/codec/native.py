"""The optional native decoder: generated decode programs run by the C extension ``_decoder``.

Each generated module ends with ``install(MessageClass, {version: program})``. When the extension
was built (``pip install`` compiles it where a C compiler exists) and ``KAFKAWIRE_PURE_PYTHON`` is not
``1``, ``install`` puts a native reader in front of each version's generated Python reader in
``_READERS``. A native reader compiles its program on its first call. It builds the same objects as
the Python reader; on any input it cannot decode it does not make an error of its own but calls the
Python reader on the same input, which raises the DecodeError (field path, byte offset) as always.
The class also gets a native ``decode`` that runs Message.decode's short path (a small bytes or
bytearray body) without a Python frame and defers to Message.decode for everything else.
"""
from __future__ import annotations

import uuid

from ..accelerators import load
from . import base
from .base import Message
from .primitives import ZERO_UUID

_decoder = load("kafkawire.codec._decoder")
if _decoder is not None:
    _decoder.configure(uuid.UUID, ZERO_UUID, uuid.SafeUUID.unknown)
    _decoder.set_pause_gc_above(base._PAUSE_GC_ABOVE)
    base.PAUSE_GC_LISTENERS.append(_decoder.set_pause_gc_above)

ACTIVE: bool = _decoder is not None  # whether generated messages decode with the native readers

_PYTHON_DECODE = Message.__dict__["decode"].__func__


def install(cls, programs: dict) -> None:
    """Wrap each version's reader of a generated message class with a native reader of its program,
    and give the class a native ``decode``: Message.decode's short path, with no Python frame (small
    messages spend as long in that frame as in reading), deferring to Message.decode for the rest."""
    if _decoder is None:
        return
    readers = cls._READERS
    for version, program in programs.items():
        fallback = readers.get(version)
        if fallback is not None and not isinstance(fallback, _decoder.Reader):
            readers[version] = _decoder.Reader(program, fallback)
    if "decode" not in vars(cls):
        cls.decode = _decoder.Decode(cls, _PYTHON_DECODE)


def native_reader(cls, version: int):
    """The native reader of ``cls`` at ``version``, or None (pure-Python mode)."""
    reader = cls._READERS.get(version)
    return reader if _decoder is not None and isinstance(reader, _decoder.Reader) else None


def python_reader(cls, version: int):
    """The generated Python reader of ``cls`` at ``version`` (the native reader's fallback)."""
    reader = cls._READERS[version]
    native = native_reader(cls, version)
    return native.fallback if native is not None else reader
