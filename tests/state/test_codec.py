"""The state codec writes the types records carry and reads them back exactly."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import Window, Windowed
from topology.state.codec import StateCodecError, _write, decode, encode, encodes_surely

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"])), st.binary(),
    st.builds(Window, st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1)),
)
VALUES = st.recursive(
    st.one_of(SCALARS, st.builds(Windowed, SCALARS.filter(lambda v: not isinstance(v, float)),
                                 st.builds(Window, st.integers(0, 10**6),
                                           st.integers(0, 10**6)))),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
                            st.dictionaries(st.text(max_size=3), inner, max_size=4)),
    max_leaves=20)


@settings(max_examples=examples(500))
@given(VALUES)
def test_round_trip(value: object) -> None:
    back = decode(encode(value))
    assert back == value and type(back) is type(value)


@settings(max_examples=examples(300))
@given(st.one_of(st.integers(), st.text(alphabet=st.characters(blacklist_categories=["Cs"]))))
def test_fast_paths_write_the_general_layout(value: object) -> None:
    general: list[bytes] = []
    _write(value, general.append)
    assert encode(value) == b"".join(general)
    assert decode(bytearray(encode(value))) == decode(memoryview(encode(value))) == value


@settings(max_examples=examples(300))
@given(st.lists(st.one_of(VALUES, st.integers(-(2**70), 2**70), st.binary(), st.none(),
                          st.lists(SCALARS, max_size=3).map(tuple)), max_size=6))
def test_a_sequence_writes_each_item_as_the_item_alone(items: list[object]) -> None:
    """Lists and tuples write their items in a loop of their own: the bytes are the items'."""
    body = len(items).to_bytes(4, "big") + b"".join(encode(item) for item in items)
    assert encode(items) == b"l" + body
    assert encode(tuple(items)) == b"t" + body
    assert decode(b"l" + body) == items


@pytest.mark.parametrize("kind", [list, tuple, dict])
def test_deep_nesting_reads_back_as_deep_as_it_was_written(kind: type) -> None:
    """A container costs one stack frame per level of nesting, reading and writing."""
    value: object = None
    for _ in range(800):
        value = {"k": value} if kind is dict else kind([value])
    assert decode(encode(value)) == value


@settings(max_examples=examples(300))
@given(st.integers(0, 4), st.binary(max_size=40))
def test_foreign_items_of_a_sequence_are_refused_never_half_read(n: int, data: bytes) -> None:
    framed = b"t" + n.to_bytes(4, "big") + data
    try:
        value = decode(framed)
    except StateCodecError:
        return
    assert encode(value) == framed


@settings(max_examples=examples(300))
@given(st.one_of(VALUES, st.text(), st.integers(-(2**70), 2**70), st.floats()))
def test_what_encodes_surely_encodes(value: object) -> None:
    """A store holds such values unencoded until its commit: their encoding cannot fail."""
    if encodes_surely(value):
        assert decode(encode(value)) == value or value != value  # NaN
    if isinstance(value, str) and not value.isascii():
        assert not encodes_surely(value)


@pytest.mark.parametrize(("value", "sure"), [
    (None, True), (True, True), (1.5, True), (2**63 - 1, True), (-(2**63), True),
    (2**63, False), ("user-1", True), ("é", False), ("\ud800", False), (b"x", False),
    ((1, 2), False), (Window(0, 1), False)])
def test_encodes_surely_says_so_for_scalars_only(value: object, sure: bool) -> None:
    assert encodes_surely(value) is sure


def test_special_floats_and_big_ints() -> None:
    assert math.isnan(decode(encode(float("nan"))))
    assert decode(encode(float("-inf"))) == float("-inf")
    for big in (2**63, -(2**63) - 1, 10**40, -(10**40)):
        assert decode(encode(big)) == big


def test_a_type_without_a_layout_asks_for_a_serde() -> None:
    @dataclass
    class Point:
        x: int

    with pytest.raises(StateCodecError, match="Point.*defined inside a function.*serde"):
        encode(Point(1))
    with pytest.raises(StateCodecError, match="type complex.*serde"):
        encode([{1, 2}, complex(1, 2)])
    with pytest.raises(StateCodecError, match="type object.*serde"):
        encode({"k": object()})
    with pytest.raises(StateCodecError, match="cannot write str"):
        encode("\ud800")


PINNED = [  # the bytes state written before the codec grew more types: they must still read
    (None, b"N"), (True, b"T"), (False, b"F"),
    (7, b"i\x00\x00\x00\x00\x00\x00\x00\x07"), (-1, b"i" + b"\xff" * 8),
    (2**70, b"I\x00\x00\x00\t@" + bytes(8)),
    (1.5, b"d?\xf8\x00\x00\x00\x00\x00\x00"),
    ("\u00e9", b"s\x00\x00\x00\x02\xc3\xa9"), (b"ab", b"b\x00\x00\x00\x02ab"),
    ((1, "a"), b"t\x00\x00\x00\x02i\x00\x00\x00\x00\x00\x00\x00\x01s\x00\x00\x00\x01a"),
    ([None, 2.0], b"l\x00\x00\x00\x02Nd@\x00\x00\x00\x00\x00\x00\x00"),
    ({"k": [1]}, b"m\x00\x00\x00\x01s\x00\x00\x00\x01kl\x00\x00\x00\x01i" + bytes(7) + b"\x01"),
    (Window(0, 5000), b"W" + bytes(14) + b"\x13\x88"),
    (Windowed("user", Window(0, 10)), b"ws\x00\x00\x00\x04user" + bytes(15) + b"\n"),
]


@pytest.mark.parametrize(("value", "data"), PINNED, ids=[repr(v) for v, _ in PINNED])
def test_existing_encodings_are_unchanged(value: object, data: bytes) -> None:
    assert encode(value) == data
    back = decode(data)
    assert back == value and type(back) is type(value)
    assert encode(bytearray(b"x")) == encode(b"x")  # bytes-likes still read back as bytes


@settings(max_examples=examples(300))
@given(st.binary(max_size=40))
def test_foreign_bytes_are_refused_never_half_read(data: bytes) -> None:
    try:
        value = decode(data)
    except StateCodecError:
        return
    assert encode(value) == data  # whatever decodes is a whole, canonical value


def test_truncated_and_trailing_bytes_are_refused() -> None:
    data = encode(("abc", 1))
    for cut in range(1, len(data)):
        with pytest.raises(StateCodecError):
            decode(data[:cut])
    with pytest.raises(StateCodecError, match="left after"):
        decode(data + b"x")
