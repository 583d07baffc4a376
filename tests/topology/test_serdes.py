"""Contract tests of the built-in serdes, user serdes, error messages and keys without a serde."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from suppress import BufferConfig, Suppressed
from topology import (
    Consumed,
    Grouped,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TopologyTestDriver,
    Window,
    Windowed,
)
from topology.serde import (
    Serde,
    SerdeError,
    deserialize_from_topic,
    deserialize_produced,
    fallback_key_bytes,
    fallback_value_bytes,
    serialize_for_topic,
    serializer_of,
    windowed_serializer,
)

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
ONE_MB = 1_000_000


class Utf16Serde:
    """A user's serde: UTF-16 big-endian text, no base class."""

    name = "utf16"

    def serialize(self, value: str | None) -> bytes | None:
        return None if value is None else value.encode("utf-16-be")

    def deserialize(self, data: bytes | None) -> str | None:
        return None if data is None else data.decode("utf-16-be")


class NamelessSerde:
    """A user's serde without a ``name``, failing on everything."""

    def serialize(self, value: Any) -> bytes | None:
        raise ValueError("never writes")

    def deserialize(self, data: bytes | None) -> Any:
        raise ValueError("never reads")


def same_float(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


# -- round trips ----------------------------------------------------------------------------------

@given(st.text())
def test_string_round_trip(value: str) -> None:
    data = Serdes.string().serialize(value)
    assert data == value.encode("utf-8")
    assert Serdes.string().deserialize(data) == value


@given(st.integers(LONG_MIN, LONG_MAX))
def test_long_round_trip(value: int) -> None:
    data = Serdes.long().serialize(value)
    assert data == struct.pack(">q", value)
    assert Serdes.long().deserialize(data) == value


@given(st.integers(-(2**31), 2**31 - 1))
def test_integer_round_trip(value: int) -> None:
    data = Serdes.integer().serialize(value)
    assert data == struct.pack(">i", value)
    assert Serdes.integer().deserialize(data) == value


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_double_round_trip_including_nan_and_infinities(value: float) -> None:
    data = Serdes.double().serialize(value)
    assert data is not None and len(data) == 8
    back = Serdes.double().deserialize(data)
    assert isinstance(back, float) and same_float(back, value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -0.0, 5e-324])
def test_double_special_values(value: float) -> None:
    assert Serdes.double().serialize(value) == struct.pack(">d", value)
    assert same_float(Serdes.double().deserialize(struct.pack(">d", value)), value)


def test_double_writes_an_int_as_the_nearest_double() -> None:
    assert Serdes.double().deserialize(Serdes.double().serialize(3)) == 3.0


@given(st.binary())
def test_bytes_round_trip(value: bytes) -> None:
    assert Serdes.bytes().serialize(value) == value
    assert Serdes.bytes().deserialize(value) == value
    assert Serdes.bytes().serialize(bytearray(value)) == value


@given(json_values.filter(lambda v: v is not None))  # a top-level None is a tombstone
def test_json_round_trip(value: Any) -> None:
    data = Serdes.json().serialize(value)
    assert data == json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")
    assert Serdes.json().deserialize(data) == value


@given(st.recursive(
    st.none() | st.integers() | st.text() | st.binary() | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.frozensets(st.integers(), max_size=3),
    max_leaves=10,
))
def test_pickle_round_trip(value: Any) -> None:
    assert Serdes.pickle().deserialize(Serdes.pickle().serialize(value)) == value


@given(st.text(), st.integers(0, LONG_MAX), st.integers(1, LONG_MAX))
def test_time_windowed_round_trip(key: str, start: int, size: int) -> None:
    serde = Serdes.time_windowed(Serdes.string(), size)
    w = Windowed(key, Window(start, min(start + size, LONG_MAX)))
    data = serde.serialize(w)
    assert data == key.encode("utf-8") + struct.pack(">q", start)
    assert serde.deserialize(data) == w


@given(st.integers(LONG_MIN, LONG_MAX), st.integers(LONG_MIN, LONG_MAX),
       st.integers(LONG_MIN, LONG_MAX))
def test_session_windowed_round_trip(key: int, a: int, b: int) -> None:
    serde = Serdes.session_windowed(Serdes.long())
    w = Windowed(key, Window(min(a, b), max(a, b)))
    data = serde.serialize(w)
    assert data == struct.pack(">qqq", key, max(a, b), min(a, b))
    assert serde.deserialize(data) == w


BUILT_INS = [Serdes.string(), Serdes.long(), Serdes.integer(), Serdes.double(), Serdes.bytes(),
             Serdes.json(), Serdes.pickle(), Serdes.time_windowed(Serdes.string(), 10),
             Serdes.session_windowed(Serdes.long())]


@pytest.mark.parametrize("serde", BUILT_INS, ids=repr)
def test_none_passes_through_both_ways(serde: Serde[Any]) -> None:
    assert serde.serialize(None) is None
    assert serde.deserialize(None) is None
    assert isinstance(serde, Serde)


def test_built_in_names_and_repr() -> None:
    assert repr(Serdes.string()) == "Serde(string)"
    assert Serdes.time_windowed(Serdes.string(), 10).name == "time_windowed(string, 10)"
    assert Serdes.session_windowed(Utf16Serde()).name == "session_windowed(utf16)"


# -- errors: wrong types, corrupt bytes, message size ---------------------------------------------

class Local:
    pass


@pytest.mark.parametrize(("serde", "name", "value"), [
    (Serdes.string(), "string", 1),
    (Serdes.string(), "string", b"a"),
    (Serdes.string(), "string", "\ud800"),
    (Serdes.long(), "long", "1"),
    (Serdes.long(), "long", 1.5),
    (Serdes.long(), "long", True),
    (Serdes.long(), "long", 2**63),
    (Serdes.integer(), "integer", 2**31),
    (Serdes.integer(), "integer", "1"),
    (Serdes.double(), "double", "1.0"),
    (Serdes.double(), "double", True),
    (Serdes.double(), "double", 10**400),
    (Serdes.bytes(), "bytes", "a"),
    (Serdes.json(), "json", {1, 2}),
    (Serdes.json(), "json", {1: "a", "b": 2}),
    (Serdes.pickle(), "pickle", lambda: None),
    (Serdes.time_windowed(Serdes.string(), 10), "time_windowed(string, 10)", ("a", (0, 10))),
    (Serdes.time_windowed(Serdes.string(), 10), "time_windowed(string, 10)",
     Windowed(1, Window(0, 10))),
    (Serdes.session_windowed(Serdes.string()), "session_windowed(string)", "a"),
])
def test_wrong_types_raise_a_serde_error_naming_the_serde(serde: Serde[Any], name: str,
                                                          value: Any) -> None:
    with pytest.raises(SerdeError, match=r"^serde " + name.replace("(", r"\(").replace(")", r"\)")
                       + " cannot serialize " + type(value).__name__):
        serde.serialize(value)


@pytest.mark.parametrize(("serde", "data"), [
    (Serdes.long(), b"\x00" * 7),
    (Serdes.long(), b"\x00" * 9),
    (Serdes.long(), b""),
    (Serdes.integer(), b"\x00" * 3),
    (Serdes.integer(), b"\x00" * 8),
    (Serdes.double(), b"\x00" * 7),
    (Serdes.double(), b"\x00" * 16),
    (Serdes.string(), b"\xff"),
    (Serdes.string(), b"a\xc3"),
    (Serdes.json(), b"{"),
    (Serdes.json(), b"\xff"),
    (Serdes.pickle(), b"not a pickle"),
    (Serdes.time_windowed(Serdes.string(), 10), b"\x00" * 7),
    (Serdes.time_windowed(Serdes.string(), 10), b"\xff" + b"\x00" * 8),
    (Serdes.session_windowed(Serdes.string()), b"\x00" * 15),
    (Serdes.session_windowed(Serdes.long()), b"\x00" * 17),
])
def test_corrupt_bytes_raise_a_serde_error_naming_the_serde(serde: Any, data: bytes) -> None:
    with pytest.raises(SerdeError, match=r"cannot deserialize bytes of length") as info:
        serde.deserialize(data)
    assert str(info.value).startswith(f"serde {serde.name} cannot deserialize")


@pytest.mark.parametrize("serde", BUILT_INS, ids=repr)
def test_deserializing_something_that_is_not_bytes_is_refused(serde: Any) -> None:
    with pytest.raises(SerdeError, match="serde .* cannot deserialize int 5: it reads bytes"):
        serde.deserialize(5)


def test_windowed_serdes_check_their_arguments() -> None:
    with pytest.raises(TypeError, match="inner serde must be a Serde"):
        Serdes.time_windowed("string", 10)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="inner serde must be a Serde"):
        Serdes.session_windowed(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="larger than zero"):
        Serdes.time_windowed(Serdes.string(), 0)
    with pytest.raises(ValueError, match="must not be negative"):
        Serdes.time_windowed(Serdes.string(), -1)
    with pytest.raises(TypeError, match="window size"):
        Serdes.time_windowed(Serdes.string(), 1.5)  # type: ignore[arg-type]


def test_time_windowed_end_is_capped_at_long_max() -> None:
    serde = Serdes.time_windowed(Serdes.string(), 10)
    w = serde.deserialize(b"k" + struct.pack(">q", LONG_MAX - 3))
    assert w == Windowed("k", Window(LONG_MAX - 3, LONG_MAX))


@pytest.mark.parametrize(("call", "length"), [
    (lambda: Serdes.long().serialize("x" * ONE_MB), ONE_MB),
    (lambda: Serdes.string().serialize(b"x" * ONE_MB), ONE_MB),
    (lambda: Serdes.json().serialize(["x"] * ONE_MB + [{1}]), ONE_MB + 1),
    (lambda: Serdes.long().deserialize(b"\x07" * ONE_MB), ONE_MB),
    (lambda: Serdes.string().deserialize(b"a" * ONE_MB + b"\xff"), ONE_MB + 1),
    (lambda: Serdes.json().deserialize(b"[" * ONE_MB), ONE_MB),
    (lambda: fallback_key_bytes(frozenset(range(ONE_MB))), ONE_MB),
    (lambda: fallback_value_bytes({"a": "x" * ONE_MB, "b": {1}}), 2),
    (lambda: deserialize_from_topic(NamelessSerde(), b"\x00" * ONE_MB, "t"), ONE_MB),
    (lambda: deserialize_produced(Serdes.long(), "x" * ONE_MB, "t"), ONE_MB),
])
def test_a_megabyte_value_gives_a_short_message(call: Any, length: int) -> None:
    with pytest.raises(SerdeError) as info:
        call()
    message = str(info.value)
    assert len(message) < 1000
    assert f"of length {length}" in message


def test_the_message_shows_the_type_length_and_a_short_prefix() -> None:
    with pytest.raises(SerdeError) as info:
        Serdes.long().deserialize(b"abc" * 100)
    assert str(info.value) == ("serde long cannot deserialize bytes of length 300: "
                               f"{(b'abc' * 100)[:40]!r}...: long serde needs exactly 8 bytes, "
                               "got 300")


# -- errors naming the topic ----------------------------------------------------------------------

def test_deserialize_from_topic_says_deserialize_and_names_the_topic() -> None:
    with pytest.raises(SerdeError) as info:
        deserialize_from_topic(Serdes.long(), b"abc", "clicks", "key")
    assert str(info.value).startswith(
        "cannot deserialize the key of a record of topic 'clicks': serde long cannot "
        "deserialize bytes of length 3: b'abc'")
    assert info.value.topic == "clicks"
    assert isinstance(info.value.__cause__, SerdeError)


def test_deserialize_from_topic_wraps_a_user_serde_exception() -> None:
    with pytest.raises(SerdeError, match="of topic 'out': serde NamelessSerde failed on bytes "
                                         "of length 1: b'x': never reads") as info:
        deserialize_from_topic(NamelessSerde(), b"x", "out")
    assert isinstance(info.value.__cause__, ValueError)
    assert deserialize_from_topic(Serdes.long(), None, "out") is None


def test_deserialize_produced_reports_a_wrong_reader_as_cannot_deserialize() -> None:
    with pytest.raises(SerdeError) as info:
        deserialize_produced(Serdes.string(), 42, "alerts")
    message = str(info.value)
    assert message.startswith("cannot deserialize the value of a record of topic 'alerts' "
                              "with serde string: the topology wrote it without a serde as "
                              "int 42")
    assert "cannot serialize" not in message.split(" (")[0]
    assert info.value.topic == "alerts"
    assert deserialize_produced(Serdes.long(), 42, "alerts") == 42
    assert deserialize_produced(Serdes.long(), None, "alerts") is None


def test_serialize_for_topic_says_serialize_and_names_the_topic() -> None:
    with pytest.raises(SerdeError, match="^cannot serialize the value of a record for topic "
                                         "'in': serde long cannot serialize str") as info:
        serialize_for_topic(Serdes.long(), "x", "in")
    assert info.value.topic == "in"
    with pytest.raises(SerdeError, match="serde NamelessSerde failed on int 1: never writes"):
        serialize_for_topic(NamelessSerde(), 1, "in", "key")
    assert serialize_for_topic(Serdes.long(), 1, "in") == struct.pack(">q", 1)


# -- user serdes ----------------------------------------------------------------------------------

def test_a_user_class_is_a_serde_and_passes_the_option_checks() -> None:
    serde = Utf16Serde()
    assert isinstance(serde, Serde)
    assert not isinstance(object(), Serde)
    for options in (Consumed, Produced, Grouped, Materialized):
        assert options(key_serde=serde, value_serde=serde).value_serde is serde
    with pytest.raises(TypeError, match="must be a Serde"):
        Consumed(value_serde=object())  # type: ignore[arg-type]
    assert serializer_of(serde) == serde.serialize


def test_a_user_serde_runs_through_the_driver() -> None:
    b = StreamsBuilder()
    (b.stream("in", Consumed(key_serde=Utf16Serde(), value_serde=Utf16Serde()))
     .map_values(str.upper)
     .to("out", Produced(key_serde=Utf16Serde(), value_serde=Utf16Serde())))
    with TopologyTestDriver(b.build()) as driver:
        driver.create_input_topic("in", Utf16Serde(), Utf16Serde()).pipe_input("k", "héllo", 1)
        out = driver.create_output_topic("out", Utf16Serde(), Utf16Serde())
        assert out.read_key_value() == ("k", "HÉLLO")


def test_a_user_serde_inside_a_windowed_serde() -> None:
    serde = Serdes.session_windowed(Utf16Serde())
    w = Windowed("ké", Window(3, 9))
    data = serde.serialize(w)
    assert data == "ké".encode("utf-16-be") + struct.pack(">qq", 9, 3)
    assert serde.deserialize(data) == w
    with pytest.raises(SerdeError, match="serde session_windowed\\(NamelessSerde\\) cannot "
                                         "serialize Windowed"):
        Serdes.session_windowed(NamelessSerde()).serialize(w)


# -- the fast serializers and the windowed layouts ------------------------------------------------

@given(st.text() | st.integers(LONG_MIN, LONG_MAX))
def test_fast_serializers_give_the_serde_bytes(value: Any) -> None:
    serde = Serdes.string() if isinstance(value, str) else Serdes.long()
    assert serializer_of(serde)(value) == serde.serialize(value)


def test_the_fast_string_serializer_raises_the_serde_error_for_a_lone_surrogate() -> None:
    with pytest.raises(SerdeError, match="serde string cannot serialize str"):
        serializer_of(Serdes.string())("\ud800")


@given(st.text(), st.integers(0, 2**62), st.integers(0, 2**62 - 2))
def test_one_windowed_layout_everywhere(key: str, start: int, length: int) -> None:
    w = Windowed(key, Window(start, start + length + 1))
    time_bytes = Serdes.time_windowed(Serdes.string(), length + 1).serialize(w)
    assert windowed_serializer(Serdes.string(), session=False)(w) == time_bytes
    assert windowed_serializer(None, session=False)(w) == time_bytes
    assert fallback_key_bytes(w) == time_bytes
    session_bytes = Serdes.session_windowed(Serdes.string()).serialize(w)
    assert windowed_serializer(Serdes.string(), session=True)(w) == session_bytes
    assert windowed_serializer(None, session=True)(w) == session_bytes


# -- keys without a serde -------------------------------------------------------------------------

@given(st.lists(st.text(), max_size=20))
def test_str_keys_have_the_string_serde_bytes_and_order(keys: list[str]) -> None:
    for key in keys:
        assert fallback_key_bytes(key) == Serdes.string().serialize(key)
    assert sorted(keys, key=fallback_key_bytes) == sorted(keys)  # UTF-8 order = code points


@given(st.lists(st.integers(LONG_MIN, LONG_MAX), max_size=20))
def test_int_keys_have_the_long_serde_bytes_and_order(keys: list[int]) -> None:
    for key in keys:
        assert fallback_key_bytes(key) == Serdes.long().serialize(key)
    long_bytes = serializer_of(Serdes.long())
    assert sorted(keys, key=fallback_key_bytes) == sorted(keys, key=long_bytes)


@given(st.floats())
def test_float_keys_have_the_double_serde_bytes(key: float) -> None:
    assert fallback_key_bytes(key) == Serdes.double().serialize(key)


@given(st.binary())
def test_bytes_keys_are_kept_as_they_are(key: bytes) -> None:
    assert fallback_key_bytes(key) == key


def test_bool_and_none_keys() -> None:
    assert fallback_key_bytes(False) == b"\x00"
    assert fallback_key_bytes(True) == b"\x01"
    assert fallback_key_bytes(None) == b""


@pytest.mark.parametrize("key", [2**63, -(2**63) - 1, ("a", 2**64)])
def test_ints_outside_64_bits_are_refused(key: Any) -> None:
    with pytest.raises(SerdeError, match="outside the range of Kafka's long"):
        fallback_key_bytes(key)


@pytest.mark.parametrize("key", [frozenset({1}), {"a": 1}, ["a"], Local(), 1j, ("a", {1}),
                                 Window])
def test_other_keys_are_refused_naming_the_type_and_asking_for_a_key_serde(key: Any) -> None:
    with pytest.raises(SerdeError) as info:
        fallback_key_bytes(key)
    message = str(info.value)
    assert "give a serde" in message or "Consumed(key_serde=...)" in message
    element = key[1] if isinstance(key, tuple) else key
    assert type(element).__qualname__ in message


def test_a_key_of_a_local_class_names_the_class() -> None:
    class Point:
        pass

    with pytest.raises(SerdeError, match=r"a key of type test_a_key_of_a_local_class_names_the_"
                                         r"class.<locals>.Point has no key serde.*"
                                         r"Consumed\(key_serde=...\)"):
        fallback_key_bytes(Point())


def test_subclasses_of_the_supported_types_are_written_as_their_base() -> None:
    import enum

    class Colour(enum.IntEnum):
        RED = 1

    class Name(str):
        pass

    assert fallback_key_bytes(Colour.RED) == fallback_key_bytes(1)
    assert fallback_key_bytes(Name("a")) == b"a"
    assert fallback_key_bytes(Window(1, 2)) == fallback_key_bytes((1, 2))


SCALARS = {
    "none": st.none(),
    "bool": st.booleans(),
    "int": st.integers(LONG_MIN, LONG_MAX),
    "float": st.floats(allow_nan=False).map(lambda f: f + 0.0),  # no -0.0: equal to 0.0
    "bytes": st.binary(max_size=6),
    "str": st.text(max_size=6),
}
shapes = st.lists(
    st.recursive(st.sampled_from(sorted(SCALARS)),
                 lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=6),
    max_size=4,
).map(tuple)


def of_shape(shape: Any) -> st.SearchStrategy[Any]:
    if isinstance(shape, str):
        return SCALARS[shape]
    return st.tuples(*(of_shape(s) for s in shape))


@given(shapes.flatmap(lambda shape: st.tuples(of_shape(shape), of_shape(shape))))
def test_tuples_of_one_shape_order_as_python_orders_them(pair: tuple[Any, Any]) -> None:
    a, b = pair
    ka, kb = fallback_key_bytes(a), fallback_key_bytes(b)
    assert (ka == kb) == (a == b)
    if a != b:
        assert (ka < kb) == (a < b)


def typed(value: Any) -> Any:
    """What the key bytes must tell apart: types, float bits and nesting."""
    if isinstance(value, tuple):
        return ("tuple", tuple(typed(v) for v in value))
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    return (type(value).__name__, value)


any_tuples = st.recursive(st.one_of(*SCALARS.values(), st.floats()),
                          lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=8
                          ).filter(lambda v: isinstance(v, tuple))


@given(any_tuples, any_tuples)
def test_tuple_bytes_are_unambiguous(a: tuple[Any, ...], b: tuple[Any, ...]) -> None:
    assert (fallback_key_bytes(a) == fallback_key_bytes(b)) == (typed(a) == typed(b))
    assert fallback_key_bytes(a + b).startswith(fallback_key_bytes(a))
    if b:
        assert fallback_key_bytes(a) < fallback_key_bytes(a + b)


def test_tuple_layout_by_example() -> None:
    assert fallback_key_bytes(()) == b""
    assert fallback_key_bytes((None, False, True)) == b"\x01\x02\x03"
    assert fallback_key_bytes((1,)) == b"\x04" + struct.pack(">Q", 2**63 + 1)
    assert fallback_key_bytes(("a\x00b",)) == b"\x07a\x00\xffb\x00"
    assert fallback_key_bytes((b"",)) == b"\x06\x00"
    assert fallback_key_bytes(((),)) == b"\x08\x00"
    assert fallback_key_bytes((-1.0,)) < fallback_key_bytes((-0.0,)) < fallback_key_bytes((0.0,))
    assert fallback_key_bytes((-math.inf,)) < fallback_key_bytes((-1.0,))
    assert fallback_key_bytes((math.inf,)) < fallback_key_bytes((math.nan,))
    assert fallback_key_bytes(("a", ("b", 2))) < fallback_key_bytes(("a", ("b", 2), None))


KEYS_SCRIPT = """
from topology import Window, Windowed
from topology.serde import fallback_key_bytes
keys = [("a", 1, 2.5, b"x", None, True), (("nested", ("deeper", -3)), "é"), ("s",) * 5,
        Windowed(("t", 7), Window(0, 10)), "plain", 12, -0.5]
print([fallback_key_bytes(k).hex() for k in keys])
"""


def test_key_bytes_do_not_depend_on_the_hash_seed() -> None:
    root = Path(__file__).resolve().parents[2]
    outputs = []
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)}
        done = subprocess.run([sys.executable, "-c", KEYS_SCRIPT], env=env, cwd=root,
                              capture_output=True, text=True, check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith("['07610004")


# -- values without a serde -----------------------------------------------------------------------

@given(json_values.filter(lambda v: isinstance(v, dict | list)))
def test_dict_and_list_values_are_compact_sorted_json(value: Any) -> None:
    assert fallback_value_bytes(value) == Serdes.json().serialize(value)


@pytest.mark.parametrize("value", ["a", 1, 2.5, b"x", True, ("a", 1),
                                   Windowed("k", Window(0, 1))])
def test_other_values_have_their_key_bytes(value: Any) -> None:
    assert fallback_value_bytes(value) == fallback_key_bytes(value)


@pytest.mark.parametrize("value", [{1, 2}, Local(), {"a": {1}}, [object()]])
def test_unsupported_values_ask_for_a_value_serde(value: Any) -> None:
    with pytest.raises(SerdeError, match=r"value serde.*Materialized\(value_serde=...\)"):
        fallback_value_bytes(value)


def test_serializer_of_without_a_serde_gives_the_fallbacks() -> None:
    assert serializer_of(None) is fallback_key_bytes
    assert serializer_of(None, fallback_value_bytes) is fallback_value_bytes
    assert serializer_of(Serdes.json(), fallback_value_bytes) == Serdes.json().serialize


def bounded_suppression(value: Any) -> list[Any]:
    b = StreamsBuilder()
    (b.table("in")
     .suppress(Suppressed.until_time_limit(10, BufferConfig.max_bytes(10_000)))
     .to_stream().to("out"))
    with TopologyTestDriver(b.build()) as driver:
        topic = driver.create_input_topic("in")
        topic.pipe_input(("k", 1), value, 0)
        topic.pipe_input(("k", 2), value, 20)
        return driver.create_output_topic("out").read_values_to_list()


def test_a_max_bytes_suppression_measures_dict_values_without_a_serde() -> None:
    assert bounded_suppression({"n": [1, 2]}) == [{"n": [1, 2]}]


def test_a_max_bytes_suppression_refuses_values_it_cannot_measure() -> None:
    with pytest.raises(SerdeError, match="value serde"):
        bounded_suppression({1, 2})


@pytest.mark.parametrize("name", ["string", "long", "integer", "double", "bytes", "json",
                                  "pickle"])
def test_built_in_serdes_pickle_as_themselves(name: str) -> None:
    """A copy (a Spark executor's) is the same object, so identity fast paths still apply."""
    import pickle

    serde = getattr(Serdes, name)()
    assert pickle.loads(pickle.dumps(serde)) is serde
