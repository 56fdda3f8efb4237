"""The optional native codec: generated decode and encode programs run by the C extensions ``_decoder``
and ``_encoder``.

Each generated module ends with ``install(MessageClass, {version: program})``. When the extension
was built (``pip install`` compiles it where a C compiler exists) and ``KAFKAWIRE_PURE_PYTHON`` is not
``1``, ``install`` puts a native reader in front of each version's generated Python reader in
``_READERS``. A native reader compiles its program on its first call. It builds the same objects as
the Python reader; on any input it cannot decode it does not make an error of its own but calls the
Python reader on the same input, which raises the DecodeError (field path, byte offset) as always.
The class also gets a native ``decode`` that runs Message.decode's short path (a small bytes or
bytearray body) without a Python frame and defers to Message.decode for everything else.

Each module also ends with ``install_encoder(MessageClass, {version: program})``, which gives the class
``_ENCODERS``: native encoders that Message.encode, encode_parts and encode_into try first. An encoder
returns None for anything it does not write (a wrong type, an out-of-range value, a refusal), and the
generated Python writer then writes the message or raises its EncodeError, so errors are the writers'.
"""
from __future__ import annotations

import uuid

from ..accelerators import load
from . import base
from .base import Bytes, Message
from .primitives import ABSENT, ZERO_UUID

_decoder = load("kafkawire.codec._decoder")
if _decoder is not None:
    _decoder.configure(uuid.UUID, ZERO_UUID, uuid.SafeUUID.unknown)
    _decoder.set_pause_gc_above(base._PAUSE_GC_ABOVE)
    base.PAUSE_GC_LISTENERS.append(_decoder.set_pause_gc_above)

ACTIVE: bool = _decoder is not None  # whether generated messages decode with the native readers

_encoder = load("kafkawire.codec._encoder")
if _encoder is not None:
    _encoder.configure(uuid.UUID, ZERO_UUID, ABSENT)
    # Message.encode without a Python frame in front of the native encoders; the Python method stays
    # the fallback (and runs the Python writers for what the native encoders do not write).
    Message.encode = _encoder.encode_method(  # type: ignore[method-assign]
        Message, Message.__dict__["encode"])

ENCODER_ACTIVE: bool = _encoder is not None  # whether generated messages encode with the native encoders

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


def install_encoder(cls, programs: dict) -> None:
    """Give a generated message class a native encoder of each version's encode program."""
    if _encoder is not None:
        cls._ENCODERS = {version: _encoder.Encoder(program) for version, program in programs.items()}


def encode_frame(header: Message, header_version: int, body: Message, version: int) -> bytes | None:
    """The int32 size prefix, ``header`` and ``body`` written natively in one allocation, or None where
    the native encoder does not write them (the caller then takes the Python writers' path)."""
    encoders = _frame_encoders(header, header_version, body, version)
    if encoders is None:
        return None
    data: bytes | None = _encoder.frame(encoders[0], header, encoders[1], body, False)
    return data


def encode_frame_parts(header: Message, header_version: int, body: Message, version: int) -> list[Bytes] | None:
    """encode_frame as pieces: ``records`` values kept as pieces of their own (see encode_parts)."""
    encoders = _frame_encoders(header, header_version, body, version)
    if encoders is None:
        return None
    parts: list[Bytes] | None = _encoder.frame(encoders[0], header, encoders[1], body, True)
    return parts


def _frame_encoders(header: Message, header_version: int, body: Message, version: int):
    if _encoder is None:
        return None
    header_encoder = type(header)._ENCODERS.get(header_version)
    body_encoder = getattr(type(body), "_ENCODERS", {}).get(version)
    if header_encoder is None or body_encoder is None:
        return None
    return header_encoder, body_encoder


def python_encode(message: Message, version: int) -> bytes:
    """``message`` written at ``version`` by the generated Python writer (the reference)."""
    return b"".join(message._python_parts(version))
