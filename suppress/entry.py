"""Values held by a suppression buffer: record context, buffered entries, Kafka's size formula."""

from __future__ import annotations

from typing import Any, Final, NamedTuple, final

__all__ = ("BufferedEntry", "Headers", "RecordContext", "change_size", "context_size",
           "entry_size")

Headers = tuple[tuple[str, bytes | None], ...]


def _chars(text: str) -> int:
    """Length of ``text`` in UTF-16 code units, as Java's ``String.toCharArray().length``."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2


class RecordContext(NamedTuple):
    """Where a record came from: timestamp (ms), offset, topic, partition and headers.

    Immutable; shared by every record derived from one input record.
    """

    timestamp: int
    offset: int = -1
    topic: str = ""
    partition: int = 0
    headers: Headers = ()

    def with_timestamp(self, timestamp: int) -> RecordContext:
        """Same context with another timestamp (ms)."""
        if timestamp == self[0]:
            return self
        # the fields of a valid context with a new timestamp: built without _replace's parsing
        context: RecordContext = _new_tuple(RecordContext, (timestamp, *self[1:]))
        return context


_new_tuple = tuple.__new__

_CONTEXT_FIXED: Final = 8 + 8 + 4  # timestamp, offset, partition


def context_size(ctx: RecordContext) -> int:
    """Kafka's resident-size estimate of a record context, in bytes.

    8 (timestamp) + 8 (offset) + topic chars + 4 (partition) + per header: key chars + value
    length.

    >>> context_size(RecordContext(0, 0, "topic"))
    25
    """
    size = _CONTEXT_FIXED + _chars(ctx.topic)
    for key, value in ctx.headers:
        size += _chars(key) + (0 if value is None else len(value))
    return size


def entry_size(
    key_bytes: bytes,
    prior: bytes | None,
    old: bytes | None,
    new: bytes | None,
    context_bytes: int,
) -> int:
    """Kafka's (2.4+) size of one buffered entry, in bytes: the one place the formula lives.

    8 (buffer time) + key + prior + old (only when not byte-equal to prior) + new + the
    context's size (:func:`context_size`). An update of a buffered entry keeps its prior, so
    a caller may keep ``entry_size(key_bytes, prior, None, None, 0)`` and add
    :func:`change_size` and the context's size per update.

    >>> entry_size(b"asdf", None, None, b"23roni", context_size(RecordContext(0, 0, "topic")))
    43
    """
    size = 8 + len(key_bytes) + context_bytes + change_size(prior, old, new)
    if prior is not None:
        size += len(prior)
    return size


def change_size(prior: bytes | None, old: bytes | None, new: bytes | None) -> int:
    """The part of :func:`entry_size` that an update changes: old (unless equal to prior) + new.

    >>> change_size(b"1", b"1", b"22"), change_size(b"1", b"0", None)
    (2, 1)
    """
    size = 0
    if old is not None and old != prior:
        size += len(old)
    if new is not None:
        size += len(new)
    return size


@final
class BufferedEntry:
    """One buffered key: its buffer time, key bytes, latest change, prior value and context.

    ``new``/``old`` are the latest ``Change``; ``prior`` is the old value of the first put
    since the key was last emitted, i.e. what downstream last saw. ``size`` is Kafka's size
    estimate when the buffer tracks bytes, else 0.
    """

    __slots__ = ("time", "key_bytes", "key", "new", "old", "prior", "context", "size")

    def __init__(self, time: int, key_bytes: bytes, key: Any, new: Any, old: Any, prior: Any,
                 context: RecordContext) -> None:
        self.time = time
        self.key_bytes = key_bytes
        self.key = key
        self.new = new
        self.old = old
        self.prior = prior
        self.context = context
        self.size = 0

    def __repr__(self) -> str:
        return (
            f"BufferedEntry(time={self.time}, key={self.key!r}, new={self.new!r}, "
            f"old={self.old!r}, prior={self.prior!r}, size={self.size})"
        )
