"""The key-value store contract: what every key-value store backend must do.

:func:`check_key_value_store` runs the checks against stores made by a factory; our in-memory
and persistent backends run it in their tests, and a user's own store can run it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._util import closed_store_refuses, expect, ordered_keys

__all__ = ("check_key_value_store",)

StoreFactory = Callable[[], Any]
"""Returns a fresh, open, empty store whose keys are ``str`` ordered by their UTF-8 bytes."""

_KEYS = ["b", "a", "aa", "B", "ab", "é", ""]


def check_key_value_store(factory: StoreFactory) -> None:
    """Run every key-value contract check on fresh stores from ``factory``.

    Checks: get/put/delete/put_if_absent and ``None`` values as deletes; ``range``,
    ``reverse_range``, ``all``, ``reverse_all`` in serialized-key-bytes order (unsigned), both
    bounds inclusive, ``None`` bounds open, ``from > to`` empty, backward exactly the reverse
    of forward; ``approximate_num_entries``; a closed store refusing every operation.

    :raises AssertionError: naming the first check that failed.
    """
    _basic(factory())
    _ranges(factory())
    closed_store_refuses(factory(), [
        ("get", ("a",)), ("put", ("a", 1)), ("delete", ("a",)), ("put_if_absent", ("a", 1)),
        ("range", ("a", "b")), ("reverse_range", ("a", "b")), ("all", ()),
        ("reverse_all", ()), ("prefix_scan", ("a",)), ("reverse_prefix_scan", ("a",)),
        ("approximate_num_entries", ()),
    ])


def _basic(store: Any) -> None:
    expect(store.get("a") is None, "get of an absent key returns None")
    expect(list(store.all()) == [], "a new store is empty")
    store.put("a", 1)
    expect(store.get("a") == 1, "get returns what put stored")
    store.put("a", 2)
    expect(store.get("a") == 2, "put replaces the value")
    expect(store.put_if_absent("a", 3) == 2, "put_if_absent returns the present value")
    expect(store.get("a") == 2, "put_if_absent keeps a present value")
    expect(store.put_if_absent("b", 3) is None, "put_if_absent returns None when absent")
    expect(store.get("b") == 3, "put_if_absent stores when absent")
    expect(store.delete("a") == 2, "delete returns the old value")
    expect(store.delete("a") is None, "delete of an absent key returns None")
    expect(store.get("a") is None, "a deleted key is gone")
    store.put("b", None)
    expect(store.get("b") is None, "putting None deletes")
    expect(store.approximate_num_entries() == 0, "no entries after deleting everything")


def _ranges(store: Any) -> None:
    for i, key in enumerate(_KEYS):
        store.put(key, i)
    ordered = ordered_keys(_KEYS)
    everything = [(k, _KEYS.index(k)) for k in ordered]
    expect(list(store.all()) == everything, "all() is in key-bytes order")
    expect(list(store.reverse_all()) == everything[::-1], "reverse_all() is all() reversed")
    expect(store.approximate_num_entries() == len(_KEYS), "approximate_num_entries counts keys")
    cases = [("a", "ab"), ("B", "b"), (None, "aa"), ("aa", None), (None, None), ("b", "a"),
             ("zz", None), ("a", "a")]
    for lo, hi in cases:
        want = [kv for kv in everything
                if (lo is None or kv[0].encode() >= lo.encode())
                and (hi is None or kv[0].encode() <= hi.encode())]
        if lo is not None and hi is not None and lo.encode() > hi.encode():
            want = []
        got = list(store.range(lo, hi))
        expect(got == want, f"range({lo!r}, {hi!r}) gives {want}, not {got}")
        back = list(store.reverse_range(lo, hi))
        expect(back == want[::-1], f"reverse_range({lo!r}, {hi!r}) is range reversed: {back}")
    for prefix in ["a", "", "B", "é", "zz", "aa"]:
        want = [kv for kv in everything if kv[0].encode().startswith(prefix.encode())]
        got = list(store.prefix_scan(prefix))
        expect(got == want, f"prefix_scan({prefix!r}) gives {want}, not {got}")
        back = list(store.reverse_prefix_scan(prefix))
        expect(back == want[::-1], f"reverse_prefix_scan({prefix!r}) is prefix_scan reversed")
    upper = list(store.prefix_scan("A", lambda p: p.lower().encode()))
    expect(upper == [kv for kv in everything if kv[0].startswith("a")],
           "prefix_scan serializes the prefix with the serializer it is given")
