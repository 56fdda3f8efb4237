"""``kafkawire show --filter EXPR``: which frames and problems a look at a capture keeps.

An expression is terms separated by spaces, all of which must hold; a term is ``field=value`` (or
``field!=value``), where a value may list alternatives separated by commas. Fields:

    api=Fetch,3          the API, by name (any case) or key
    client=rdkafka       the client id (a substring of it) or the client's endpoint (ip:port, or its ip)
    topic=orders         a topic the frame names (its name, or its id as text; a topic named by id
                         has the name a response read before it paired with the id)
    error                a response with a non-zero error code anywhere, or a frame that does not decode
    error=6,NOT_LEADER_OR_FOLLOWER   a response carrying one of these error codes (number or Kafka's name)
    corr=12              the correlation id
    dir=request          request or response
    problems             only the problems (problems=gap,resync: of these kinds)

A problem has no topic or error codes: a filter on those leaves problems out; one on the API, the
client's endpoint or the correlation id keeps the problems that say it.
"""
from __future__ import annotations

from typing import NamedTuple

from kafkawire.error_codes import ErrorCode
from kafkawire.messages import apis

__all__ = ["FrameFilter", "FilterError", "Candidate"]

_FIELDS = ("api", "client", "topic", "error", "corr", "dir", "problems")


class FilterError(ValueError):
    """An expression that cannot be read; says which term and why."""


class Candidate(NamedTuple):
    """What a filter looks at, for a frame or a problem."""
    is_problem: bool
    problem_kind: str | None
    api_key: int | None
    client_id: str | None
    endpoints: tuple            # a frame's client endpoint; a problem's connection's two
    topics: tuple               # names and ids, as text
    error_codes: tuple          # non-zero codes
    undecodable: bool
    correlation_id: int | None
    direction: str | None


class _Term(NamedTuple):
    field: str
    values: tuple
    negated: bool


class FrameFilter:
    """The terms of one or more expressions (``--filter`` may be given more than once: all hold)."""

    def __init__(self, expressions=()):
        self.terms: list[_Term] = []
        for expression in expressions:
            for text in expression.split():
                self.terms.append(_term(text))

    def __bool__(self) -> bool:
        return bool(self.terms)

    def matches(self, item: Candidate) -> bool:
        return all(_holds(term, item) != term.negated for term in self.terms)


def _term(text: str) -> _Term:
    negated = "!=" in text
    field, sep, value = text.partition("!=" if negated else "=")
    field = field.strip().lower()
    if field not in _FIELDS:
        raise FilterError(f"{text!r}: unknown field {field!r} (fields: {', '.join(_FIELDS)})")
    if not sep:
        if field not in ("error", "problems"):
            raise FilterError(f"{text!r}: {field} needs a value ({field}=...)")
        return _Term(field, (), negated)
    values = tuple(part for part in value.split(",") if part)
    if not values:
        raise FilterError(f"{text!r}: no value after '='")
    try:
        return _Term(field, tuple(_value(field, part) for part in values), negated)
    except (KeyError, ValueError) as error:
        raise FilterError(f"{text!r}: {error}") from None


def _value(field: str, text: str):
    if field == "api":
        if text.lstrip("-").isdigit():
            return int(text)
        for info in apis():
            if info.name.lower() == text.lower():
                return info.key
        raise ValueError(f"no API named {text!r}")
    if field == "corr":
        return int(text)
    if field == "error":
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            return int(ErrorCode[text.upper()])
        except KeyError:
            raise ValueError(f"no error named {text!r}") from None
    if field == "dir":
        if text not in ("request", "response"):
            raise ValueError("dir is request or response")
        return text
    return text


def _holds(term: _Term, item: Candidate) -> bool:
    field, values = term.field, term.values
    if field == "problems":
        return item.is_problem and (not values or item.problem_kind in values)
    if field == "api":
        return item.api_key in values
    if field == "corr":
        return item.correlation_id in values
    if field == "dir":
        return item.direction in values
    if field == "client":
        return any(_client_is(value, item) for value in values)
    if field == "topic":
        return any(value in item.topics for value in values)
    if field == "error":
        if not values:
            return bool(item.error_codes) or item.undecodable
        return any(code in item.error_codes for code in values)
    raise AssertionError(field)


def _client_is(value: str, item: Candidate) -> bool:
    if item.client_id is not None and value in item.client_id:
        return True
    return any(endpoint == value or endpoint.rsplit(":", 1)[0].strip("[]") == value for endpoint in item.endpoints)
