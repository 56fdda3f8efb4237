"""Field defaults: the spec's ``default`` literal turned into a Python value, as upstream's generator reads it."""
from __future__ import annotations

import base64
import re
import uuid

from .model import INTEGER_RANGES, FieldSpec

NULL = object()  # the spec's "null" default
_DECIMAL_INTEGER = re.compile(r"[+-]?[0-9]+")
_HEX_INTEGER = re.compile(r"[+-]?[0-9a-fA-F]+")


def parse_default(spec_field: FieldSpec):
    """The field's default as a Python value (``NULL`` for null); raises ValueError for a bad literal."""
    kind = spec_field.type.kind
    text = spec_field.default
    if text is None or (text == "" and kind not in ("string",)):
        return _builtin_default(kind)
    if text == "null":
        if kind == "string" or kind in ("bytes", "records", "array", "struct"):
            return NULL
        raise ValueError(f"a {spec_field.type} field cannot default to null")
    if kind == "bool":
        if text.lower() not in ("true", "false"):  # upstream compares ignoring case
            raise ValueError(f"invalid bool default {text!r}")
        return text.lower() == "true"
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        # As upstream: a literal "0x" prefix means hex, then Java's valueOf (an optional sign, digits).
        hex_digits = text.startswith("0x")
        digits = text[2:] if hex_digits else text
        if not (_HEX_INTEGER if hex_digits else _DECIMAL_INTEGER).fullmatch(digits):
            raise ValueError(f"invalid {kind} default {text!r}")
        number = int(digits, 16 if hex_digits else 10)
        if not low <= number <= high:
            raise ValueError(f"default {text!r} out of range for {kind}")
        return number
    if kind == "float64":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"invalid float64 default {text!r}") from None
    if kind == "uuid":
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except ValueError:
            raise ValueError(f"invalid uuid default {text!r}") from None
        if len(raw) != 16:
            raise ValueError(f"invalid uuid default {text!r}: not 16 bytes")
        return uuid.UUID(bytes=raw)
    if kind == "string":
        return text
    raise ValueError(f"a {spec_field.type} field can only default to \"\" or \"null\", not {text!r}")


def _builtin_default(kind: str):
    return {
        "bool": False, "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
        "float64": 0.0, "uuid": uuid.UUID(int=0), "string": "", "bytes": b"", "records": NULL,
        "array": (),
    }.get(kind, "struct")  # "struct": a new instance of the struct with its own defaults
