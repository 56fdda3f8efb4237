"""JAAS configuration entries as Kafka reads them from ``sasl.jaas.config`` (a client's login, or a
broker listener's)::

    org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";

``parse_jaas`` gives ``(login module, control flag, options)``. Kafka allows exactly one login module
in a ``sasl.jaas.config`` value.
"""
from __future__ import annotations

import re

__all__ = ["JaasEntry", "parse_jaas"]

_TOKEN = re.compile(r'\s*(?:(;)|([A-Za-z_$][\w.$-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)|([A-Za-z_$][\w.$]*))')
_FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasEntry(tuple):
    """``(module, flag, options)``."""

    @property
    def module(self) -> str:
        return self[0]

    @property
    def flag(self) -> str:
        return self[1]

    @property
    def options(self) -> dict[str, str]:
        return self[2]


def parse_jaas(text: str) -> JaasEntry:
    """The one login module entry of a ``sasl.jaas.config`` value (raises ValueError saying what is wrong)."""
    position, words, options, ended = 0, [], {}, False
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"invalid JAAS configuration at character {position}: {text[position:position + 20]!r}")
        position = match.end()
        if match.group(1):
            ended = True
            if text[position:].strip():
                raise ValueError("a JAAS configuration value must hold exactly one login module")
            break
        if match.group(2):
            value = match.group(3)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            options[match.group(2)] = value
        elif options:
            raise ValueError(f"unexpected {match.group(4)!r} after the options of the login module")
        else:
            words.append(match.group(4))
    if not ended:
        raise ValueError("a JAAS configuration value must end with ';'")
    if len(words) != 2 or words[1].lower() not in _FLAGS:
        raise ValueError("a JAAS configuration value starts with a login module and one of "
                         + ", ".join(_FLAGS))
    return JaasEntry((words[0], words[1].lower(), options))
