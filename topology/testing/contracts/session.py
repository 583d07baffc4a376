"""The session store contract: what every session store backend must do.

:func:`check_session_store` runs the checks against stores made by a factory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...windows import Window, Windowed
from ._util import ScanOrder, check_scan_order, closed_store_refuses, expect, ordered_keys

Row = tuple[Windowed, Any]

__all__ = ("check_session_store",)

SessionStoreFactory = Callable[[int], Any]
"""``factory(retention_ms)``: a fresh, open, empty session store whose keys are ``str``
ordered by their UTF-8 bytes."""


def _s(key: str, start: int, end: int) -> Windowed:
    return Windowed(key, Window(start, end))


def check_session_store(factory: SessionStoreFactory, order: ScanOrder = "memory") -> None:
    """Run every session-store contract check on fresh stores from ``factory``.

    Checks: put/fetch_session/remove and ``None`` aggregates as removes; ``near`` and
    ``put_session`` (an aggregation's reads and writes) as ``find_sessions`` and ``put``;
    ``find_sessions``
    with both time bounds inclusive (``end >= earliest_session_end``, ``start <=
    latest_session_start``) for one key and for key ranges, ``None`` bounds open; one key's
    sessions by end, then start; key-range queries and ``all`` in the ``order`` of the
    backend; every ``backward_*`` form exactly reversed; bad arguments refused; retention
    (sessions ending at or before ``observed - retention`` are dropped, writes to them
    ignored); a closed store refusing every operation.

    :param order: ``"memory"``: Kafka's in-memory session store's order, by session end,
        then key bytes, then start; ``"rocksdb"``: Kafka's RocksDB session store's order,
        by segment (``end // store.segment_interval_ms``), then key bytes, then end, then
        start.
    :raises AssertionError: naming the first check that failed.
    :raises ValueError: ``order`` is neither of those.
    """
    order = check_scan_order(order)
    _basic(factory(1_000))
    _find(factory(1_000))
    _near(factory(1_000))
    _iteration(factory(1_000), order)
    _iteration(factory(200_000), order, 100_000)  # segments of 100 s: two of them
    _refusals(factory(1_000))
    _retention(factory(30))
    closed_store_refuses(factory(1_000), [
        ("put", (_s("a", 0, 0), 1)), ("remove", (_s("a", 0, 0),)),
        ("fetch_session", ("a", 0, 0)), ("find_sessions", ("a", 0, 10)),
        ("find_sessions", ("a", "b", 0, 10)), ("backward_find_sessions", ("a", 0, 10)),
        ("backward_find_sessions", (None, None, None, None)), ("fetch", ("a",)),
        ("fetch", (None, None)), ("backward_fetch", ("a",)), ("backward_fetch", ("a", "b")),
        ("all", ()), ("backward_all", ()), ("near", ("a", 0, 10)),
        ("put_session", ("a", 0, 0, 1)),
    ])


def _basic(store: Any) -> None:
    expect(store.fetch_session("a", 0, 10) is None, "fetch_session of an absent session")
    store.put(_s("a", 0, 10), 1)
    expect(store.fetch_session("a", 0, 10) == 1, "fetch_session returns what put stored")
    expect(store.fetch_session("a", 0, 11) is None, "a session is its exact (start, end)")
    store.put(_s("a", 0, 10), 2)
    expect(store.fetch_session("a", 0, 10) == 2, "put replaces a session's aggregate")
    store.put(_s("a", 3, 3), 7)
    expect(store.fetch_session("a", 3, 3) == 7, "a session of one instant")
    store.remove(_s("a", 0, 10))
    expect(store.fetch_session("a", 0, 10) is None, "remove drops the session")
    store.remove(_s("a", 0, 10))  # removing an absent session is harmless
    store.put(_s("a", 3, 3), None)
    expect(store.fetch_session("a", 3, 3) is None, "putting None removes the session")
    expect(list(store.fetch("a")) == [], "nothing left")
    expect(list(store.near("a", 0, 10)) == [], "near of a key whose sessions were all removed")


def _near(store: Any) -> None:
    """``near`` and ``put_session``, an aggregation's view: ``find_sessions`` and ``put``."""
    for key, start, end, agg in [("k", 0, 5, "x"), ("k", 10, 20, "y"), ("k", 30, 30, "z"),
                                 ("k", -50, 200, "long"), ("j", 10, 20, "other key")]:
        store.put_session(key, start, end, agg)
        expect(store.fetch_session(key, start, end) == agg, "put_session stores as put does")
    for earliest, latest in [(5, 10), (6, 9), (0, 100), (21, 29), (31, 100), (40, 0),
                             (201, 300), (-(2**63), 2**63 - 1)]:
        want = [(w.window.end, w.window.start, agg)
                for w, agg in store.find_sessions("k", earliest, latest)]
        got = list(store.near("k", earliest, latest))
        expect(got == want, f"near('k', {earliest}, {latest}) gives {want}, not {got}")
    expect(list(store.near("absent", 0, 10)) == [], "near of a key without sessions")
    store.put_session("k", 10, 20, None)
    expect(store.fetch_session("k", 10, 20) is None, "put_session of None removes a session")


def _find(store: Any) -> None:
    for start, end, agg in [(0, 5, "x"), (10, 20, "y"), (30, 30, "z")]:
        store.put(_s("k", start, end), agg)
    store.put(_s("j", 10, 20), "other key")
    rows = [(_s("k", 0, 5), "x"), (_s("k", 10, 20), "y"), (_s("k", 30, 30), "z")]
    for earliest, latest in [(5, 10), (6, 9), (0, 100), (20, 30), (21, 29), (31, 100),
                             (None, 10), (6, None), (None, None), (40, 0)]:
        want = [r for r in rows
                if (earliest is None or r[0].window.end >= earliest)
                and (latest is None or r[0].window.start <= latest)]
        got = list(store.find_sessions("k", earliest, latest))
        expect(got == want, f"find_sessions('k', {earliest}, {latest}) gives {want}, not {got}")
        back = list(store.backward_find_sessions("k", earliest, latest))
        expect(back == want[::-1], f"backward_find_sessions('k', {earliest}, {latest}) is "
               "find_sessions reversed")
    long = (_s("k", -50, 200), "long")  # overlaps the others, ends after all of them
    store.put(*long)
    expect(list(store.find_sessions("k", 150, -10)) == [long],
           "a long session starting early is found by a search that ends early")
    expect(list(store.find_sessions("k", 0, 12)) == [rows[0], rows[1], long],
           "sessions are ordered by end, then start, overlapping or not")


def scan_key(store: Any, order: ScanOrder) -> Callable[[Row], tuple[Any, ...]]:
    """The sort key of a key-range query's or ``all()``'s rows of ``store`` in ``order``.

    Rows are ``(Windowed, aggregate)`` with ``str`` keys (see :func:`check_session_store`).
    """
    if order == "memory":
        return lambda r: (r[0].window.end, r[0].key.encode(), r[0].window.start)
    interval = store.segment_interval_ms
    return lambda r: (r[0].window.end // interval, r[0].key.encode(), r[0].window.end,
                      r[0].window.start)


def _iteration(store: Any, order: ScanOrder, offset: int = 0) -> None:
    keys = ["b", "a", "aa", "B", "", "a\x00", "é"]
    sessions = [(0, 0), (0, 9), (5, 9), (10, 15), (12, 40), (-5, 3)]
    if offset:  # sessions in the next segments too, one across a segment boundary
        sessions += [(offset - 5, offset + 3), (offset, offset + 9),
                     (2 * offset - 1, 2 * offset - 1)]
    expected = []
    for i, key in enumerate(keys):
        for j, (start, end) in enumerate(sessions):
            if (i + j) % 3:  # not every session for every key
                store.put(_s(key, start, end), (i, j))
                expected.append((key, start, end, (i, j)))
    rows = sorted(((_s(k, s, e), v) for k, s, e, v in expected), key=scan_key(store, order))
    expect(list(store.all()) == rows, f"all() is in the {order} order, not {list(store.all())}")
    expect(list(store.backward_all()) == rows[::-1], "backward_all() is all() reversed")
    expect(list(store.fetch(None, None)) == rows, "fetch(None, None) is every session")
    for key in keys:
        want = sorted((r for r in rows if r[0].key == key),
                      key=lambda r: (r[0].window.end, r[0].window.start))
        expect(list(store.fetch(key)) == want, f"fetch({key!r}) gives the key's sessions")
        expect(list(store.backward_fetch(key)) == want[::-1], f"backward_fetch({key!r})")
    bounds = [("a", "aa"), ("B", "b"), (None, "aa"), ("aa", None), ("b", "a"), ("zz", None),
              ("a", "a"), ("", ""), (None, "")]
    for lo, hi in bounds:
        want = [r for r in rows if (lo is None or r[0].key.encode() >= lo.encode())
                and (hi is None or r[0].key.encode() <= hi.encode())]
        expect(list(store.fetch(lo, hi)) == want, f"fetch({lo!r}, {hi!r}) gives {want}")
        expect(list(store.backward_fetch(lo, hi)) == want[::-1],
               f"backward_fetch({lo!r}, {hi!r}) is fetch reversed")
        for earliest, latest in [(9, 9), (None, 5), (10, None), (-100, 100),
                                 (offset, offset + 5), (offset + 1, None)]:
            found = [r for r in want
                     if (earliest is None or r[0].window.end >= earliest)
                     and (latest is None or r[0].window.start <= latest)]
            got = list(store.find_sessions(lo, hi, earliest, latest))
            expect(got == found, f"find_sessions({lo!r}, {hi!r}, {earliest}, {latest}) "
                   f"gives {found}, not {got}")
            back = list(store.backward_find_sessions(lo, hi, earliest, latest))
            expect(back == found[::-1], f"backward_find_sessions({lo!r}, {hi!r}, {earliest}, "
                   f"{latest}) is find_sessions reversed")
    expect(ordered_keys(keys)[0] == "", "the empty key sorts first")


def _refusals(store: Any) -> None:
    bad: list[tuple[str, tuple[Any, ...], type[Exception]]] = [
        ("put", (("a", 0, 1), 1), TypeError), ("put", (_s("a", 5, 1), 1), ValueError),
        ("put", (Windowed(None, Window(0, 1)), 1), TypeError),
        ("put", (_s("a", 0, 1.5), 1), TypeError),  # type: ignore[arg-type]
        ("find_sessions", ("a", 0), TypeError), ("find_sessions", (None, 0, 1), TypeError),
        ("find_sessions", ("a", 0.5, 1), TypeError), ("fetch", (None,), TypeError),
        ("fetch", (), TypeError), ("backward_fetch", ("a", "b", "c"), TypeError),
    ]
    for method, args, error in bad:
        try:
            result = getattr(store, method)(*args)
            if hasattr(result, "__next__"):
                next(result, None)
        except error:
            continue
        raise AssertionError(f"store contract: {method}{args!r} must raise {error.__name__}")
    expect(list(store.all()) == [], "refused writes wrote nothing")


def _retention(store: Any) -> None:
    store.put(_s("a", 0, 0), 1)
    store.put(_s("a", 10, 20), 2)
    expect(store.fetch_session("a", 0, 0) == 1, "a session within retention is kept")
    expect(store.observed_stream_time == 20, "the stream time is the largest session end")
    store.put(_s("b", 25, 30), 3)  # observed 30: sessions ending at or before 0 are expired
    expect(store.fetch_session("a", 0, 0) is None, "a session past retention is dropped")
    expect(list(store.find_sessions("a", None, None)) == [(_s("a", 10, 20), 2)],
           "queries skip expired sessions")
    store.put(_s("c", 0, 0), 4)
    expect(store.fetch_session("c", 0, 0) is None, "a write to an expired session is ignored")
    store.put(_s("c", 0, 1), 5)
    expect(store.fetch_session("c", 0, 1) == 5, "a session ending after the limit is live")
    store.put(_s("d", 100, 500), 6)  # observed 500: everything before 471 is gone
    expect([str(w) for w, _ in store.all()] == ["[d@100/500]"], "only live sessions remain")
    expect([str(w) for w, _ in store.backward_all()] == ["[d@100/500]"], "backward too")
