"""The built-in serdes' fast paths are the serdes: same values, same errors.

- ``serializer_of(serde)``: the serialize function with the common case first (string, long,
  and time-windowed serdes over those);
- ``many_deserializer_of(serde)``: a list of bytes read at once; where it cannot, it raises
  and its callers read one by one;
- ``round_trip_keeps_of(serde)``: a list check that the round trip gives back each value;
- ``reads_back_as_written(writer, reader)``: a list check that values the writer wrote read
  back through the reader as themselves, so an output topic may skip their bytes.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import (
    Produced,
    Serdes,
    StreamsBuilder,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.serde import (
    Serde,
    many_deserializer_of,
    reads_back_as_written,
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


WRITTEN = st.one_of(st.text(max_size=4), st.just("\ud800"), st.integers(LONG_MIN - 1, LONG_MAX + 1),
                    st.none(), st.booleans(), st.just(b"x"), st.floats(allow_nan=False))
WINDOWS = st.builds(Window, st.one_of(st.integers(-5, 30), st.booleans()),
                    st.one_of(st.integers(-5, 40), st.just(LONG_MAX)))


@settings(deadline=None)
@given(data=st.data(), writer=st.sampled_from(READERS), reader=st.sampled_from(
    [*READERS, Serdes.time_windowed(Serdes.string(), 11), Serdes.double()]))
def test_what_reads_back_as_written_is_what_the_bytes_read_back(
        data: st.DataObject, writer: Serde[Any], reader: Serde[Any]) -> None:
    """Values the writer wrote without error: where the check holds, each one's bytes read
    back through the reader as an equal value of the same type."""
    check = reads_back_as_written(writer, reader)
    if writer is not reader and writer not in WINDOWED:
        assert check is None
    if check is None:
        return
    values = data.draw(st.lists(st.one_of(WRITTEN, st.builds(Windowed, WRITTEN, WINDOWS)),
                                max_size=6))
    written = [v for v in values if _outcome(writer.serialize, v)[0] == "ok"]
    if check(written):
        back = [reader.deserialize(writer.serialize(v)) for v in written]
        assert back == written
        assert [type(v) for v in back] == [type(v) for v in written]
        assert [type(v[1][0]) for v in back if type(v) is Windowed] == [
            type(v[1][0]) for v in written if type(v) is Windowed]


def test_windowed_serdes_read_back_as_written_only_with_the_same_size() -> None:
    ten = Serdes.time_windowed(Serdes.string(), 10)
    assert reads_back_as_written(ten, Serdes.time_windowed(Serdes.string(), 10)) is not None
    assert reads_back_as_written(ten, Serdes.time_windowed(Serdes.string(), 11)) is None
    assert reads_back_as_written(ten, Serdes.time_windowed(Serdes.long(), 10)) is None
    assert reads_back_as_written(Serdes.double(), Serdes.double()) is None
    check = reads_back_as_written(ten, ten)
    assert check is not None
    assert check([Windowed("a", Window(0, 10)), None])
    assert not check([Windowed("a", Window(0, 11))])  # reads back as Window(0, 10)
    assert not check([Windowed(1, Window(0, 10))])


@settings(deadline=None, max_examples=examples(60))
@given(records=st.lists(st.tuples(st.sampled_from(["a", "é", "b"]), st.integers(-3, 3),
                                  st.integers(0, 50)), max_size=12),
       reader_size=st.sampled_from([10, 7]), durable=st.booleans())
def test_an_output_topic_reads_what_its_bytes_say(records: list[tuple[str, int, int]],
                                                   reader_size: int, durable: bool,
                                                   tmp_path_factory: Any) -> None:
    """Read through serdes, an output topic gives what deserializing each record's bytes
    gives, whether it takes the values written (same serdes) or reads bytes (a window size
    that differs, a durable driver)."""
    written = Serdes.time_windowed(Serdes.string(), 10)
    b = StreamsBuilder()
    (b.stream("in").map(lambda k, v: (Windowed(k, Window(v + 3, v + 13)), v))
     .to("out", Produced(written, Serdes.long())))
    reader = Serdes.time_windowed(Serdes.string(), reader_size)
    state = {"state_dir": tmp_path_factory.mktemp("s")} if durable else {}
    with TopologyTestDriver(b.build(), **state) as driver:
        driver.create_input_topic("in").pipe_records(records)
        items = list(driver._outputs.get("out", ()))
        got = driver.create_output_topic("out", reader, Serdes.long()).read_records_to_list()
    expected = [(reader.deserialize(item[4]), Serdes.long().deserialize(item[5]), item[2])
                for item in items]
    assert [(r.key, r.value, r.timestamp) for r in got] == expected
    assert all(type(r.value) is int for r in got)
