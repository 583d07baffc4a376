"""Every store backend passes its kind's contract (topology.testing.contracts)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topology.serde import Serdes, serializer_of
from topology.state.memory import (
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryWindowStore,
)
from topology.state.rocksdb import RocksDBKeyValueStore, RocksDBSessionStore, RocksDBWindowStore
from topology.testing.contracts import (
    check_key_value_store,
    check_session_store,
    check_window_store,
)

from .backends import STATE_DIRS

_STR = serializer_of(Serdes.string())

KEY_VALUE_BACKENDS: dict[str, Callable[[], Any]] = {
    "memory": lambda: InMemoryKeyValueStore("kv", _STR),
    "rocksdb": lambda: RocksDBKeyValueStore("kv", _STR, STATE_DIRS.keyspace("kv")),
}
WINDOW_BACKENDS: dict[str, Callable[[int, int], Any]] = {
    "memory": lambda size, retention: InMemoryWindowStore("w", _STR, size, retention),
    "rocksdb": lambda size, retention: RocksDBWindowStore(
        "w", _STR, size, retention, STATE_DIRS.keyspace("w")),
}
SESSION_BACKENDS: dict[str, Callable[[int], Any]] = {
    "memory": lambda retention: InMemorySessionStore("s", _STR, retention),
    "rocksdb": lambda retention: RocksDBSessionStore(
        "s", _STR, retention, STATE_DIRS.keyspace("s")),
}
"""Persistent entries open a StateDB each (a fresh temporary directory), closed after each
test or hypothesis example by :data:`STATE_DIRS`."""


@pytest.fixture(autouse=True)
def _close_state_dirs() -> Iterator[None]:
    yield
    STATE_DIRS.close()


@pytest.mark.parametrize("backend", sorted(KEY_VALUE_BACKENDS))
def test_key_value_contract(backend: str) -> None:
    check_key_value_store(KEY_VALUE_BACKENDS[backend])


@pytest.mark.parametrize("backend", sorted(WINDOW_BACKENDS))
def test_window_contract(backend: str) -> None:
    check_window_store(WINDOW_BACKENDS[backend])


@pytest.mark.parametrize("backend", sorted(SESSION_BACKENDS))
def test_session_contract(backend: str) -> None:
    check_session_store(SESSION_BACKENDS[backend])


OPS = st.lists(st.tuples(st.sampled_from(["put", "delete", "put_if_absent"]),
                         st.text(alphabet="aAbé\x00", max_size=3),
                         st.one_of(st.none(), st.integers(0, 9))), max_size=40)
BOUNDS = st.one_of(st.none(), st.text(alphabet="aAbé\x00", max_size=3))


@settings(max_examples=200, deadline=None)
@given(ops=OPS, lo=BOUNDS, hi=BOUNDS, backend=st.sampled_from(sorted(KEY_VALUE_BACKENDS)))
def test_key_value_store_matches_a_dict(ops: list, lo: Any, hi: Any, backend: str) -> None:
    try:
        _matches_a_dict(KEY_VALUE_BACKENDS[backend](), ops, lo, hi)
    finally:
        STATE_DIRS.close()


def _matches_a_dict(store: Any, ops: list, lo: Any, hi: Any) -> None:
    model: dict[str, int] = {}
    for op, key, value in ops:
        if op == "put":
            store.put(key, value)
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        elif op == "delete":
            assert store.delete(key) == model.pop(key, None)
        else:
            assert store.put_if_absent(key, value) == model.get(key)
            if key not in model and value is not None:
                model[key] = value
    ordered = sorted(model.items(), key=lambda kv: kv[0].encode())
    want = [kv for kv in ordered if (lo is None or kv[0].encode() >= lo.encode())
            and (hi is None or kv[0].encode() <= hi.encode())]
    assert list(store.range(lo, hi)) == want
    assert list(store.reverse_range(lo, hi)) == want[::-1]
    assert list(store.all()) == ordered
    assert list(store.reverse_all()) == ordered[::-1]
