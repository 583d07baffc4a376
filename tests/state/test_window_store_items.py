"""The in-memory window store's ``items_by_start``: the store's whole content, unsorted.

The distributed runner saves a key group's open windows with it; what it gives must be
exactly what the store holds: every window once, the key it was last written with (for keys
that are not their own identity too), its value and its timestamp.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology._key_bytes import fallback_key_bytes
from topology.state.memory import InMemoryWindowStore

KEYS = st.one_of(st.sampled_from(["a", "b", "\x00c"]), st.integers(-3, 3),
                 st.sampled_from([b"a", 2.5, (1, "x")]))


@settings(max_examples=examples(100), deadline=None)
@given(puts=st.lists(st.tuples(KEYS, st.sampled_from([0, 10, 20, 30, 200]),
                               st.one_of(st.none(), st.integers(0, 9)), st.integers(0, 500)),
                     max_size=25))
def test_items_by_start_hold_what_the_store_holds(puts: list[tuple[object, int, int | None,
                                                                   int]]) -> None:
    store = InMemoryWindowStore("w", fallback_key_bytes, 10, 100)
    for key, start, value, ts in puts:
        store.put_with_timestamp(key, value, start, ts)
    got = [(start, key, value, ts) for start, items in store.items_by_start()
           for key, value, ts in items]
    starts = [start for start, _ in store.items_by_start()]
    assert starts == sorted(set(starts))
    expected = []
    for windowed, value in store.all():
        kept = store.get_with_timestamp(windowed.key, windowed.window.start)
        assert kept is not None
        expected.append((windowed.window.start, windowed.key, value, kept[1]))
    assert sorted(got, key=repr) == sorted(expected, key=repr)
    assert len(got) == len(expected)
