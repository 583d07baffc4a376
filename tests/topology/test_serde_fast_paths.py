"""The built-in serdes' fast paths are the serdes: same values, same errors.

- ``serializer_of(serde)``: the serialize function with the common case first (string, long,
  and time-windowed serdes over those);
- ``many_deserializer_of(serde)``: a list of bytes read at once; where it cannot, it raises
  and its callers read one by one;
- ``round_trip_keeps_of(serde)``: a list check that the round trip gives back each value.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from topology import Serdes, Window, Windowed
from topology.serde import (
    Serde,
    many_deserializer_of,
    round_trip_keeps_of,
    round_trip_of,
    serializer_of,
)

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

WINDOWED = [Serdes.time_windowed(Serdes.string(), 10),
            Serdes.time_windowed(Serdes.long(), 2**62)]
READERS = [Serdes.string(), Serdes.long(), *WINDOWED]


def _outcome(call: Any, *args: Any) -> Any:
    """What ``call(*args)`` returns, or the error it raises (type and message)."""
    try:
        return ("ok", call(*args))
    except Exception as err:  # noqa: BLE001 - the error itself is compared
        return (type(err).__name__, str(err))


def test_every_reader_and_windowed_serde_has_its_fast_paths() -> None:
    for serde in READERS:
        assert many_deserializer_of(serde) is not None
    for serde in WINDOWED:
        assert serializer_of(serde) is not serde.serialize
    assert many_deserializer_of(Serdes.double()) is None
    assert many_deserializer_of(Serdes.time_windowed(Serdes.double(), 10)) is None


ODD_KEYS = st.one_of(st.text(max_size=5), st.integers(LONG_MIN - 1, LONG_MAX + 1), st.none(),
                     st.just("\ud800"), st.just(b"x"), st.booleans())
ODD_STARTS = st.one_of(st.integers(LONG_MIN - 1, LONG_MAX + 1), st.booleans(), st.just("0"))


@given(key=ODD_KEYS, start=ODD_STARTS, as_windowed=st.booleans(),
       serde=st.sampled_from(WINDOWED))
def test_a_windowed_fast_serializer_is_serialize(key: Any, start: Any, as_windowed: bool,
                                                 serde: Serde[Any]) -> None:
    value = (Windowed(key, Window(start, start)) if as_windowed
             else (key, (start, start)))
    assert _outcome(serializer_of(serde), value) == _outcome(serde.serialize, value)


def _valid(serde: Serde[Any]) -> st.SearchStrategy[bytes]:
    """Bytes the serde wrote."""
    if serde is Serdes.string():
        return st.text(max_size=6).map(serde.serialize)
    if serde is Serdes.long():
        return st.integers(LONG_MIN, LONG_MAX).map(serde.serialize)
    inner = st.text(max_size=6) if serde is WINDOWED[0] else st.integers(LONG_MIN, LONG_MAX)
    return st.builds(lambda k, s: serde.serialize(Windowed(k, Window(s, s + 1))), inner,
                     st.integers(0, LONG_MAX - 1))


ODD_DATA = st.one_of(st.binary(max_size=17), st.none(), st.just(b"\xff" * 8),
                     st.binary(min_size=8, max_size=8).map(bytearray), st.just("text"))


@given(data=st.data(), serde=st.sampled_from(READERS))
def test_reading_many_is_reading_each(data: st.DataObject, serde: Serde[Any]) -> None:
    """Bytes the serde wrote read all at once; with an odd item anywhere, reading many may
    raise (the caller then reads one by one), but never returns anything else."""
    many = many_deserializer_of(serde)
    assert many is not None
    datas = data.draw(st.lists(_valid(serde), max_size=8))
    assert many(datas) == [serde.deserialize(d) for d in datas]
    odd = data.draw(st.lists(st.one_of(_valid(serde), ODD_DATA), max_size=8))
    got = _outcome(many, odd)
    if got[0] == "ok":
        assert got[1] == [serde.deserialize(d) for d in odd]


@given(values=st.lists(st.one_of(st.text(max_size=4), st.just("é"), st.just("\ud800"),
                                 st.integers(LONG_MIN - 1, LONG_MAX + 1), st.none(),
                                 st.booleans(), st.just(b"x")), max_size=6),
       serde=st.sampled_from([Serdes.string(), Serdes.long()]))
def test_a_kept_list_is_given_back_by_the_round_trip(values: list, serde: Serde[Any]) -> None:
    keeps, round_trip = round_trip_keeps_of(serde), round_trip_of(serde)
    assert keeps is not None and round_trip is not None
    if keeps(values):
        assert all(round_trip(v) is v for v in values)


def test_plain_lists_are_kept() -> None:
    assert round_trip_keeps_of(Serdes.string())(["a", "bc", ""])
    assert round_trip_keeps_of(Serdes.long())([0, LONG_MIN, LONG_MAX])
    assert not round_trip_keeps_of(Serdes.long())([LONG_MAX + 1])
