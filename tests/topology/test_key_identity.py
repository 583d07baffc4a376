"""Key identities: equal exactly when the serialized bytes are (topology._key_identity)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import Serdes, Window, Windowed
from topology._key_bytes import fallback_key_bytes
from topology._key_identity import key_identity, own_identity_type
from topology.serde import serializer_of, windowed_serializer

EIGHT = st.binary(min_size=8, max_size=8)
KEYS = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.integers(-(2**57), 2**57), st.booleans(),
    st.floats(allow_nan=False), st.text(max_size=10), st.binary(max_size=10), EIGHT,
    EIGHT.map(lambda b: b"\x00" + b[1:]), EIGHT.map(lambda b: b"\xff" + b[1:]),
    st.text(min_size=1, max_size=8).map(lambda s: "\x00" + s),
    st.tuples(st.integers(-(2**63), 2**63 - 1), st.text(max_size=3)))
"""Keys of every type the fallback encoding writes (not ``None``: a null key is no key, dropped
before any store or buffer, though its bytes are the empty ones)."""


def _same(serializer: Callable[[Any], Any], a: Any, b: Any) -> None:
    identity = key_identity(serializer)
    assert (identity(a) == identity(b)) == (serializer(a) == serializer(b)), (a, b)
    assert hash(identity(a)) == hash(identity(a))


@settings(max_examples=examples(300))
@given(KEYS, KEYS)
def test_keys_without_a_serde_are_one_key_exactly_when_their_bytes_are(a: Any, b: Any) -> None:
    _same(fallback_key_bytes, a, b)
    data = fallback_key_bytes(a)
    # the same bytes read back as another type have the same identity
    _same(fallback_key_bytes, a, data)
    if len(data) == 8:
        _same(fallback_key_bytes, a, int.from_bytes(data, "big", signed=True))


@settings(max_examples=examples(200))
@given(st.text(max_size=10), st.text(max_size=10), st.integers(-(2**63), 2**63 - 1),
       st.integers(-(2**63), 2**63 - 1))
def test_string_and_long_keys_of_their_serdes(s: str, t: str, i: int, j: int) -> None:
    _same(serializer_of(Serdes.string()), s, t)
    _same(serializer_of(Serdes.long()), i, j)


@pytest.mark.parametrize("serializer", [
    serializer_of(Serdes.string()), serializer_of(Serdes.long()), fallback_key_bytes])
def test_common_keys_are_their_own_identity(serializer: Callable[[Any], Any]) -> None:
    identity = key_identity(serializer)
    for key in (["user-123", "", "é" * 4] if serializer is not serializer_of(Serdes.long())
                else []) + ([5, -5, 2**40] if serializer is not serializer_of(Serdes.string())
                            else []):
        assert identity(key) is key


def test_own_types() -> None:
    assert own_identity_type(serializer_of(Serdes.string())) is str
    assert own_identity_type(serializer_of(Serdes.long())) is int
    assert own_identity_type(fallback_key_bytes) is None  # not every str or int is its own
    assert own_identity_type(serializer_of(Serdes.double())) is None


@settings(max_examples=examples(200))
@given(KEYS, KEYS, st.integers(0, 100), st.integers(0, 100))
def test_windowed_keys_go_by_the_inner_bytes_and_the_window(a: Any, b: Any, s: int,
                                                            t: int) -> None:
    serializer = windowed_serializer(None, session=True)
    _same(serializer, Windowed(a, Window(s, s + 10)), Windowed(b, Window(t, t + 10)))


def test_double_keys_zero_and_negative_zero_are_two() -> None:
    identity = key_identity(serializer_of(Serdes.double()))
    assert identity(0.0) != identity(-0.0) and identity(0.0) == identity(0.0)
