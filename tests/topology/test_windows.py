"""Windowed keys and window definitions: value semantics and Kafka 3.9's validation rules."""

from __future__ import annotations

import datetime as dt
import pickle
from typing import Any
from unittest.mock import ANY

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topology import SessionWindows, SlidingWindows, TimeWindows, Window, Windowed

LONG_MAX = 2**63 - 1
new = tuple.__new__

keys = st.text(max_size=5) | st.integers() | st.tuples(st.text(max_size=3), st.integers())
windows = st.builds(Window, st.integers(0, 10**6), st.integers(0, 10**6))


# -- Window and Windowed --------------------------------------------------------------------------

@given(keys, windows)
def test_windowed_is_equal_by_value_and_hashes_alike(key: Any, window: Window) -> None:
    a = Windowed(key, window)
    b = new(Windowed, (key, new(Window, tuple(window))))
    assert a == b and not a != b
    assert hash(a) == hash(b)
    assert {a: 1}[b] == 1
    assert Window(*window) == window and hash(Window(*window)) == hash(window)


@given(keys, windows, keys, windows)
def test_windowed_differs_when_a_part_differs(k1: Any, w1: Window, k2: Any, w2: Window) -> None:
    same = k1 == k2 and w1 == w2
    assert (Windowed(k1, w1) == Windowed(k2, w2)) is same
    assert (Windowed(k1, w1) != Windowed(k2, w2)) is not same


@given(keys, windows)
def test_windowed_and_window_are_not_equal_to_plain_tuples(key: Any, window: Window) -> None:
    w = Windowed(key, window)
    bounds = (window.start, window.end)
    for plain in ((key, bounds), (key, window), tuple(w)):
        assert w != plain and plain != w
        assert not w == plain and not plain == w
    assert window != bounds and bounds != window
    assert not window == bounds and not bounds == window
    assert {w: 1}.get((key, bounds)) is None
    assert {window: 1}.get(bounds) is None


def test_window_is_not_equal_to_a_windowed_or_other_objects() -> None:
    w = Window(0, 1)
    assert w != Windowed(0, 1)
    assert w != [0, 1] and w != "w" and w is not None
    assert w == ANY and Windowed("a", w) == ANY  # other types still decide for themselves


def test_str_and_repr() -> None:
    assert str(Windowed("k", Window(0, 60_000))) == "[k@0/60000]"
    assert repr(Windowed("k", Window(0, 1))) == "Windowed(key='k', window=Window(start=0, end=1))"


def test_windowed_and_window_are_immutable_and_picklable() -> None:
    w = Windowed("k", Window(0, 1))
    with pytest.raises(AttributeError):
        w.key = "j"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        w.window.start = 3  # type: ignore[misc]
    assert not hasattr(w, "__dict__") and not hasattr(w.window, "__dict__")
    back = pickle.loads(pickle.dumps(w))
    assert back == w and type(back) is Windowed and type(back.window) is Window
    assert w._replace(key="j") == Windowed("j", Window(0, 1))


def test_tuple_new_builds_the_same_values_as_the_constructors() -> None:
    built = new(Windowed, ("k", new(Window, (5, 10))))
    assert type(built) is Windowed and type(built.window) is Window
    assert built == Windowed("k", Window(5, 10))
    assert built.key == "k" and built.window.start == 5 and built.window.end == 10
    key, window = built
    assert (key, window) == ("k", Window(5, 10))


# -- window definitions: value semantics ----------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "c"), [
    (TimeWindows.of_size_and_grace(10, 2), TimeWindows(10, 10, 2),
     TimeWindows.of_size_and_grace(10, 3)),
    (TimeWindows.of_size_with_no_grace(10).advance_by(5), TimeWindows(10, 5, 0),
     TimeWindows.of_size_with_no_grace(10)),
    (SlidingWindows.of_time_difference_and_grace(10, 2), SlidingWindows(10, 2),
     SlidingWindows.of_time_difference_with_no_grace(10)),
    (SessionWindows.of_inactivity_gap_and_grace(10, 2), SessionWindows(10, 2),
     SessionWindows.of_inactivity_gap_with_no_grace(10)),
])
def test_definitions_compare_and_hash_by_value(a: Any, b: Any, c: Any) -> None:
    assert a == b and hash(a) == hash(b) and not a != b
    assert a != c
    assert len({a, b, c}) == 2
    back = pickle.loads(pickle.dumps(a))
    assert back == a and type(back) is type(a)


def test_definitions_of_different_kinds_are_never_equal() -> None:
    assert SlidingWindows(10, 2) != SessionWindows(10, 2)
    assert hash(SlidingWindows(10, 2)) != hash(SessionWindows(10, 2))
    assert TimeWindows(10, 10, 0) != (10, 10, 0)


@pytest.mark.parametrize("definition", [TimeWindows(10, 5, 1), SlidingWindows(3, 1),
                                        SessionWindows(3, 1)])
def test_definitions_are_immutable(definition: Any) -> None:
    for name in definition._fields:
        with pytest.raises(AttributeError, match="immutable"):
            setattr(definition, name, 1)
    with pytest.raises(AttributeError):
        definition.other = 1


def test_timedelta_durations() -> None:
    second = dt.timedelta(seconds=1)
    assert TimeWindows.of_size_and_grace(second, second / 2) == TimeWindows(1000, 1000, 500)
    assert TimeWindows.of_size_with_no_grace(second).advance_by(second / 4).advance_ms == 250
    assert SlidingWindows(second, dt.timedelta(0)) == SlidingWindows(1000, 0)
    assert SessionWindows(second, second) == SessionWindows(1000, 1000)


def test_repr() -> None:
    assert repr(TimeWindows(10, 5, 1)) == "TimeWindows(size=10, advance=5, grace=1)"
    assert repr(SlidingWindows(3, 1)) == "SlidingWindows(time_difference=3, grace=1)"
    assert repr(SessionWindows(3, 1)) == "SessionWindows(gap=3, grace=1)"


# -- window definitions: validation, as Kafka 3.9 -------------------------------------------------

CONSTRUCTIONS = {
    "TimeWindows(size=d)": lambda d: TimeWindows(d, 1, 0),
    "TimeWindows(advance=d)": lambda d: TimeWindows(10, d, 0),
    "TimeWindows(grace=d)": lambda d: TimeWindows(10, 10, d),
    "TimeWindows.of_size_with_no_grace(d)": lambda d: TimeWindows.of_size_with_no_grace(d),
    "TimeWindows.of_size_and_grace(d, 0)": lambda d: TimeWindows.of_size_and_grace(d, 0),
    "TimeWindows.of_size_and_grace(10, d)": lambda d: TimeWindows.of_size_and_grace(10, d),
    "advance_by(d)": lambda d: TimeWindows.of_size_with_no_grace(10).advance_by(d),
    "SlidingWindows(difference=d)": lambda d: SlidingWindows(d, 0),
    "SlidingWindows(grace=d)": lambda d: SlidingWindows(1, d),
    "SlidingWindows.of_time_difference_with_no_grace(d)":
        lambda d: SlidingWindows.of_time_difference_with_no_grace(d),
    "SlidingWindows.of_time_difference_and_grace(d, 0)":
        lambda d: SlidingWindows.of_time_difference_and_grace(d, 0),
    "SlidingWindows.of_time_difference_and_grace(1, d)":
        lambda d: SlidingWindows.of_time_difference_and_grace(1, d),
    "SessionWindows(gap=d)": lambda d: SessionWindows(d, 0),
    "SessionWindows(grace=d)": lambda d: SessionWindows(1, d),
    "SessionWindows.of_inactivity_gap_with_no_grace(d)":
        lambda d: SessionWindows.of_inactivity_gap_with_no_grace(d),
    "SessionWindows.of_inactivity_gap_and_grace(d, 0)":
        lambda d: SessionWindows.of_inactivity_gap_and_grace(d, 0),
    "SessionWindows.of_inactivity_gap_and_grace(1, d)":
        lambda d: SessionWindows.of_inactivity_gap_and_grace(1, d),
}


@pytest.mark.parametrize("construction", sorted(CONSTRUCTIONS))
@pytest.mark.parametrize(("bad", "error", "message"), [
    (-1, ValueError, "must not be negative, got -1 ms"),
    (dt.timedelta(milliseconds=-5), ValueError, "must not be negative, got -5 ms"),
    (True, TypeError, "must be an int of milliseconds or a datetime.timedelta, got bool"),
    (1.5, TypeError, "got float"),
    (None, TypeError, "got NoneType"),
    ("10", TypeError, "got str"),
    (2**63, ValueError, "must be at most 9223372036854775807 ms"),
])
def test_every_duration_is_checked_the_same_way(construction: str, bad: Any, error: type,
                                                 message: str) -> None:
    build = CONSTRUCTIONS[construction]
    build(1)  # valid with a duration of 1 ms
    build(dt.timedelta(milliseconds=1))
    with pytest.raises(error, match=message):
        build(bad)


@pytest.mark.parametrize(("construction", "message"), [
    ("TimeWindows(size=d)", "window size must be larger than zero, got 0 ms"),
    ("TimeWindows.of_size_with_no_grace(d)", "window size must be larger than zero"),
    ("TimeWindows(advance=d)", "window advance must be larger than zero and at most the window "
                               "size, 10 ms; got 0 ms"),
    ("advance_by(d)", "window advance must be larger than zero"),
    ("SessionWindows(gap=d)", "inactivity gap must be larger than zero, got 0 ms"),
    ("SessionWindows.of_inactivity_gap_with_no_grace(d)", "inactivity gap must be larger"),
])
def test_sizes_advances_and_gaps_must_be_larger_than_zero(construction: str,
                                                          message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CONSTRUCTIONS[construction](0)


def test_zero_is_a_valid_time_difference_and_grace() -> None:
    assert SlidingWindows.of_time_difference_with_no_grace(0).time_difference_ms == 0
    assert TimeWindows(10, 10, 0).grace_ms == 0
    assert SessionWindows(1, 0).grace_ms == 0


def test_the_advance_is_at_most_the_size() -> None:
    assert TimeWindows(10, 10, 0).advance_ms == 10
    with pytest.raises(ValueError, match="at most the window size, 10 ms; got 11 ms"):
        TimeWindows.of_size_with_no_grace(10).advance_by(11)


def test_a_negative_grace_is_refused_by_the_constructor() -> None:
    with pytest.raises(ValueError, match="grace period must not be negative, got -1 ms"):
        TimeWindows(10, 10, -1)


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "durable"])
def test_the_whole_kafka_timestamp_range_works_and_window_ends_are_capped(tmp_path,
                                                                          durable) -> None:
    from suppress import BufferConfig, Suppressed
    from topology import StreamsBuilder, TopologyTestDriver

    top = 2**63 - 1
    b = StreamsBuilder()
    (b.stream("c").group_by_key().windowed_by(TimeWindows.of_size_and_grace(100, 10)).count()
     .suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream()
     .to("out"))
    with TopologyTestDriver(b.build(), state_dir=tmp_path if durable else None) as driver:
        source = driver.create_input_topic("c")
        for ts in (top - 250, top - 50, top):
            source.pipe_input("a", "x", ts)
        with pytest.raises(ValueError, match="at most 9223372036854775807"):
            source.pipe_input("a", "x", top + 1)
        with pytest.raises(ValueError, match="at most"):
            source.pipe_records([("a", "x", top + 1)])
        out = driver.create_output_topic("out").read_records_to_list()
        source.pipe_input("a", "x", top)  # the task still runs
    start = (top - 250) - (top - 250) % 100
    assert [(r.key.window.start, r.key.window.end, r.value) for r in out] == [
        (start, start + 100, 1)]
    last = top - top % 100
    from topology.windows import time_window_end

    assert time_window_end(last, 100) == top  # the window holding the largest timestamp
