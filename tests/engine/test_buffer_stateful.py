"""The suppression buffers against a naive reference model (hypothesis state machines)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from hypothesis_profiles import examples

from suppress.buffer import TimeOrderedBuffer
from suppress.entry import RecordContext, context_size, entry_size
from suppress.final import BucketKeys, FinalResultsBuffer
from suppress.final_heap import FinalResultsHeap, PartKeys

KEYS = st.binary(min_size=0, max_size=3)
VALUES = st.none() | st.binary(max_size=4)


def _key_time(key: bytes) -> int:
    """A final-results key's buffer time: a function of the key, as a window's end is."""
    return sum(key) % 7 * 3


class BufferMachine(RuleBasedStateMachine):
    """Model: a dict key -> [time, new, old, prior, ctx]; order = sorted (time, key).

    Two buffers: ``buf`` (bytes tracked) and ``lazy`` (bytes computed on demand); both must
    evict exactly what the model says. Here both are time-limit buffers (one heap), and a
    key's time is drawn: a key already buffered keeps its first time.
    """

    time_of = None

    def key_of(self, key: bytes):
        """The key object buffered for the model's key (its bytes)."""
        return key

    def buffers(self) -> tuple:
        return (TimeOrderedBuffer(bytes, bytes, track_bytes=True),
                TimeOrderedBuffer(bytes, bytes, track_bytes=False))

    def __init__(self) -> None:
        super().__init__()
        self.buf, self.lazy = self.buffers()
        self.model: dict[bytes, list] = {}

    @rule(time=st.integers(0, 20), key=KEYS, new=VALUES, old=VALUES, ts=st.integers(0, 50),
          topic=st.sampled_from(["", "t", "tópic"]))
    def put(self, time: int, key: bytes, new, old, ts: int, topic: str) -> None:
        ctx = RecordContext(ts, 0, topic, 0, ())
        if self.time_of is not None:
            time = self.time_of(key)
        self.buf.put(time, self.key_of(key), new, old, ctx)
        self.lazy.put(time, self.key_of(key), new, old, ctx)
        if key in self.model:
            entry = self.model[key]
            entry[1], entry[2], entry[4] = new, old, ctx
        else:
            self.model[key] = [time, new, old, old, ctx]

    def _order(self) -> list[bytes]:
        return sorted(self.model, key=lambda k: (self.model[k][0], k))

    def evict_lazy_due(self, expiry: int, got: list) -> None:
        self.lazy.evict_due(expiry.__ge__, lambda e: got.append((e.key_bytes, e.new, e.old)))

    @rule(expiry=st.integers(-1, 25))
    def evict_expired(self, expiry: int) -> None:
        got, got_lazy = [], []
        self.buf.evict_due(expiry.__ge__, lambda e: got.append((e.key_bytes, e.new, e.old)))
        self.evict_lazy_due(expiry, got_lazy)
        want = [k for k in self._order() if self.model[k][0] <= expiry]
        assert got == got_lazy == [(k, self.model[k][1], self.model[k][2]) for k in want]
        for k in want:
            del self.model[k]

    @rule(keep=st.integers(0, 5))
    def evict_to_count(self, keep: int) -> None:
        got, got_lazy = [], []
        self.buf.evict_while(lambda: self.buf.num_records > keep,
                             lambda e: got.append(e.key_bytes))
        self.lazy.evict_while(lambda: self.lazy.num_records > keep,
                              lambda e: got_lazy.append(e.key_bytes))
        want = self._order()[: max(0, len(self.model) - keep)]
        assert got == got_lazy == want
        for k in want:
            del self.model[k]

    @rule(records=st.integers(0, 5) | st.none(), size=st.integers(0, 200) | st.none())
    def evict_over(self, records: int | None, size: int | None) -> None:
        order = self._order()
        total = sum(entry_size(k, e[3], e[2], e[1], context_size(e[4]))
                    for k, e in self.model.items())
        want = []
        while order and ((records is not None and len(order) > records)
                         or (size is not None and total > size)):
            k = order.pop(0)
            e = self.model[k]
            total -= entry_size(k, e[3], e[2], e[1], context_size(e[4]))
            want.append(k)
        got: list[bytes] = []
        self.buf.evict_over(records, size, lambda e: got.append(e.key_bytes))
        assert got == want
        # the lazy buffer cannot enforce bytes; the same keys go by count
        got_lazy: list[bytes] = []
        self.lazy.evict_over(len(self.model) - len(want), None,
                             lambda e: got_lazy.append(e.key_bytes))
        assert got_lazy == want
        for k in want:
            del self.model[k]

    @rule(key=KEYS)
    def prior(self, key: bytes) -> None:
        defined, value = self.buf.prior_value(self.key_of(key))
        assert defined == (key in self.model)
        assert self.lazy.prior_value(self.key_of(key)) == (defined, value)
        if defined:
            assert value == self.model[key][3]

    @invariant()
    def consistent(self) -> None:
        self.buf._check()
        self.lazy._check()
        assert self.lazy.size_bytes == self.buf.size_bytes
        assert self.buf.num_records == len(self.model)
        assert self.buf.min_time == min((e[0] for e in self.model.values()), default=2**63 - 1)
        assert self.buf.size_bytes == sum(
            entry_size(k, e[3], e[2], e[1], context_size(e[4])) for k, e in self.model.items())
        assert [e.key_bytes for e in self.buf] == self._order()
        assert [e.key_bytes for e in self.lazy] == self._order()
        assert self.lazy.min_time == self.buf.min_time


class FinalBufferMachine(BufferMachine):
    """The final-results buffers (a bucket per time), a key's time following from the key.

    ``lazy`` finds keys through their time (``time_of``) and emits closed windows through
    ``emit_closed``; ``buf`` searches the times and evicts one entry at a time.
    """

    time_of = staticmethod(_key_time)

    def buffers(self) -> tuple:
        return (FinalResultsBuffer(bytes, bytes, track_bytes=True),
                FinalResultsBuffer(bytes, bytes, time_of=_key_time))

    def evict_lazy_due(self, expiry: int, got: list) -> None:
        """Closed windows leave through ``emit_closed`` (keys are their bytes here)."""
        self.lazy.emit_closed(expiry, lambda key, new, old, ctx: got.append((key, new, old)))


class _Pairs:
    """:class:`~suppress.final.WindowKeys` of keys ``(part, window)``, the window being the
    buffer time; a key's bytes are its part's."""

    def split(self, key: tuple[bytes, int]) -> tuple[int, bytes]:
        return key[1], key[0]

    def bucket_keys(self, window: int) -> BucketKeys:
        return BucketKeys(lambda part: (part, window), bytes, bytes)


def _part_bytes(key: tuple[bytes, int]) -> bytes:
    return key[0]


def _window(key: tuple[bytes, int]) -> int:
    return key[1]


class WindowBufferMachine(FinalBufferMachine):
    """The final-results buffers with keys split into window and part (``WindowKeys``)."""

    def key_of(self, key: bytes) -> tuple[bytes, int]:
        return key, _key_time(key)

    def buffers(self) -> tuple:
        return (FinalResultsBuffer(_part_bytes, bytes, track_bytes=True, window_keys=_Pairs()),
                FinalResultsBuffer(_part_bytes, bytes, window_keys=_Pairs(), time_of=_window))

    def evict_lazy_due(self, expiry: int, got: list) -> None:
        self.lazy.emit_closed(expiry, lambda key, new, old, ctx: got.append((key[0], new, old)))


class HeapBufferMachine(FinalBufferMachine):
    """The final-results heap (windows with ends of their own), keys kept whole."""

    def buffers(self) -> tuple:
        return (FinalResultsHeap(bytes, bytes, track_bytes=True),
                FinalResultsHeap(bytes, bytes, time_of=_key_time))


_PAIR_PARTS = PartKeys(lambda key: key, BucketKeys(lambda part: part, _part_bytes, _part_bytes))
"""Keys ``(part, window)`` kept as their own parts, identified and ordered by the part's
bytes (a part names its window: equal bytes mean an equal time here)."""


class PartHeapBufferMachine(WindowBufferMachine):
    """The final-results heap with keys given as parts (``PartKeys``)."""

    def buffers(self) -> tuple:
        return (FinalResultsHeap(_part_bytes, bytes, track_bytes=True, part_keys=_PAIR_PARTS),
                FinalResultsHeap(_part_bytes, bytes, part_keys=_PAIR_PARTS, time_of=_window))


TestBufferMachine = BufferMachine.TestCase
TestFinalBufferMachine = FinalBufferMachine.TestCase
TestWindowBufferMachine = WindowBufferMachine.TestCase
TestHeapBufferMachine = HeapBufferMachine.TestCase
TestPartHeapBufferMachine = PartHeapBufferMachine.TestCase
for _machine in (TestBufferMachine, TestFinalBufferMachine, TestWindowBufferMachine,
                 TestHeapBufferMachine, TestPartHeapBufferMachine):
    _machine.settings = settings(max_examples=examples(150), stateful_step_count=40,
                                 deadline=None)
del _machine  # a module-level TestCase name would be collected once more


def _heap(key_serializer, value_serializer, track_bytes=False):
    return TimeOrderedBuffer(key_serializer, value_serializer, track_bytes=track_bytes)


def _buckets(key_serializer, value_serializer, track_bytes=False):
    return FinalResultsBuffer(key_serializer, value_serializer, track_bytes=track_bytes)


def _final_heap(key_serializer, value_serializer, track_bytes=False):
    return FinalResultsHeap(key_serializer, value_serializer, track_bytes=track_bytes)


BUFFERS = pytest.mark.parametrize("make", [_heap, _buckets, _final_heap],
                                  ids=["heap", "buckets", "final heap"])
FINAL = pytest.mark.parametrize("final", [FinalResultsBuffer, FinalResultsHeap],
                                ids=["buckets", "final heap"])


@BUFFERS
def test_keys_with_equal_bytes_are_one_key(make) -> None:
    """A lossy key serializer: keys with equal bytes are one key, as on disk and in Kafka;
    the entry keeps the key that created it and takes the latest change."""
    buf = make(lambda key: b"same", bytes)
    for key, value in (("b", b"1"), ("a", b"2"), ("c", b"3")):
        buf.put(5, key, value, None, RecordContext(5))
    buf._check()
    assert buf.num_records == 1 and "a" in buf
    got: list[tuple[str, bytes]] = []
    buf.evict_due(lambda t: t <= 5, lambda e: got.append((e.key, e.new)))
    assert got == [("b", b"3")]
    buf._check()


@BUFFERS
def test_an_entry_stays_buffered_when_its_eviction_callback_raises(make) -> None:
    """Every eviction loop hands the head over before removing it (records limit included)."""
    for evict in (lambda b, cb: b.evict_over(1, None, cb),
                  lambda b, cb: b.evict_over(None, 0, cb),
                  lambda b, cb: b.evict_due(lambda t: t <= 10, cb),
                  lambda b, cb: b.evict_while(lambda: True, cb)):
        buf = make(bytes, bytes, track_bytes=True)
        buf.put(1, b"a", b"1", None, RecordContext(1))
        buf.put(2, b"b", b"2", None, RecordContext(2))

        def fail(entry) -> None:
            raise RuntimeError("downstream failed")

        with pytest.raises(RuntimeError):
            evict(buf, fail)
        buf._check()
        assert [e.key for e in buf] == [b"a", b"b"]


@BUFFERS
@pytest.mark.parametrize("bad", [None, "text", 7])
def test_a_key_serializer_must_give_bytes(make, bad) -> None:
    buf = make(lambda key: bad, bytes)
    with pytest.raises(TypeError, match="key serializer gave"):
        buf.put(1, "k", b"v", None, RecordContext(1))
    buf._check()
    assert buf.num_records == 0


@BUFFERS
def test_bytes_like_key_serializations_are_taken_as_bytes(make) -> None:
    buf = make(lambda key: bytearray(key, "ascii"), bytes)
    for key in ("b", "a"):
        buf.put(1, key, b"v", None, RecordContext(1))
    buf._check()
    assert [e.key_bytes for e in buf] == [b"a", b"b"]


@FINAL
def test_closed_windows_stay_buffered_from_the_one_whose_emission_raised(final) -> None:
    """``emit_closed`` removes each entry after it went out: a failure keeps the rest."""
    buf = final(bytes, bytes, track_bytes=True)
    for key in (b"c", b"b", b"a"):  # one window: they leave by key bytes
        buf.put(5, key, b"1", None, RecordContext(1))
    emitted: list[bytes] = []

    def emit(key, new, old, ctx) -> None:
        if key == b"b":
            raise RuntimeError("downstream failed")
        emitted.append(key)

    with pytest.raises(RuntimeError):
        buf.emit_closed(5, emit)
    buf._check()
    assert emitted == [b"a"] and [e.key for e in buf] == [b"b", b"c"]


@FINAL
def test_the_final_buffer_notes_every_key_written_or_removed(final) -> None:
    buf = final(bytes, bytes)
    buf.changed = {}
    buf.put(5, b"a", b"1", None, RecordContext(1))
    buf.put(9, b"b", b"1", None, RecordContext(2))
    buf.put(5, b"a", b"2", b"1", RecordContext(3))
    assert sorted(buf.changed.values()) == [b"a", b"b"]
    buf.changed.clear()
    buf.emit_closed(5, lambda *change: None)
    assert list(buf.changed.values()) == [b"a"] and buf.get(b"a") is None
    assert buf.get(b"b").new == b"1"
