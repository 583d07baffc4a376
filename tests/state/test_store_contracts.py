"""Every store backend passes its kind's contract (topology.testing.contracts)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

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
from topology.testing.contracts.session import scan_key as session_scan_key
from topology.testing.contracts.window import scan_key as window_scan_key
from topology.windows import Window, Windowed

from .backends import STATE_DIRS, VERSIONED_BACKENDS, check_internals

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
"""Persistent entries borrow a StateDB each from the shared pool, given back emptied after
each test or hypothesis example by :data:`STATE_DIRS`."""


@pytest.fixture(autouse=True)
def _close_state_dirs() -> Iterator[None]:
    yield
    STATE_DIRS.close()


@pytest.mark.parametrize("backend", sorted(KEY_VALUE_BACKENDS))
def test_key_value_contract(backend: str) -> None:
    check_key_value_store(KEY_VALUE_BACKENDS[backend])


@pytest.mark.parametrize("backend", sorted(WINDOW_BACKENDS))
def test_window_contract(backend: str) -> None:
    check_window_store(WINDOW_BACKENDS[backend], backend)


@pytest.mark.parametrize("backend", sorted(SESSION_BACKENDS))
def test_session_contract(backend: str) -> None:
    check_session_store(SESSION_BACKENDS[backend], backend)


OPS = st.lists(st.tuples(st.sampled_from(["put", "delete", "put_if_absent"]),
                         st.text(alphabet="aAbé\x00", max_size=3),
                         st.one_of(st.none(), st.integers(0, 9))), max_size=40)
BOUNDS = st.one_of(st.none(), st.text(alphabet="aAbé\x00", max_size=3))


@settings(max_examples=examples(200), deadline=None)
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


def _in(value: Any, lo: Any, hi: Any) -> bool:
    """Whether ``lo <= value <= hi`` with ``None`` bounds open (str keys compare as UTF-8)."""
    if isinstance(value, str):
        value, lo, hi = (None if v is None else v.encode() for v in (value, lo, hi))
    return (lo is None or value >= lo) and (hi is None or value <= hi)


KEYS = st.text(alphabet="aAbé\x00", max_size=3)
KEY_BOUNDS = st.one_of(st.none(), KEYS)
TIMES = st.integers(-20, 120)
TIME_BOUNDS = st.one_of(st.none(), TIMES)


@settings(max_examples=examples(200), deadline=None)
@given(ops=OPS, prefix=st.text(alphabet="aAbé\x00", max_size=2), lo=BOUNDS, hi=BOUNDS,
       commit_at=st.integers(0, 40))
def test_key_value_backends_agree_both_ways(ops: list, prefix: str, lo: Any, hi: Any,
                                            commit_at: int) -> None:
    """RocksDB (committed and pending writes) answers as memory; backward is reversed forward."""
    try:
        stores = {name: make() for name, make in KEY_VALUE_BACKENDS.items()}
        for i, (op, key, value) in enumerate(ops):
            if i == commit_at:
                STATE_DIRS.commit()
            for store in stores.values():
                getattr(store, op)(*((key,) if op == "delete" else (key, value)))
        answers = []
        for store in stores.values():
            queries = [(store.range, store.reverse_range, (lo, hi)),
                       (store.prefix_scan, store.reverse_prefix_scan, (prefix,)),
                       (store.all, store.reverse_all, ())]
            got = []
            for forward, backward, args in queries:
                ahead = list(forward(*args))
                assert list(backward(*args)) == ahead[::-1]
                got.append(ahead)
            answers.append(got)
        assert answers[0] == answers[1]
    finally:
        STATE_DIRS.close()


WINDOW_OPS = st.lists(st.tuples(KEYS, st.integers(-2, 12),
                                st.one_of(st.none(), st.integers(0, 9))), max_size=40)


def _window_model(ops: list, retention: int) -> dict[tuple[str, int], int]:
    """What a window store holds after ``ops`` of ``(key, start / 10, value)``."""
    model: dict[tuple[str, int], int] = {}
    observed = -1
    for key, slot, value in ops:
        start = slot * 10
        if start > observed:
            observed = start
            model = {kw: v for kw, v in model.items() if kw[1] > observed - retention}
        if start <= observed - retention:
            continue
        if value is None:
            model.pop((key, start), None)
        else:
            model[(key, start)] = value
    return model


@settings(max_examples=examples(150), deadline=None)
@given(ops=WINDOW_OPS, retention=st.sampled_from([0, 25, 1_000]), commit_at=st.integers(0, 40),
       key_lo=KEY_BOUNDS, key_hi=KEY_BOUNDS, key=KEYS, lo=TIME_BOUNDS, hi=TIME_BOUNDS)
def test_window_stores_match_a_model_both_ways(ops: list, retention: int, commit_at: int,
                                               key_lo: Any, key_hi: Any, key: str, lo: Any,
                                               hi: Any) -> None:
    try:
        stores = {name: make(10, retention) for name, make in WINDOW_BACKENDS.items()}
        for i, (k, slot, value) in enumerate(ops):
            if i == commit_at:
                STATE_DIRS.commit()
            for store in stores.values():
                store.put(k, value, slot * 10)
        model = _window_model(ops, retention)
        want_key = [(s, v) for (k, s), v in sorted(model.items(), key=lambda kv: kv[0][1])
                    if k == key and _in(s, lo, hi)]
        for name, store in stores.items():
            # each backend in the order of its Kafka counterpart (negative starts make a
            # second segment)
            ordered = [(Windowed(k, Window(s, s + 10)), v) for (k, s), v in model.items()]
            ordered.sort(key=window_scan_key(store, name))
            want_all = ordered
            want_range = [r for r in ordered if _in(r[0].window.start, lo, hi)]
            want_keys = [r for r in want_range if _in(r[0].key, key_lo, key_hi)]
            check_internals(store)
            assert list(store.all()) == want_all
            assert list(store.backward_all()) == want_all[::-1]
            assert list(store.fetch_all(lo, hi)) == want_range
            assert list(store.backward_fetch_all(lo, hi)) == want_range[::-1]
            assert list(store.fetch(key_lo, key_hi, lo, hi)) == want_keys
            assert list(store.backward_fetch(key_lo, key_hi, lo, hi)) == want_keys[::-1]
            assert list(store.fetch(key, lo, hi)) == want_key
            assert list(store.backward_fetch(key, lo, hi)) == want_key[::-1]
    finally:
        STATE_DIRS.close()


SESSION_OPS = st.lists(st.tuples(st.sampled_from(["put", "remove"]), KEYS,
                                 st.integers(-2, 100), st.integers(0, 15), st.integers(0, 9)),
                       max_size=40)


def _session_model(ops: list, retention: int) -> dict[tuple[str, int, int], int]:
    """What a session store holds after ``ops`` of ``(op, key, start, length, aggregate)``."""
    model: dict[tuple[str, int, int], int] = {}
    observed = -1
    for op, key, start, length, agg in ops:
        end = start + length
        observed = max(observed, end)
        model = {s: v for s, v in model.items() if s[2] > observed - retention}
        if end <= observed - retention:
            continue
        if op == "remove":
            model.pop((key, start, end), None)
        else:
            model[(key, start, end)] = agg
    return model


@settings(max_examples=examples(150), deadline=None)
@given(ops=SESSION_OPS, retention=st.sampled_from([0, 30, 1_000]), commit_at=st.integers(0, 40),
       key_lo=KEY_BOUNDS, key_hi=KEY_BOUNDS, key=KEYS, earliest=TIME_BOUNDS,
       latest=TIME_BOUNDS)
def test_session_stores_match_a_model_both_ways(ops: list, retention: int, commit_at: int,
                                                key_lo: Any, key_hi: Any, key: str,
                                                earliest: Any, latest: Any) -> None:
    try:
        # a narrow segment interval puts the sessions in many segments (merged on read)
        stores = [InMemorySessionStore("s", _STR, retention, 7),
                  RocksDBSessionStore("s", _STR, retention, STATE_DIRS.keyspace("s"), 7),
                  *(make(retention) for make in SESSION_BACKENDS.values())]
        for i, (op, k, start, length, agg) in enumerate(ops):
            if i == commit_at:
                STATE_DIRS.commit()
            session = Windowed(k, Window(start, start + length))
            for store in stores:
                if op == "put":
                    store.put(session, agg)
                else:
                    store.remove(session)
        ordered = sorted(_session_model(ops, retention).items())

        def matching(r: tuple[Windowed, int]) -> bool:
            return ((earliest is None or r[0].window.end >= earliest)
                    and (latest is None or r[0].window.start <= latest))

        for store, name in zip(stores, ["memory", "rocksdb", *SESSION_BACKENDS], strict=True):
            # each backend in the order of its Kafka counterpart
            rows = sorted(((Windowed(k, Window(s, e)), v) for (k, s, e), v in ordered),
                          key=session_scan_key(store, name))
            want_keys = [r for r in rows if _in(r[0].key, key_lo, key_hi)]
            want_key = sorted((r for r in rows if r[0].key == key),
                              key=lambda r: (r[0].window.end, r[0].window.start))
            cases = [
                ("fetch", (key,), want_key),
                ("fetch", (key_lo, key_hi), want_keys),
                ("find_sessions", (key, earliest, latest),
                 [r for r in want_key if matching(r)]),
                ("find_sessions", (key_lo, key_hi, earliest, latest),
                 [r for r in want_keys if matching(r)]),
            ]
            check_internals(store)
            assert list(store.all()) == rows
            assert list(store.backward_all()) == rows[::-1]
            for method, args, want in cases:
                assert list(getattr(store, method)(*args)) == want, (method, args)
                assert list(getattr(store, f"backward_{method}")(*args)) == want[::-1]
            for (k, s, e), v in ordered:
                assert store.fetch_session(k, s, e) == v
    finally:
        STATE_DIRS.close()


VERSIONED_OPS = st.lists(st.tuples(KEYS, st.integers(0, 50),
                                   st.one_of(st.none(), st.integers(0, 9))), max_size=30)


@settings(max_examples=examples(100), deadline=None)
@given(ops=VERSIONED_OPS, lo=KEY_BOUNDS, hi=KEY_BOUNDS, key=KEYS, t_lo=TIME_BOUNDS,
       t_hi=TIME_BOUNDS)
def test_versioned_stores_agree_both_ways(ops: list, lo: Any, hi: Any, key: str, t_lo: Any,
                                          t_hi: Any) -> None:
    """Versioned stores: RocksDB answers as memory; descending/reverse are reversed.

    (A versioned store refuses inverted bounds with a ValueError, so they are put in order.)
    """
    stores = [make(history_retention_ms=30) for make in VERSIONED_BACKENDS.values()]
    try:
        for k, t, value in ops:
            for store in stores:
                if value is None:
                    store.delete(k, t)
                else:
                    store.put(k, value, t)
        t_lo = None if t_lo is None else max(t_lo, 0)
        t_hi = None if t_hi is None else max(t_hi, 0)
        if t_lo is not None and t_hi is not None and t_lo > t_hi:  # refused: a ValueError
            t_lo, t_hi = t_hi, t_lo
        if lo is not None and hi is not None and lo.encode() > hi.encode():
            lo, hi = hi, lo
        answers = []
        for store in stores:
            ahead = store.range(lo, hi)
            assert store.reverse_range(lo, hi) == ahead[::-1]
            versions = store.get_versions(key, t_lo, t_hi)
            assert store.get_versions(key, t_lo, t_hi, descending=True) == versions[::-1]
            answers.append((ahead, versions))
        assert answers[0] == answers[1]
    finally:
        for store in stores:
            store.close()
