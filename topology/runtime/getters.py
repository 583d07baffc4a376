"""Value getters: how a join reads a table's current value for a key (Kafka's ValueGetter).

A join never receives the other side's updates as records; it looks the other side up. Each
table handle knows how to build a getter for its values from the task's stores and
suppressions: a materialized table reads its store, ``filter``/``map_values`` apply their
function to the parent's value, a suppressed table answers with the value it last emitted for
a key still buffered, a table-table join joins its two sides' values.

A getter answers ``(value, timestamp)`` or ``None`` (absent or deleted; a ``None`` value is
never returned as a pair). Versioned getters also answer as of a time (ms).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .task import Task

__all__ = (
    "FilterGetter",
    "GetterFactory",
    "JoinGetter",
    "KeyValueStoreGetter",
    "MapValuesGetter",
    "SuppressGetter",
    "ValueGetter",
    "VersionedStoreGetter",
    "WindowStoreGetter",
)

Found = tuple[Any, int] | None
"""A getter's answer: ``(value, timestamp)`` or ``None``."""

UNKNOWN_TIMESTAMP = -1
"""The timestamp of a value whose time is not known (a suppression's prior value, as Kafka)."""


class ValueGetter(Protocol):
    """Reads one table's values."""

    def get(self, key: Any) -> Found:
        """The latest ``(value, timestamp)`` of ``key``, or ``None``."""

    def get_as_of(self, key: Any, timestamp: int) -> Found:
        """The value valid at ``timestamp`` (versioned tables; others answer the latest)."""


GetterFactory = Callable[["Task"], ValueGetter]
"""Builds a table's getter for one task, once its stores exist."""


class _Latest(abc.ABC):
    """Base of getters without history: ``get_as_of`` answers the latest value."""

    @abc.abstractmethod
    def get(self, key: Any) -> Found:
        """The latest ``(value, timestamp)`` of ``key``, or ``None``."""

    def get_as_of(self, key: Any, timestamp: int) -> Found:
        """The latest value: this table keeps no history."""
        return self.get(key)


class KeyValueStoreGetter(_Latest):
    """Reads a key-value store holding ``(value, timestamp)`` per key."""

    def __init__(self, store: Any) -> None:
        self._get = store.get_with_timestamp

    def get(self, key: Any) -> Found:
        """The stored value and its timestamp."""
        found: Found = self._get(key)
        return found


class WindowStoreGetter(_Latest):
    """Reads a window store by windowed key."""

    def __init__(self, store: Any) -> None:
        self._get = store.get_with_timestamp

    def get(self, key: Any) -> Found:
        """The value of ``key.key`` in the window starting at ``key.window.start``."""
        found: Found = self._get(key.key, key.window.start)
        return found


class VersionedStoreGetter:
    """Reads a versioned store: the latest version, or the one valid at a time."""

    def __init__(self, store: Any) -> None:
        self._get = store.get

    def get(self, key: Any) -> Found:
        """The latest version (``None`` if absent or deleted)."""
        record = self._get(key)
        return None if record is None else (record.value, record.timestamp)

    def get_as_of(self, key: Any, timestamp: int) -> Found:
        """The version valid at ``timestamp`` (``None`` if none is, or it is a delete)."""
        record = self._get(key, timestamp)
        return None if record is None else (record.value, record.timestamp)


class FilterGetter:
    """A filtered table: the parent's value if ``keep(key, value)``, else ``None``."""

    def __init__(self, parent: ValueGetter, keep: Callable[[Any, Any], bool]) -> None:
        self._parent = parent
        self._keep = keep

    def _filtered(self, key: Any, found: Found) -> Found:
        return found if found is not None and self._keep(key, found[0]) else None

    def get(self, key: Any) -> Found:
        """The parent's latest value if it passes the filter."""
        return self._filtered(key, self._parent.get(key))

    def get_as_of(self, key: Any, timestamp: int) -> Found:
        """The parent's value at ``timestamp`` if it passes the filter."""
        return self._filtered(key, self._parent.get_as_of(key, timestamp))


class MapValuesGetter:
    """A mapped table: ``mapper(value)`` of the parent's value."""

    def __init__(self, parent: ValueGetter, mapper: Callable[[Any], Any]) -> None:
        self._parent = parent
        self._mapper = mapper

    def _mapped(self, found: Found) -> Found:
        if found is None:
            return None
        value = self._mapper(found[0])
        return None if value is None else (value, found[1])

    def get(self, key: Any) -> Found:
        """The mapped latest value."""
        return self._mapped(self._parent.get(key))

    def get_as_of(self, key: Any, timestamp: int) -> Found:
        """The mapped value at ``timestamp``."""
        return self._mapped(self._parent.get_as_of(key, timestamp))


class SuppressGetter(_Latest):
    """A suppressed table: what it last emitted.

    For a key still buffered that is the buffered entry's prior value (``None`` if the key was
    never emitted), with an unknown timestamp (-1) as in Kafka; for any other key, the
    parent's value.
    """

    def __init__(self, parent: ValueGetter, prior_value: Callable[[Any], tuple[bool, Any]]
                 ) -> None:
        self._parent = parent
        self._prior = prior_value

    def get(self, key: Any) -> Found:
        """The value last let through for ``key``."""
        buffered, prior = self._prior(key)
        if buffered:
            return None if prior is None else (prior, UNKNOWN_TIMESTAMP)
        return self._parent.get(key)


class JoinGetter(_Latest):
    """A table-table join's current result for a key, from both sides' getters.

    ``kind`` is ``"inner"`` (both sides needed), ``"left"`` (the left side needed) or
    ``"outer"`` (either side). The timestamp is the larger of the sides present.
    """

    def __init__(self, left: ValueGetter, right: ValueGetter,
                 joiner: Callable[[Any, Any], Any], kind: str) -> None:
        self._left = left
        self._right = right
        self._joiner = joiner
        self._kind = kind

    def get(self, key: Any) -> Found:
        """``joiner(left, right)`` of the sides' values, when the join kind has a result."""
        left = self._left.get(key)
        if left is None and self._kind != "outer":
            return None
        right = self._right.get(key)
        if right is None and (self._kind == "inner" or left is None):
            return None
        if left is None:
            assert right is not None
            value, timestamp = self._joiner(None, right[0]), right[1]
        elif right is None:
            value, timestamp = self._joiner(left[0], None), left[1]
        else:
            value, timestamp = self._joiner(left[0], right[0]), max(left[1], right[1])
        return None if value is None else (value, timestamp)
