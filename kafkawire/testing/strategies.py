"""Hypothesis strategies for testing Kafka code against kafkawire's codecs (needs ``kafkawire[fuzz]``).

Each strategy hands ``kafkawire.testing.values`` a Random that Hypothesis controls, so a failing
example replays from its seed and shrinks (towards fewer fields set, shorter values, smaller counts).
"""
from __future__ import annotations

from hypothesis import strategies as st

from kafkawire import messages as _messages
from kafkawire.records import Codec

from .layout import message_fields
from .mutations import mutate
from .values import MessageValues, record_batches as _record_batches

__all__ = ["messages", "requests", "responses", "any_message", "record_batches", "mutated"]


def _class(cls_or_name):
    return _messages.message_class(cls_or_name) if isinstance(cls_or_name, str) else cls_or_name


def _randoms():
    return st.randoms(use_true_random=False, note_method_calls=False)


def messages(cls_or_name, version: int, *, unknown_tags: bool = True, boundary: float = 0.03,
             max_items: int = 3) -> st.SearchStrategy:
    """Messages of a generated class (or its name: "FetchRequest") valid at ``version``: every field the
    version carries, nulls where allowed, tagged fields present or not, with ``unknown_tags`` unknown
    tagged fields on flexible structs, and lengths and counts at varint boundaries now and then."""
    cls = _class(cls_or_name)
    low, high = cls.VALID_VERSIONS
    if not low <= version <= high:
        raise ValueError(f"{cls.NAME} has no version {version} (versions {low}-{high})")
    message_fields(cls)  # load the schema data now, not in the first draw, which Hypothesis times as too slow
    return _randoms().map(lambda rng: MessageValues(
        rng, boundary=boundary, unknown_tags=0.3 if unknown_tags else 0.0, max_items=max_items).message(cls, version))


def requests(api, version: int | None = None, **options) -> st.SearchStrategy:
    """``(version, request)`` of an API (key or name) at ``version``, or at any of its versions."""
    info = _messages.api(api)
    versions = st.just(version) if version is not None else st.integers(info.min_version, info.max_version)
    return versions.flatmap(lambda v: st.tuples(st.just(v), messages(info.request_class, v, **options)))


def responses(api, version: int | None = None, **options) -> st.SearchStrategy:
    """``(version, response)`` of an API (key or name) at ``version``, or at any of its versions."""
    info = _messages.api(api)
    versions = st.just(version) if version is not None else st.integers(info.min_version, info.max_version)
    return versions.flatmap(lambda v: st.tuples(st.just(v), messages(info.response_class, v, **options)))


def any_message(**options) -> st.SearchStrategy:
    """``(class, version, message)`` for any request or response of any API at any of its versions."""
    pairs = [(cls, v) for info in _messages.apis() for cls in (info.request_class, info.response_class)
             for v in range(info.min_version, info.max_version + 1)]
    return st.sampled_from(pairs).flatmap(
        lambda pair: st.tuples(st.just(pair[0]), st.just(pair[1]), messages(pair[0], pair[1], **options)))


def record_batches(*, magic: int | None = None, codec: Codec | None = None, control: bool | None = None,
                   batches: int | None = None) -> st.SearchStrategy[bytes]:
    """Record batches as a ``records`` field holds them: magic 0, 1 or 2, every codec the magic allows,
    control (transaction marker) batches; fix any of them by argument."""
    return _randoms().map(lambda rng: _record_batches(rng, magic=magic, codec=codec, control=control,
                                                      batches=batches))


def mutated(data: st.SearchStrategy[bytes] | bytes) -> st.SearchStrategy[bytes]:
    """Bytes (or a strategy of them) after one to three byte-level mutations (``kafkawire.testing.mutations``)."""
    source = st.just(data) if isinstance(data, (bytes, bytearray)) else data
    return st.tuples(source, _randoms()).map(lambda pair: mutate(bytes(pair[0]), pair[1])[0])
