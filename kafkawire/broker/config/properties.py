"""Java ``.properties`` files, as ``kafka-server-start.sh server.properties`` reads them
(``java.util.Properties.load`` of a byte stream): ISO-8859-1 text; ``key=value``, ``key: value`` or
``key value``; ``#`` and ``!`` comments; lines ending in an odd number of backslashes go on in the
next (its leading blanks dropped); ``\\t``, ``\\n``, ``\\uXXXX`` and escaped separators in keys and
values. Lines end at ``\\n``, ``\\r`` or ``\\r\\n`` only."""
from __future__ import annotations

import re

__all__ = ["parse_properties", "read_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_LINE_END = re.compile(r"\r\n|\r|\n")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def read_properties(path) -> dict[str, str]:
    with open(path, "rb") as handle:
        return parse_properties(handle.read().decode("iso-8859-1"))


def parse_properties(text: str) -> dict[str, str]:
    properties: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        properties[key] = value
    return properties


def _logical_lines(text: str):
    pending = ""
    for raw in _LINE_END.split(text):
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line goes on
            pending += line[:-1]
            continue
        yield pending + line
        pending = ""
    if pending:
        yield pending


def _split(line: str) -> tuple[str, str]:
    key_chars: list[str] = []
    index = 0
    while index < len(line):
        char = line[index]
        if char == "\\" and index + 1 < len(line):
            key_chars.append(line[index:index + 2])
            index += 2
            continue
        if char in "=: \t\f":
            break
        key_chars.append(char)
        index += 1
    rest = line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape("".join(key_chars)), _unescape(rest)


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        following = text[index + 1]
        if following == "u":
            digits = text[index + 2:index + 6]
            if not _HEX4.fullmatch(digits):  # Java's "Malformed \\uxxxx encoding."
                raise ValueError(f"malformed \\uxxxx escape in {text!r}")
            out.append(chr(int(digits, 16)))
            index += 6
            continue
        out.append(_ESCAPES.get(following, following))
        index += 2
    return "".join(out)
