"""The state codec writes what users store: dataclasses, named tuples, enums, datetimes,
Decimal, sets; and rebuilds user classes without running code of the data's choosing."""

from __future__ import annotations

import collections
import enum
import math
import sys
import types
from dataclasses import InitVar, dataclass, field
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from topology import Window
from topology.state.codec import StateCodecError, decode, encode

PARIS = ZoneInfo("Europe/Paris")


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Planet(enum.Enum):
    EARTH = (5.97e24, 6.37e6)
    MARS = (6.42e23, 3.39e6)


class Perm(enum.Flag):
    R = 4
    W = 2
    X = 1


Pair = collections.namedtuple("Pair", "left right")


class Point(NamedTuple):
    x: float
    y: float = 0.0


@dataclass
class Total:
    count: int
    amount: Decimal = Decimal("0")
    tags: frozenset[str] = frozenset()
    seen: list[str] = field(default_factory=list)
    cached: int = field(default=0, init=False)


@dataclass(frozen=True)
class Key:
    region: str
    day: date


@dataclass(frozen=True, slots=True)
class Slotted:
    a: int
    b: int = field(default=1, init=False)


@dataclass
class Derived:
    x: int
    doubled: int = field(init=False)

    def __post_init__(self) -> None:
        self.doubled = 2 * self.x


@dataclass
class Outer:
    key: Key
    totals: dict[str, Total]
    color: Color
    at: datetime
    nested: Outer | None = None

    class Inner(enum.Enum):
        ONE = 1


@dataclass
class Box:
    item: Any


@dataclass
class NeedsInitVar:
    x: int
    scale: InitVar[int]


Renamed = collections.namedtuple("SomethingElse", "a")  # type: ignore[name-match]  # refused


def same(back: object, value: object) -> None:
    """Equal, of the same type, and written the same (an exact round trip)."""
    assert back == value and type(back) is type(value)
    assert encode(back) == encode(value)


# --- datetimes ------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [
    datetime(2024, 2, 29, 13, 5, 7, 123456),
    datetime(2024, 2, 29, 13, 5, 7, tzinfo=UTC),
    datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 999999),
    datetime(2024, 1, 1, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2024, 1, 1, tzinfo=timezone(-timedelta(hours=23, microseconds=1), "far west")),
    datetime(2024, 7, 1, 12, tzinfo=PARIS),
    datetime(2024, 10, 27, 2, 30, tzinfo=PARIS, fold=1),  # the second 02:30 of the night
    datetime(2024, 10, 27, 2, 30, fold=1),
])
def test_datetimes_round_trip_exactly(value: datetime) -> None:
    back = decode(encode(value))
    same(back, value)
    assert back.tzinfo == value.tzinfo and back.fold == value.fold
    assert back.utcoffset() == value.utcoffset() and back.tzname() == value.tzname()
    assert repr(back) == repr(value)


def test_zones_read_back_as_their_own_kind() -> None:
    assert decode(encode(datetime(2024, 1, 1, tzinfo=UTC))).tzinfo is UTC
    assert decode(encode(timezone(timedelta(0), "UTC"))) is UTC  # the default name
    named = timezone(timedelta(hours=1), "CET")
    assert decode(encode(named)).tzname(None) == "CET"
    assert decode(encode(PARIS)) is PARIS  # ZoneInfo(key), from its cache
    assert encode(PARIS) == b"z\x00\x00\x00\x0cEurope/Paris"


@pytest.mark.parametrize("value", [
    date(2024, 2, 29), date(1, 1, 1), time(0, 0), time(23, 59, 59, 999999, fold=1),
    time(8, 30, tzinfo=timezone(timedelta(hours=-3))), time(8, 30, tzinfo=PARIS),
    timedelta(0), timedelta(days=-1, microseconds=1), timedelta.max, timedelta.min,
    timedelta(hours=36, milliseconds=5),
])
def test_dates_times_and_timedeltas_round_trip_exactly(value: object) -> None:
    back = decode(encode(value))
    same(back, value)
    assert repr(back) == repr(value)


def test_date_and_time_layouts() -> None:
    assert encode(date(2024, 2, 29)) == b"y\x07\xe8\x02\x1d"
    assert encode(timedelta(days=-1, seconds=5, microseconds=7)) == (
        b"p\xff\xff\xff\xff\x00\x00\x00\x05\x00\x00\x00\x07")
    assert encode(time(1, 2, 3, 4)) == b"h\x01\x02\x03\x00\x00\x00\x04\x00N"
    assert encode(datetime(2024, 2, 29, 1, 2, 3, 4, tzinfo=UTC)) == (
        b"D\x07\xe8\x02\x1d\x01\x02\x03\x00\x00\x00\x04\x00Z" + bytes(8) + b"N")


def test_zones_it_cannot_name_again_are_refused_when_written() -> None:
    class Custom(tzinfo):
        def utcoffset(self, dt: datetime | None) -> timedelta:
            return timedelta(hours=1)

        def dst(self, dt: datetime | None) -> timedelta:
            return timedelta(0)

        def tzname(self, dt: datetime | None) -> str:
            return "custom"

    with pytest.raises(StateCodecError, match="datetime with tzinfo.*ZoneInfo"):
        encode(datetime(2024, 1, 1, tzinfo=Custom()))
    with pytest.raises(StateCodecError, match="time with tzinfo"):
        encode([time(1, tzinfo=Custom())])

    class Stamp(datetime):
        pass

    with pytest.raises(StateCodecError, match="type Stamp.*serde"):
        encode(Stamp(2024, 1, 1))


def test_an_unknown_zone_key_is_refused_naming_it() -> None:
    with pytest.raises(StateCodecError, match="Nowhere/Atlantis"):
        decode(b"z\x00\x00\x00\x10Nowhere/Atlantis")
    with pytest.raises(StateCodecError):
        decode(b"z\x00\x00\x00\x0b../../etc/x")


# --- Decimal and sets -----------------------------------------------------------------------

@pytest.mark.parametrize("text", ["-0.00", "1.50", "1E+3", "-1.2345678901234567890123456789E-400",
                                  "Infinity", "-Infinity", "NaN", "-NaN", "sNaN", "NaN123", "0"])
def test_decimals_round_trip_as_their_string(text: str) -> None:
    value = Decimal(text)
    back = decode(encode(value))
    assert type(back) is Decimal and str(back) == text == str(value)
    assert back.as_tuple() == value.as_tuple()
    assert encode(value) == b"x" + len(text).to_bytes(4, "big") + text.encode()


def test_decimals_not_in_the_written_form_are_refused() -> None:
    for text in (b" 1", b"1_0", b"one", b"1e999999999999999999999"):
        with pytest.raises(StateCodecError, match="corrupt"):
            decode(b"x" + len(text).to_bytes(4, "big") + text)


def test_sets_and_frozensets() -> None:
    for value in (set(), frozenset(), {1, "a", b"b", (1, 2)}, frozenset({frozenset({1}), 2}),
                  {Color.RED, Level.LOW, date(2024, 1, 1)}):
        same(decode(encode(value)), value)
    assert encode({2, 1}) == encode({1, 2}) == (
        b"S\x00\x00\x00\x02i" + bytes(7) + b"\x01i" + bytes(7) + b"\x02")
    assert encode(frozenset({1}))[:1] == b"f"
    nans = {float("nan"), float("nan")}  # two NaNs, each only equal to itself
    back = decode(encode(nans))
    assert len(back) == 2 and all(math.isnan(item) for item in back)


HASHABLE = st.one_of(st.integers(), st.text(max_size=5), st.binary(max_size=5),
                     st.tuples(st.integers(), st.text(max_size=3)), st.dates(),
                     st.sampled_from(Color), st.sampled_from(Level))


@settings(max_examples=examples(200))
@given(st.lists(HASHABLE, max_size=12), st.randoms(use_true_random=False))
def test_equal_sets_encode_equal_whatever_their_insertion_order(items: list[Any],
                                                                 rnd: Any) -> None:
    # items equal to another of another type (1 == Level.LOW) make the set keep whichever
    # came first: that set has other members, so its bytes differ rightly
    assume(all(type(a) is type(b) for a in items for b in items if a == b))
    shuffled = list(items)
    rnd.shuffle(shuffled)
    assert encode(set(items)) == encode(set(shuffled)) == encode(set(reversed(items)))
    assert encode(frozenset(items)) == encode(frozenset(shuffled))
    assert decode(encode(set(items))) == set(items)


def test_out_of_order_or_repeated_set_items_are_refused() -> None:
    one, two = encode(1), encode(2)
    assert decode(b"S\x00\x00\x00\x02" + one + two) == {1, 2}
    with pytest.raises(StateCodecError, match="corrupt"):
        decode(b"S\x00\x00\x00\x02" + two + one)
    with pytest.raises(StateCodecError, match="corrupt"):
        decode(b"f\x00\x00\x00\x02" + one + one)
    with pytest.raises(StateCodecError, match="corrupt"):
        decode(b"S\x00\x00\x00\x01" + encode([1]))  # unhashable


# --- enums, named tuples, dataclasses -------------------------------------------------------

@pytest.mark.parametrize("value", [Color.RED, Color.GREEN, Level.HIGH, Planet.MARS, Perm.R,
                                   Perm.R | Perm.W, Outer.Inner.ONE])
def test_enum_members_round_trip_as_themselves(value: enum.Enum) -> None:
    back = decode(encode(value))
    assert back is value or (isinstance(value, enum.Flag) and back == value)
    assert type(back) is type(value)


def test_enum_layout_names_the_class_then_the_value() -> None:
    name = f"{__name__}:Level".encode()
    assert encode(Level.HIGH) == (b"E" + len(name).to_bytes(4, "big") + name
                                  + b"i" + bytes(7) + b"\x02")
    assert encode(Level.HIGH) != encode(2)  # an IntEnum is not written as its int


@pytest.mark.parametrize("value", [Pair(1, "a"), Pair([1], Pair(None, b"")), Point(1.5),
                                   Point(x=2.0, y=-1.0)])
def test_named_tuples_round_trip(value: tuple[Any, ...]) -> None:
    same(decode(encode(value)), value)


def test_dataclasses_round_trip() -> None:
    total = Total(3, Decimal("1.10"), frozenset({"a", "b"}), ["x"])
    total.cached = 42  # an init=False field keeps what the instance had
    for value in (Total(1), total, Key("eu", date(2024, 1, 1)), Slotted(5),
                  Outer(Key("us", date(2023, 12, 31)), {"a": total}, Color.GREEN,
                        datetime(2024, 1, 1, tzinfo=PARIS),
                        Outer(Key("x", date(2000, 1, 1)), {}, Color.RED, datetime(2000, 1, 1))),
                  Box(Box([Pair(Level.LOW, {1, 2}), Point(0.5)]))):
        back = decode(encode(value))
        same(back, value)
        assert repr(back) == repr(value)
    assert decode(encode(total)).cached == 42
    frozen = decode(encode(Key("eu", date(2024, 1, 1))))
    with pytest.raises(AttributeError):
        frozen.region = "us"  # still frozen
    assert hash(frozen) == hash(Key("eu", date(2024, 1, 1)))


def test_init_false_fields_take_the_stored_value_not_the_recomputed_one() -> None:
    value = Derived(3)
    value.doubled = 99
    assert decode(encode(value)).doubled == 99
    slotted = Slotted(1)
    object.__setattr__(slotted, "b", 7)
    assert decode(encode(slotted)).b == 7


def test_dataclass_layout() -> None:
    name = f"{__name__}:Slotted".encode()
    assert encode(Slotted(5)) == (b"c" + len(name).to_bytes(4, "big") + name + b"\x00\x00\x00\x02"
                                  + b"\x00\x00\x00\x01a" + encode(5)
                                  + b"\x00\x00\x00\x01b" + encode(1))


def test_classes_that_could_not_be_found_again_are_refused_when_written() -> None:
    @dataclass
    class Local:
        x: int

    class LocalColor(enum.Enum):
        RED = 1

    LocalPair = collections.namedtuple("LocalPair", "a b")

    for value in (Local(1), LocalColor.RED, [Box(Local(1))]):
        with pytest.raises(StateCodecError, match="defined inside a function.*module level"):
            encode(value)
    with pytest.raises(StateCodecError, match="LocalPair is not found.*has no LocalPair, so the "
                                              "state could not be read back.*module level"):
        encode(LocalPair(1, 2))  # its qualname has no <locals>: found missing all the same
    with pytest.raises(StateCodecError, match="SomethingElse.*has no SomethingElse.*module level"):
        encode(Renamed(1))
    with pytest.raises(StateCodecError, match="InitVar 'scale'"):
        encode(NeedsInitVar(1, 2))


@pytest.fixture
def models() -> Any:
    """A module of model classes, imported as ``codec_test_models`` (and removed after)."""
    module = types.ModuleType("codec_test_models")
    sys.modules[module.__name__] = module  # before its classes: dataclass looks the module up
    exec(
        "import collections, enum\n"
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Total:\n"
        "    count: int\n"
        "    sum: float = 0.0\n"
        "class Side(enum.Enum):\n"
        "    BUY = 'buy'\n"
        "Pair = collections.namedtuple('Pair', 'a b')\n", module.__dict__)
    yield module
    sys.modules.pop(module.__name__, None)


def test_a_class_whose_module_is_not_imported_is_refused_naming_it(models: Any) -> None:
    data = encode([models.Total(2, 1.5)])
    assert decode(data) == [models.Total(2, 1.5)]
    del sys.modules["codec_test_models"]
    with pytest.raises(StateCodecError,
                       match="class codec_test_models:Total is not imported in this process; "
                             "import it before opening the state"):
        decode(data)
    assert "codec_test_models" not in sys.modules  # reading never imports


def test_reading_never_imports_a_module_the_data_names() -> None:
    name = b"antigravity:Fly"  # importing it would open a web browser
    assert "antigravity" not in sys.modules
    with pytest.raises(StateCodecError, match="antigravity:Fly is not imported"):
        decode(b"c" + len(name).to_bytes(4, "big") + name + bytes(4))
    assert "antigravity" not in sys.modules


def class_bytes(tag: bytes, name: str, rest: bytes = b"\x00\x00\x00\x00") -> bytes:
    raw = name.encode()
    return tag + len(raw).to_bytes(4, "big") + raw + rest


@pytest.mark.parametrize(("data", "message"), [
    (class_bytes(b"c", "os:system"), "os:system is not a dataclass"),
    (class_bytes(b"c", "builtins:eval"), "builtins:eval is not a dataclass"),
    (class_bytes(b"c", "subprocess:Popen"), "subprocess:Popen is not a dataclass"),
    (class_bytes(b"n", "os:system"), "os:system is not a named tuple"),
    (class_bytes(b"n", f"{__name__}:Total"), "Total is not a named tuple"),
    (class_bytes(b"E", f"{__name__}:Pair", encode(1)), "Pair is not an enum"),
    (class_bytes(b"c", f"{__name__}:Color"), "Color is not a dataclass"),
    (class_bytes(b"c", "builtins:tuple"), "builtins:tuple is not a dataclass"),
    (class_bytes(b"c", f"{__name__}:Missing"), "has no Missing"),
    (class_bytes(b"c", f"{__name__}:Total.__init__"), "is not a dataclass"),
    (class_bytes(b"c", f"{__name__}:PARIS.key"), "has no PARIS.key"),
    (class_bytes(b"c", "no colon"), "not module:qualname"),
])
def test_a_named_object_of_another_kind_is_refused(data: bytes, message: str) -> None:
    if "subprocess" not in sys.modules:
        import subprocess  # noqa: F401
    with pytest.raises(StateCodecError, match=message):
        decode(data)


def test_a_changed_class_is_refused_or_filled_with_defaults(models: Any) -> None:
    total, side, pair = encode(models.Total(1)), encode(models.Side.BUY), encode(models.Pair(1, 2))
    exec(  # the next version of the module
        "import collections, enum\n"
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Total:\n"
        "    count: int\n"
        "    mean: float = 0.0\n"
        "class Side(enum.Enum):\n"
        "    SELL = 'sell'\n"
        "Pair = collections.namedtuple('Pair', 'a b c')\n", models.__dict__)
    with pytest.raises(StateCodecError, match="Total has no field 'sum'"):
        decode(total)
    with pytest.raises(StateCodecError, match="enum codec_test_models:Side has no member.*'buy'"):
        decode(side)
    with pytest.raises(StateCodecError, match="Pair has 3 fields, the state has 2"):
        decode(pair)
    exec("from dataclasses import dataclass\n"
         "@dataclass\n"
         "class Total:\n"
         "    count: int\n"
         "    sum: float = 0.0\n"
         "    mean: float = -1.0\n", models.__dict__)
    assert decode(total) == models.Total(1, 0.0, -1.0)


def test_a_failing_constructor_is_reported_naming_the_class(models: Any) -> None:
    data = encode(models.Total(-1))
    exec("from dataclasses import dataclass\n"
         "@dataclass\n"
         "class Total:\n"
         "    count: int\n"
         "    sum: float = 0.0\n"
         "    def __post_init__(self):\n"
         "        if self.count < 0: raise ValueError('negative count')\n", models.__dict__)
    with pytest.raises(StateCodecError, match="rebuilding dataclass codec_test_models:Total.*"
                                              "ValueError: negative count"):
        decode(data)


# --- everything together --------------------------------------------------------------------

ZONES = st.one_of(
    st.none(), st.just(UTC), st.timezones(),
    st.builds(timezone, st.timedeltas(-timedelta(hours=23, minutes=59),
                                      timedelta(hours=23, minutes=59))),
    st.builds(timezone, st.timedeltas(timedelta(hours=-12), timedelta(hours=12)),
              st.text(min_size=1, max_size=5, alphabet="ABCXYZ+-")))
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8,
    alphabet=st.characters(blacklist_categories=["Cs"])), st.binary(max_size=8),
    st.decimals(allow_nan=False), st.dates(), st.times(timezones=ZONES),
    st.datetimes(timezones=ZONES), st.timedeltas(), ZONES,
    st.sampled_from(Color), st.sampled_from(Level), st.sampled_from(Planet),
    st.builds(Window, st.integers(0, 10**6), st.integers(0, 10**6)))
HASHABLE_SCALARS = SCALARS.filter(lambda v: not isinstance(v, float | Decimal))


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.sets(HASHABLE_SCALARS, max_size=3), st.frozensets(HASHABLE_SCALARS, max_size=3),
        st.builds(Pair, inner, inner),
        st.builds(Point, st.floats(allow_nan=False), st.floats(allow_nan=False)),
        st.builds(Box, inner), st.builds(Total, st.integers(), st.decimals(allow_nan=False),
                                         st.frozensets(st.text(max_size=3), max_size=3)),
        st.builds(Key, st.text(max_size=3), st.dates()))


@settings(max_examples=examples(400))
@given(st.recursive(SCALARS, containers, max_leaves=12))
def test_nested_values_of_every_type_round_trip_exactly(value: object) -> None:
    data = encode(value)
    back = decode(data)
    assert back == value and type(back) is type(value)
    assert encode(back) == data


NEW_TAGS = st.sampled_from([b"S", b"f", b"x", b"y", b"h", b"D", b"p", b"Z", b"z", b"E", b"n",
                            b"c"])


@settings(max_examples=examples(500))
@given(NEW_TAGS, st.binary(max_size=40))
def test_foreign_bytes_under_the_new_tags_are_refused_never_half_read(tag: bytes,
                                                                       rest: bytes) -> None:
    try:
        value = decode(tag + rest)
    except StateCodecError:
        return
    assert encode(value) == tag + rest  # whatever decodes is a whole, canonical value
