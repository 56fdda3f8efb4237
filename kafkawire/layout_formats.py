"""``struct`` formats derived from construct declarations, so a layout is declared once.

The records and pcap layouts are declared with construct (readable, and what tests and tools parse
with); the per-record and per-packet hot paths use the ``struct.Struct`` these functions derive from
the same declarations, so the two cannot drift apart.
"""
from __future__ import annotations

from struct import Struct

from construct import Bytes, Struct as Layout


def packed(layout: Layout) -> Struct:
    """The ``struct.Struct`` that reads and writes ``layout``'s fields in order, in its byte order."""
    order, codes = None, []
    for field in layout.subcons:
        sub = field.subcon
        if isinstance(sub, Bytes):
            codes.append(f"{sub.length}s")
            continue
        fmt = sub.fmtstr  # e.g. ">q"
        if order is not None and fmt[0] != order:
            raise ValueError(f"{layout} mixes byte orders")
        order = fmt[0]
        codes.append(fmt[1:])
    return Struct((order or ">") + "".join(codes))


def offset_of(layout: Layout, name: str) -> int:
    """Where field ``name`` starts in ``layout``."""
    size = 0
    for field in layout.subcons:
        if field.name == name:
            return size
        size += field.sizeof()
    raise KeyError(name)
