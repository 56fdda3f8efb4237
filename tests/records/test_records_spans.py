"""SpanBuilder (kafkawire/records/_spans.c): byte spans gathered into Arrow binary/string buffers."""
from __future__ import annotations

from array import array

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from kafkawire.accelerators import load

spans = load("kafkawire.records._spans")
pytestmark = pytest.mark.skipif(spans is None, reason="the C span builder was not built")


def arrow(finished, type_=pa.binary()) -> pa.Array:
    count, null_count, validity, offsets, data = finished
    built = pa.Array.from_buffers(type_, count, [None if validity is None else pa.py_buffer(validity),
                                                 pa.py_buffer(offsets), pa.py_buffer(data)], null_count=null_count)
    built.validate(full=True)
    return built


def spans_of(data: bytes, values: list[bytes | None]) -> tuple[array, array]:
    """Starts and lengths of ``values`` laid end to end in ``data`` (nulls: length -1)."""
    starts, lengths, position = array("i"), array("i"), 0
    for value in values:
        if value is None:
            starts.append(0)
            lengths.append(-1)
        else:
            assert data[position:position + len(value)] == value
            starts.append(position)
            lengths.append(len(value))
            position += len(value)
    return starts, lengths


maybe_bytes = st.none() | st.binary(max_size=40)


@settings(max_examples=200)
@given(st.lists(st.lists(maybe_bytes, max_size=20), max_size=6))
def test_batches_of_spans_become_one_array_of_their_values(batches):
    builder = spans.SpanBuilder()
    expected = []
    for values in batches:
        data = b"".join(v for v in values if v is not None)
        assert builder.append(data, *spans_of(data, values)) is True
        expected.extend(values)
    assert len(builder) == len(expected)
    assert builder.nbytes == sum(len(v) for v in expected if v is not None)
    assert arrow(builder.finish()).to_pylist() == expected
    assert len(builder) == 0 and builder.nbytes == 0  # finish empties it
    assert arrow(builder.finish()).to_pylist() == []


def test_spans_may_overlap_repeat_and_come_in_any_order():
    builder = spans.SpanBuilder()
    data = b"abcdef"
    builder.append(data, array("i", [4, 0, 0, 6]), array("i", [2, 6, 3, 0]))
    assert arrow(builder.finish()).to_pylist() == [b"ef", b"abcdef", b"abc", b""]


def test_a_null_after_many_values_keeps_the_earlier_ones_valid():
    builder = spans.SpanBuilder()
    data = b"x" * 100
    builder.append(data, array("i", range(100)), array("i", [1] * 100))
    builder.append(data, array("i", [0, 0]), array("i", [-1, 2]))
    result = arrow(builder.finish())
    assert result.null_count == 1
    assert result.to_pylist() == [b"x"] * 100 + [None, b"xx"]


@settings(max_examples=500)
@given(st.binary(max_size=12) | st.text(max_size=6).map(lambda s: s.encode("utf-8")))
def test_utf8_checking_agrees_with_pythons_strict_decoder(raw):
    try:
        raw.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    builder = spans.SpanBuilder(utf8=True)
    assert builder.append(raw, array("i", [0]), array("i", [len(raw)])) is valid
    if valid:
        assert arrow(builder.finish(), pa.string()).to_pylist() == [raw.decode("utf-8")]


@pytest.mark.parametrize("raw", [b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
                                 b"\xe2\x82", b"\x80"])
def test_overlong_forms_surrogates_and_truncations_are_not_utf8(raw):
    assert spans.SpanBuilder(utf8=True).append(raw, array("i", [0]), array("i", [len(raw)])) is False


def test_a_batch_that_fails_the_utf8_check_appends_nothing():
    builder = spans.SpanBuilder(utf8=True)
    builder.append(b"ok", array("i", [0]), array("i", [2]))
    data = b"fine\xff"
    assert builder.append(data, array("i", [0, 4]), array("i", [4, 1])) is False
    assert len(builder) == 1 and builder.nbytes == 2
    assert arrow(builder.finish(), pa.string()).to_pylist() == ["ok"]


@pytest.mark.parametrize("starts, lengths", [([0], [7]), ([5], [2]), ([-1], [1]), ([0], [-2]), ([7], [0])])
def test_a_span_outside_the_data_is_refused_before_anything_is_copied(starts, lengths):
    builder = spans.SpanBuilder()
    with pytest.raises(ValueError, match="outside the 6 bytes"):
        builder.append(b"abcdef", array("i", [0] + starts), array("i", [1] + lengths))
    assert len(builder) == 0


def test_malformed_span_arrays_are_refused():
    builder = spans.SpanBuilder()
    with pytest.raises(ValueError, match="differ in length"):
        builder.append(b"abc", array("i", [0, 1]), array("i", [1]))
    with pytest.raises(ValueError, match="whole number of int32"):
        builder.append(b"abc", b"\x00\x00\x00", b"\x00\x00\x00")
    with pytest.raises(TypeError):
        builder.append("text", array("i"), array("i"))
