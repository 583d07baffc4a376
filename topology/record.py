"""Records as they flow through a topology.

Internally a record is three things passed along together: its key, its value and its
:class:`~suppress.entry.RecordContext` (timestamp in ms, offset, topic, partition, headers).
Table nodes carry a :class:`Change` as the value. User processors see a :class:`Record`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple, final

from suppress.entry import Headers, RecordContext

__all__ = ("Change", "Headers", "Record", "RecordContext", "normalize_headers")


class Change(NamedTuple):
    """A table update: the ``new`` value and the ``old`` one (``None`` if unknown or absent).

    ``new is None`` is a delete (tombstone).
    """

    new: Any
    old: Any


@final
@dataclass(frozen=True, slots=True)
class Record:
    """A record as user processors see it (Kafka's ``api.Record``).

    :raises TypeError: for a timestamp that is not an int, or headers that are not
        ``(str, bytes | None)`` pairs.
    :raises ValueError: for a negative timestamp (Kafka: "Timestamp may not be negative").
    """

    key: Any
    value: Any
    timestamp: int
    headers: Headers = field(default=())

    def __post_init__(self) -> None:
        ts = self.timestamp
        if type(ts) is not int:
            raise TypeError(f"Record timestamp must be an int of ms, got "
                            f"{type(ts).__name__}: {ts!r}")
        if not 0 <= ts <= 2**63 - 1:
            raise ValueError(f"Record timestamp must be in [0, 2**63 - 1] ms (it may not be "
                             f"negative), got {ts}")
        if type(self.headers) is not tuple or any(
                type(h) is not tuple or len(h) != 2 for h in self.headers):
            object.__setattr__(self, "headers", normalize_headers(self.headers))

    def with_value(self, value: Any) -> Record:
        """Same record with another value."""
        return Record(self.key, value, self.timestamp, self.headers)

    def with_key(self, key: Any) -> Record:
        """Same record with another key."""
        return Record(key, self.value, self.timestamp, self.headers)

    def with_timestamp(self, timestamp: int) -> Record:
        """Same record with another timestamp (ms)."""
        return Record(self.key, self.value, timestamp, self.headers)


def normalize_headers(headers: Any) -> Headers:
    """Validate headers as a sequence of ``(str, bytes | None)`` pairs; return them as a tuple.

    :raises TypeError: naming the offending header.
    """
    if not headers:
        return ()
    out = []
    for item in headers:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise TypeError(f"a header must be a (str, bytes) pair, got {item!r}")
        key, value = item
        if not isinstance(key, str):
            raise TypeError(f"header key must be str, got {type(key).__name__}: {key!r}")
        if value is not None and not isinstance(value, bytes):
            if isinstance(value, bytearray | memoryview):
                value = bytes(value)
            else:
                raise TypeError(
                    f"header {key!r} value must be bytes or None, got {type(value).__name__}"
                )
        out.append((key, value))
    return tuple(out)
