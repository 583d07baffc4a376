"""The window store contract: what every window store backend must do.

:func:`check_window_store` runs the checks against stores made by a factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...windows import Window, Windowed
from ._util import ScanOrder, check_scan_order, closed_store_refuses, expect

Row = tuple[Windowed, Any]

__all__ = ("check_window_store",)

WindowStoreFactory = Callable[[int, int], Any]
"""``factory(window_size_ms, retention_ms)``: a fresh, open, empty window store whose keys
are ``str`` ordered by their UTF-8 bytes."""


def check_window_store(factory: WindowStoreFactory, order: ScanOrder = "memory") -> None:
    """Run every window-store contract check on fresh stores from ``factory``.

    Checks: put/fetch by window start and ``None`` values as deletes; ``fetch(key, from,
    to)`` over window starts in ``[from, to]`` ascending and ``backward_fetch`` exactly its
    reverse; ``fetch_all``/``all`` and a key-range ``fetch`` in the ``order`` of the backend,
    and their backward forms exactly reversed; retention (windows that start at or before
    ``observed - retention`` are dropped, writes to them ignored); a closed store refusing
    every operation.

    :param order: ``"memory"``: Kafka's in-memory window store's order, by window start,
        then key bytes; ``"rocksdb"``: Kafka's RocksDB window store's order, by segment
        (``start // store.segment_interval_ms``), then key bytes, then window start.
    :raises AssertionError: naming the first check that failed.
    :raises ValueError: ``order`` is neither of those.
    """
    order = check_scan_order(order)
    _basic(factory(10, 1_000))
    _iteration(factory(10, 1_000), order)
    _iteration(factory(10, 200_000), order, 100_000)  # segments of 100 s: two of them
    _retention(factory(10, 30))
    _refusals(factory(10, 1_000))
    closed_store_refuses(factory(10, 1_000), [
        ("put", ("a", 1, 0)), ("fetch", ("a", 0)), ("fetch", ("a", 0, 10)),
        ("fetch", ("a", None, None)), ("fetch", ("a", "b", 0, 10)),
        ("backward_fetch", ("a", 0, 10)), ("backward_fetch", (None, None, None, None)),
        ("fetch_all", (0, 10)), ("fetch_all", (None, None)),
        ("backward_fetch_all", (0, 10)), ("all", ()), ("backward_all", ()),
    ])


def _basic(store: Any) -> None:
    expect(store.fetch("a", 0) is None, "fetch of an absent window returns None")
    store.put("a", 1, 0)
    store.put("a", 2, 10)
    expect(store.fetch("a", 0) == 1 and store.fetch("a", 10) == 2, "fetch by window start")
    store.put("a", 3, 0)
    expect(store.fetch("a", 0) == 3, "put replaces a window's value")
    store.put("a", None, 0)
    expect(store.fetch("a", 0) is None, "putting None deletes the window")
    expect(list(store.fetch("a", 0, 100)) == [(10, 2)], "fetch over starts in [from, to]")


def scan_key(store: Any, order: ScanOrder) -> Callable[[Row], tuple[Any, ...]]:
    """The sort key of a ``fetch_all``'s, ``all()``'s or key-range ``fetch``'s rows.

    Rows are ``(Windowed, value)`` of ``store`` with ``str`` keys, in ``order`` (see
    :func:`check_window_store`).
    """
    if order == "memory":
        return lambda r: (r[0].window.start, r[0].key.encode())
    interval = store.segment_interval_ms
    return lambda r: (r[0].window.start // interval, r[0].key.encode(), r[0].window.start)


def _iteration(store: Any, order: ScanOrder, offset: int = 0) -> None:
    keys = ["b", "a", "aa", "B"]
    rows: list[Row] = []
    for start in (offset, offset + 10, offset + 20, offset + 30, 2 * offset, 2 * offset + 10):
        for i, key in enumerate(keys):
            if (start // 10 + i) % 3:  # not every key in every window
                store.put(key, start + i, start)
                rows.append((Windowed(key, Window(start, start + 10)), start + i))
    rows = sorted(set(rows), key=scan_key(store, order))
    expect(list(store.all()) == rows, f"all() is in the {order} order, not {list(store.all())}")
    expect(list(store.backward_all()) == rows[::-1], "backward_all() is all() reversed")
    times = [(offset, offset + 30), (offset + 10, offset + 20), (offset + 5, offset + 25),
             (offset + 20, offset + 10), (2 * offset + 40, 2 * offset + 50),
             (None, offset + 10), (offset + 10, None), (None, None)]
    if offset:
        times += [(offset + 20, 2 * offset), (offset + 30, 2 * offset + 10)]
    for lo, hi in times:
        in_time = [r for r in rows if (lo is None or r[0].window.start >= lo)
                   and (hi is None or r[0].window.start <= hi)]
        for key_lo, key_hi in [("a", "aa"), ("B", "b"), (None, "aa"), ("aa", None),
                               (None, None), ("b", "a"), ("a", "a")]:
            want = [r for r in in_time
                    if (key_lo is None or r[0].key.encode() >= key_lo.encode())
                    and (key_hi is None or r[0].key.encode() <= key_hi.encode())]
            got = list(store.fetch(key_lo, key_hi, lo, hi))
            expect(got == want, f"fetch({key_lo!r}, {key_hi!r}, {lo}, {hi}) gives {want}, "
                   f"not {got}")
            back = list(store.backward_fetch(key_lo, key_hi, lo, hi))
            expect(back == want[::-1], f"backward_fetch({key_lo!r}, {key_hi!r}, {lo}, {hi}) "
                   "is fetch reversed")
        got = list(store.fetch_all(lo, hi))
        expect(got == in_time, f"fetch_all({lo}, {hi}) gives {in_time}, not {got}")
        back = list(store.backward_fetch_all(lo, hi))
        expect(back == in_time[::-1], f"backward_fetch_all({lo}, {hi}) is fetch_all reversed")
        for key in keys:
            want_key = sorted((r[0].window.start, r[1]) for r in in_time if r[0].key == key)
            expect(list(store.fetch(key, lo, hi)) == want_key,
                   f"fetch({key!r}, {lo}, {hi}) gives {want_key}")
            expect(list(store.backward_fetch(key, lo, hi)) == want_key[::-1],
                   f"backward_fetch({key!r}, {lo}, {hi}) is fetch reversed")


def _refusals(store: Any) -> None:
    bad: list[tuple[str, tuple[Any, ...]]] = [
        ("fetch", ("a",)), ("fetch", ("a", None)), ("fetch", ("a", 0.5)),
        ("fetch", (None, 0, 10)), ("fetch", ("a", 0, "10")), ("backward_fetch", ("a", 0)),
        ("backward_fetch", ("a", "b", 0, 1.5)), ("fetch_all", (0, "1")),
        ("backward_fetch_all", (True, None)), ("fetch", ("a", "b", "c", "d", "e")),
    ]
    for method, args in bad:
        try:
            result = getattr(store, method)(*args)
            if hasattr(result, "__next__"):
                next(result, None)
        except TypeError:
            continue
        raise AssertionError(f"store contract: {method}{args!r} must raise TypeError")


def _retention(store: Any) -> None:
    store.put("a", 1, 0)
    store.put("a", 2, 20)
    expect(store.fetch("a", 0) == 1, "a window within retention is kept")
    store.put("a", 3, 30)  # observed 30: windows starting at or before 0 are expired
    expect(store.fetch("a", 0) is None, "a window past retention is dropped")
    store.put("b", 4, 0)
    expect(store.fetch("b", 0) is None, "a write to an expired window is ignored")
    expect([w.window.start for w, _ in store.all()] == [20, 30], "only live windows remain")
    expect(list(store.fetch("a", None, None)) == [(20, 2), (30, 3)],
           "a key's open-ended fetch skips expired windows")
    expect([w.window.start for w, _ in store.backward_fetch(None, None, None, None)] == [30, 20],
           "an open-ended key-range fetch skips expired windows")
