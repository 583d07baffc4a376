"""The in-memory stores keep their key order sorted as writes come, instead of re-sorting it.

Each store kind against a plain model (a dict, sorted from scratch for every query) over
random interleavings of writes and range queries (forward and backward, open bounds),
``_check()`` after every step; then a work count: once built, the order is never rebuilt,
and a key-value range after a write serializes no key but the written one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology.state.memory import (
    InMemoryKeyValueStore,
    InMemorySessionStore,
    InMemoryVersionedKeyValueStore,
    InMemoryWindowStore,
)
from topology.windows import Window, Windowed

INTS = st.integers(-300, 300)
BOUNDS = st.tuples(st.none() | INTS, st.none() | INTS)


def signed(key: int) -> bytes:
    """Two bytes, big-endian, two's complement: negative keys sort after positive ones."""
    return key.to_bytes(2, "big", signed=True)


def collapsing(key: int) -> bytes:
    """Many keys per bytes: keys with equal bytes are one key (the last one written shows)."""
    return signed(key % 7)


def in_range(x: Any, lo: Any, hi: Any) -> bool:
    return (lo is None or lo <= x) and (hi is None or x <= hi)


# -- key-value ----------------------------------------------------------------------------------

KV_OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), INTS, st.none() | st.integers(0, 9)),
    st.tuples(st.just("upsert"), INTS, st.none() | st.integers(0, 9)),
    st.tuples(st.just("delete"), INTS),
    st.tuples(st.sampled_from(["range", "reverse_range"]), BOUNDS),
    st.tuples(st.sampled_from(["prefix_scan", "reverse_prefix_scan"]), INTS),
), max_size=60)


@settings(max_examples=examples(200))
@given(ops=KV_OPS, collide=st.booleans())
def test_key_value_matches_a_re_sorted_model(ops: list[tuple[Any, ...]], collide: bool) -> None:
    ser = collapsing if collide else signed
    store = InMemoryKeyValueStore("kv", ser)
    by_bytes: dict[bytes, tuple[int, int]] = {}  # key bytes -> (key last written, value)
    model: dict[int, int] = {}
    for step, (name, *args) in enumerate(ops):
        if name in ("put", "upsert"):
            key, value = args
            if name == "put":
                store.put(key, value)
            else:
                item = store.upsert(key, value, 7)
                assert (item is None) == (ser(key) not in by_bytes), step
            if value is None:
                by_bytes.pop(ser(key), None)
            else:
                by_bytes[ser(key)] = (key, value)
        elif name == "delete":
            gone = by_bytes.pop(ser(args[0]), None)
            assert store.delete(args[0]) == (None if gone is None else gone[1]), step
        model = dict(by_bytes.values())
        if name.endswith("prefix_scan"):
            start = ser(args[0])[:1]
            want = [(k, v) for k, v in sorted(model.items(), key=lambda p: ser(p[0]))
                    if ser(k).startswith(start)]
            got = list(getattr(store, name)(args[0], lambda k: ser(k)[:1]))
            assert got == (want[::-1] if name.startswith("reverse") else want), step
        elif name.endswith("range"):
            lo, hi = args[0]
            blo = None if lo is None else ser(lo)
            bhi = None if hi is None else ser(hi)
            want = [(k, v) for k, v in sorted(model.items(), key=lambda p: ser(p[0]))
                    if in_range(ser(k), blo, bhi)]
            got = list(getattr(store, name)(lo, hi))
            assert got == (want[::-1] if name == "reverse_range" else want), (step, name)
        store._check()
    assert list(store.all()) == sorted(model.items(), key=lambda p: ser(p[0]))
    assert list(store.reverse_all()) == list(store.all())[::-1]
    store._check()


# -- session ------------------------------------------------------------------------------------

SESSION_OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(-20, 20), st.integers(0, 60), st.integers(0, 5),
              st.none() | st.integers(0, 9)),
    st.tuples(st.sampled_from(["fetch", "backward_fetch"]),
              st.tuples(st.none() | st.integers(-20, 20), st.none() | st.integers(-20, 20))),
), max_size=60)


@settings(max_examples=examples(200))
@given(ops=SESSION_OPS, retention=st.integers(0, 40))
def test_session_store_matches_a_re_sorted_model(ops: list[tuple[Any, ...]],
                                                 retention: int) -> None:
    store = InMemorySessionStore("s", signed, retention_ms=retention, segment_interval_ms=7)
    model: dict[tuple[int, int, int], int] = {}  # (key, start, end) -> aggregate
    observed = -1
    for step, (name, *args) in enumerate(ops):
        if name == "put":
            key, start, length, agg = args
            end = start + length
            store.put(Windowed(key, Window(start, end)), agg)
            observed = max(observed, end)
            if end > observed - retention:
                if agg is None:
                    model.pop((key, start, end), None)
                else:
                    model[(key, start, end)] = agg
        else:
            lo, hi = args[0]
            blo = None if lo is None else signed(lo)
            bhi = None if hi is None else signed(hi)
            if blo is not None and bhi is not None and blo > bhi:
                want: list[tuple[int, int, int, int]] = []
            else:
                want = sorted(((k, s, e, a) for (k, s, e), a in model.items()
                               if e > observed - retention and in_range(signed(k), blo, bhi)),
                              key=lambda r: (r[2], signed(r[0]), r[1]))  # Kafka's order
            got = [(w.key, w.window.start, w.window.end, a)
                   for w, a in getattr(store, name)(lo, hi)]
            assert got == (want[::-1] if name == "backward_fetch" else want), (step, name)
        store._check()


# -- window -------------------------------------------------------------------------------------

WINDOW_OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(-20, 20), st.integers(0, 80), st.none()
              | st.integers(0, 9)),
    st.tuples(st.sampled_from(["fetch_all", "backward_fetch_all"]),
              st.tuples(st.none() | st.integers(0, 80), st.none() | st.integers(0, 80))),
    st.tuples(st.sampled_from(["fetch", "backward_fetch"]),
              st.tuples(st.none() | st.integers(-20, 20), st.none() | st.integers(-20, 20)),
              st.tuples(st.none() | st.integers(0, 80), st.none() | st.integers(0, 80))),
), max_size=60)


@settings(max_examples=examples(200))
@given(ops=WINDOW_OPS, retention=st.integers(0, 40))
def test_window_store_matches_a_re_sorted_model(ops: list[tuple[Any, ...]],
                                                retention: int) -> None:
    store = InMemoryWindowStore("w", signed, 10, retention)
    model: dict[tuple[int, int], int] = {}  # (key, start) -> value
    observed = -1
    for step, (name, *args) in enumerate(ops):
        if name == "put":
            key, start, value = args
            store.put(key, value, start)
            observed = max(observed, start)
            if start > observed - retention:
                if value is None:
                    model.pop((key, start), None)
                else:
                    model[(key, start)] = value
            continue
        live = [(k, s, v) for (k, s), v in model.items() if s > observed - retention]
        if name.endswith("fetch_all"):
            t0, t1 = args[0]
            want = sorted(((k, s, v) for k, s, v in live if in_range(s, t0, t1)),
                          key=lambda r: (r[1], signed(r[0])))
            got = [(w.key, w.window.start, v) for w, v in getattr(store, name)(t0, t1)]
        else:
            (k0, k1), (t0, t1) = args
            blo = None if k0 is None else signed(k0)
            bhi = None if k1 is None else signed(k1)
            want = sorted(((k, s, v) for k, s, v in live if in_range(signed(k), blo, bhi)
                           and in_range(s, t0, t1)),
                          key=lambda r: (r[1], signed(r[0])))  # Kafka's order
            got = [(w.key, w.window.start, v) for w, v in getattr(store, name)(k0, k1, t0, t1)]
        assert got == (want[::-1] if name.startswith("backward") else want), (step, name)
        store._check()
    store._check()


# -- versioned ----------------------------------------------------------------------------------

VERSIONED_OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), INTS, st.integers(0, 9)),
    st.tuples(st.just("delete"), INTS),
    st.tuples(st.sampled_from(["range", "reverse_range"]), BOUNDS),
), max_size=60)


@settings(max_examples=examples(100))
@given(ops=VERSIONED_OPS)
def test_versioned_store_key_order_matches_a_re_sorted_model(ops: list[tuple[Any, ...]]
                                                             ) -> None:
    store = InMemoryVersionedKeyValueStore("v", signed, history_retention_ms=10_000)
    model: dict[int, int] = {}
    for time, (name, *args) in enumerate(ops):
        if name == "put":
            store.put(args[0], args[1], time)
            model[args[0]] = args[1]
        elif name == "delete":
            store.delete(args[0], time)
            model.pop(args[0], None)
        else:
            lo, hi = args[0]
            blo = None if lo is None else signed(lo)
            bhi = None if hi is None else signed(hi)
            if blo is not None and bhi is not None and blo > bhi:
                continue  # a reversed range raises here (the model has nothing to say)
            want = [(k, v) for k, v in sorted(model.items(), key=lambda p: signed(p[0]))
                    if in_range(signed(k), blo, bhi)]
            got = [(k, r.value) for k, r in getattr(store, name)(lo, hi)]
            assert got == (want[::-1] if name == "reverse_range" else want), (time, name)
        store._check()


# -- work counts --------------------------------------------------------------------------------

def test_a_key_value_range_after_a_write_does_not_sort_again() -> None:
    calls = 0

    def counting(key: int) -> bytes:
        nonlocal calls
        calls += 1
        return key.to_bytes(4, "big")

    store = InMemoryKeyValueStore("kv", counting)
    for key in range(0, 4_000, 2):
        store.put(key, key)
    assert calls == 2_000  # a key of a user's serde is found by its bytes: one call a put
    assert len(list(store.range(100, 199))) == 50
    order = store._order
    calls = 0
    for key in range(1, 2_001, 2):  # write a key, then range-query around it
        store.put(key, key)
        store.put(key - 1, -key)  # an existing key: the order is not touched
        assert [k for k, _ in store.range(key - 1, key)] == [key - 1, key]
    assert store._order is order  # never rebuilt
    # each put finds its key by its bytes (2), the new key's place in the order (1), the two
    # bounds of each query (2): nothing is sorted again
    assert calls == 1_000 * (2 + 1 + 2)
    store._check()


def test_session_and_window_key_orders_are_kept_not_rebuilt() -> None:
    sessions = InMemorySessionStore("s", signed, retention_ms=1_000)
    windows = InMemoryWindowStore("w", signed, 10, 1_000)
    for t in range(-200, 0, 2):
        sessions.put(Windowed(t, Window(t, t)), t)
        windows.put(t, t, t)
    list(sessions.fetch(None, None))
    list(windows.fetch_all(None, None))
    keys, starts = sessions._keys, windows._sorted
    assert keys is not None and starts is not None
    for t in range(1, 2_000, 2):  # new keys, new windows, expiry: queries in between
        sessions.put(Windowed(t % 300, Window(t, t)), t)
        windows.put(t % 300, t, t)
        assert [w.window.end for w, _ in sessions.fetch(t % 300, t % 300)][-1] == t
        assert [w.window.start for w, _ in windows.fetch_all(t - 1, None)] == [t]
    assert sessions._keys is keys and windows._sorted is starts
    sessions._check()
    windows._check()
