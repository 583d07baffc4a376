"""Options of DSL calls: ``Consumed``, ``Produced``, ``Grouped``, ``Materialized``, ``Named``."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from suppress.time import to_millis

from .errors import TopologyError
from .serde import Serde

if TYPE_CHECKING:  # PEP 696 defaults: a bare ``Consumed`` (or ``Consumed()``) is ``[Any, Any]``
    from typing_extensions import TypeVar

    K = TypeVar("K", default=Any)
    V = TypeVar("V", default=Any)
else:  # typing.TypeVar takes ``default`` from Python 3.13 on only
    from typing import TypeVar

    K = TypeVar("K")
    V = TypeVar("V")

__all__ = ("Consumed", "Grouped", "Materialized", "Named", "Produced", "checked_materialized",
           "name_of")


def _check_serde(serde: Any, what: str) -> None:
    if serde is not None and not isinstance(serde, Serde):
        raise TypeError(f"{what} must be a Serde (see topology.Serdes), got {type(serde).__name__}")


_MAX_NAME_LENGTH = 249
"""Kafka's ``Named.MAX_NAME_LENGTH`` (a topic name's limit)."""


def _is_legal_char(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c in "._-")


def validate_name(name: str) -> None:
    """Check ``name`` as Kafka's ``Named.validate`` does (the rules of topic names).

    :raises TopologyError: for an empty name, ``.`` or ``..``, more than 249 characters, or
        a character other than ASCII letters, digits, ``.``, ``_`` and ``-``.
    """
    if not name:
        raise TopologyError("Name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopologyError('Name cannot be "." or ".."')
    if len(name) > _MAX_NAME_LENGTH:
        raise TopologyError(f"Name is illegal, it can't be longer than {_MAX_NAME_LENGTH} "
                            f"characters, name: {name}")
    if not all(_is_legal_char(c) for c in name):
        raise TopologyError(f'Name "{name}" is illegal, it contains a character other than '
                            "ASCII alphanumerics, '.', '_' and '-'")


@dataclass(frozen=True)
class Named:
    """The name of a DSL operation's processor: Kafka's ``Named``.

    Build one with :meth:`as_` (``as`` is a Python keyword) and pass it as ``named=`` to a DSL
    method; the processor is then called ``name`` instead of ``<PREFIX>-<n>``, and operations
    that add several processors derive their names from it as Kafka does (a table-table join:
    ``name`` for the merge, ``name-join-this`` and ``name-join-other``; a table aggregation:
    ``name-sink`` and ``name-source`` for its repartition topic). Where Kafka still spends a
    number on the name it did not generate, so does this library: the other nodes keep the
    numbers they would have had without the name.

    The name must be a legal Kafka topic name: 1 to 249 ASCII letters, digits, ``.``, ``_``
    or ``-``, and not ``.`` or ``..``.

    :raises TypeError: for a name that is not a ``str``.
    :raises TopologyError: for an illegal name (Kafka's ``TopologyException`` message).
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"Named needs a str name, got {type(self.name).__name__}")
        validate_name(self.name)

    @staticmethod
    def as_(name: str) -> Named:
        """A ``Named`` giving the processor the name ``name`` (Kafka's ``Named.as``).

        :raises TypeError: for a name that is not a ``str``.
        :raises TopologyError: for an illegal name.
        """
        return Named(name)

    def with_name(self, name: str) -> Named:
        """A ``Named`` with ``name`` instead (Kafka's ``withName``)."""
        return Named(name)


def name_of(named: Named | None) -> str | None:
    """The name ``named`` gives, or ``None`` without one.

    :raises TypeError: for anything but a ``Named`` or ``None``.
    """
    if named is None:
        return None
    if not isinstance(named, Named):
        raise TypeError(f"named must be a Named (Named.as_(name)), got {type(named).__name__}")
    return named.name


@dataclass(frozen=True)
class Consumed(Generic[K, V]):
    """Serdes for reading a source topic. ``None`` keeps the records as piped.

    Generic in the key and value types of its serdes: ``Consumed(Serdes.string(), Serdes.long())``
    is a ``Consumed[str, int]``; a missing serde leaves its type ``Any``.
    """

    key_serde: Serde[K] | None = None
    value_serde: Serde[V] | None = None

    def __post_init__(self) -> None:
        _check_serde(self.key_serde, "Consumed key_serde")
        _check_serde(self.value_serde, "Consumed value_serde")


@dataclass(frozen=True)
class Produced(Generic[K, V]):
    """Serdes for writing a sink topic. ``None`` writes the objects unchanged.

    Generic in the key and value types of its serdes: ``Produced(Serdes.string(), Serdes.long())``
    is a ``Produced[str, int]``; a missing serde leaves its type ``Any``.
    """

    key_serde: Serde[K] | None = None
    value_serde: Serde[V] | None = None

    def __post_init__(self) -> None:
        _check_serde(self.key_serde, "Produced key_serde")
        _check_serde(self.value_serde, "Produced value_serde")


@dataclass(frozen=True)
class Grouped(Generic[K, V]):
    """Serdes (and optional name) for a grouping and its repartition topic.

    Generic in the key and value types of its serdes, as :class:`Consumed`.
    """

    key_serde: Serde[K] | None = None
    value_serde: Serde[V] | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        _check_serde(self.key_serde, "Grouped key_serde")
        _check_serde(self.value_serde, "Grouped value_serde")


@dataclass(frozen=True)
class Materialized:
    """How a table or aggregate is stored: store name, serdes, backend and versioning.

    ``persistence`` picks the backend: ``None`` follows the runtime (memory in the test
    driver without a ``state_dir``, RocksDB with one and in the Spark runners), ``True``
    forces RocksDB, ``False`` memory. Build one with the constructor (a plain store),
    :meth:`in_memory`, :meth:`persistent` or :meth:`versioned`.

    :raises TypeError: for an empty or non-str name, or a serde that is not a ``Serde``.
    :raises ValueError: for a negative history retention or a non-positive segment interval.
    """

    name: str | None = None
    key_serde: Serde[Any] | None = None
    value_serde: Serde[Any] | None = None
    persistence: bool | None = None
    history_retention_ms: int | None = None
    """Set for a versioned store: how much history (ms) it keeps; also its grace period."""
    segment_interval_ms: int | None = None
    """A versioned store's segment interval (ms); ``None`` derives it from the retention."""

    def __post_init__(self) -> None:
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise TypeError(f"store name must be a non-empty str, got {self.name!r}")
        _check_serde(self.key_serde, "Materialized key_serde")
        _check_serde(self.value_serde, "Materialized value_serde")
        if self.persistence is not None and not isinstance(self.persistence, bool):
            raise TypeError(f"persistent must be True, False or None, got {self.persistence!r}")
        if self.history_retention_ms is not None:
            object.__setattr__(self, "history_retention_ms",
                               to_millis(self.history_retention_ms, "history_retention"))
        if self.segment_interval_ms is not None:
            if self.history_retention_ms is None:
                raise ValueError("segment_interval is only for versioned stores "
                                 "(Materialized.versioned)")
            interval = to_millis(self.segment_interval_ms, "segment_interval")
            if interval <= 0:
                raise ValueError(f"segment_interval must be positive, got {interval} ms")
            object.__setattr__(self, "segment_interval_ms", interval)

    @property
    def is_versioned(self) -> bool:
        """Whether this asks for a versioned store."""
        return self.history_retention_ms is not None

    @staticmethod
    def in_memory(name: str) -> Materialized:
        """An in-memory store called ``name``, whatever the runtime's default."""
        return Materialized(name=name, persistence=False)

    @staticmethod
    def persistent(name: str) -> Materialized:
        """A RocksDB store called ``name``, whatever the runtime's default."""
        return Materialized(name=name, persistence=True)

    @staticmethod
    def versioned(name: str, history_retention: int | _dt.timedelta,
                  segment_interval: int | _dt.timedelta | None = None,
                  persistent: bool | None = None) -> Materialized:
        """A versioned key-value store (KIP-889) called ``name``, for ``StreamsBuilder.table``.

        It keeps every version of a key for ``history_retention`` (ms or ``timedelta``, also
        its grace period: older writes are rejected and counted); a stream joined to the table
        reads it as of each record's timestamp. ``segment_interval`` (ms) groups versions for
        expiry (default: derived from the retention). ``persistent`` as for every store.

        :raises TypeError: for an empty name or a missing retention.
        :raises ValueError: for a negative retention or a non-positive segment interval.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"a versioned store needs a non-empty str name, got {name!r}")
        if history_retention is None:
            raise TypeError("a versioned store needs a history_retention (ms or timedelta)")
        return Materialized(name=name, persistence=persistent,
                            history_retention_ms=history_retention,  # type: ignore[arg-type]
                            segment_interval_ms=segment_interval)  # type: ignore[arg-type]


def checked_materialized(materialized: Materialized | None) -> Materialized:
    """``materialized``, or the default ``Materialized()`` for ``None``.

    :raises TypeError: for anything but a ``Materialized``.
    """
    if materialized is None:
        return Materialized()
    if not isinstance(materialized, Materialized):
        raise TypeError(f"materialized must be a Materialized, got "
                        f"{type(materialized).__name__}")
    return materialized
