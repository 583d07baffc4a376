"""``KTable``: a changelog-table handle (latest value per key) and ``suppress``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from suppress.config import Suppressed

from .errors import TopologyError
from .options import Grouped
from .runtime.graph import GraphNode
from .runtime.processors import table as tp
from .runtime.processors.suppress import SuppressNodeProcessor
from .serde import Serde, fallback_value_bytes, serializer_of, windowed_serializer

if TYPE_CHECKING:
    from .builder import StreamsBuilder
    from .grouped import KGroupedTable
    from .stream import KStream

__all__ = ("KTable", "OldValues", "WindowInfo")


class OldValues:
    """Whether a table node must compute old values; enabling it enables its upstream too.

    Called with no arguments by the processors (once, at task start) to read the flag.
    """

    __slots__ = ("enabled", "_upstream")

    def __init__(self, upstream: OldValues | None) -> None:
        self.enabled = False
        self._upstream = upstream

    def enable(self) -> None:
        """Ask this node (and the nodes it reads from) to send old values."""
        self.enabled = True
        if self._upstream is not None:
            self._upstream.enable()

    def __call__(self) -> bool:
        """Whether old values are needed."""
        return self.enabled


@dataclass(frozen=True)
class WindowInfo:
    """What a windowed table knows of its windows: close delay and buffer-time rule.

    ``delay_ms`` is D of the close rule (grace; sessions: grace + gap); ``buffer_time`` maps a
    windowed key to its exclusive end.
    """

    delay_ms: int
    buffer_time: Callable[[Any], int]
    session: bool = False


class KTable:
    """A table: for each key, its latest value. Updates flow as ``Change(new, old)``."""

    def __init__(self, builder: StreamsBuilder, node: GraphNode, key_serde: Serde[Any] | None,
                 value_serde: Serde[Any] | None, old_values: OldValues,
                 window: WindowInfo | None = None, store_name: str | None = None) -> None:
        self._builder = builder
        self._node = node
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._old_values = old_values
        self._window = window
        self.store_name = store_name
        """Name of the store holding this table, or ``None`` if it is not materialized."""

    def _derive(self, prefix: str, factory: Callable[[], Any], old: OldValues,
                value_serde: Serde[Any] | None, name: str | None = None,
                stores: list[str] | None = None) -> KTable:
        node = self._builder.add_node(prefix, factory, [self._node], name=name, stores=stores)
        return KTable(self._builder, node, self._key_serde, value_serde, old, self._window)

    def filter(self, predicate: Callable[[Any, Any], bool]) -> KTable:
        """Keep rows for which ``predicate(key, value)`` holds; others become deletes."""
        if not callable(predicate):
            raise TypeError("filter predicate must be callable")
        old = OldValues(self._old_values)
        return self._derive("KTABLE-FILTER",
                            lambda: tp.TableFilterProcessor(predicate, False, old), old,
                            self._value_serde)

    def filter_not(self, predicate: Callable[[Any, Any], bool]) -> KTable:
        """Drop rows for which ``predicate(key, value)`` holds (they become deletes)."""
        if not callable(predicate):
            raise TypeError("filter_not predicate must be callable")
        old = OldValues(self._old_values)
        return self._derive("KTABLE-FILTER",
                            lambda: tp.TableFilterProcessor(predicate, True, old), old,
                            self._value_serde)

    def map_values(self, mapper: Callable[[Any], Any]) -> KTable:
        """Map each value with ``mapper(value)``; deletes stay deletes."""
        if not callable(mapper):
            raise TypeError("map_values mapper must be callable")
        old = OldValues(self._old_values)
        return self._derive("KTABLE-MAPVALUES", lambda: tp.TableMapValuesProcessor(mapper, old),
                            old, None)

    def to_stream(self) -> KStream:
        """The stream of this table's updates: each change's new value (``None`` = delete)."""
        from .stream import KStream

        node = self._builder.add_node("KTABLE-TOSTREAM", tp.ToStreamProcessor, [self._node])
        return KStream(self._builder, node, self._key_serde, self._value_serde)

    def suppress(self, suppressed: Suppressed) -> KTable:
        """Hold back updates as ``suppressed`` says (final results or a time limit).

        ``Suppressed.until_window_closes`` needs a windowed table: its delay is the grace
        period of the windowed aggregation upstream.

        Names as Kafka: the node is ``suppressed.name`` or ``KTABLE-SUPPRESS-<n>``, its buffer
        store ``<name>-store`` or ``KTABLE-SUPPRESS-STATE-STORE-<n+1>`` (read it with
        ``driver.get_state_store``). The buffer is logged, so the driver lists its changelog
        topic once a record reached it.

        :raises TopologyError: for final results on a table that is not windowed, or a store
            name already taken.
        :raises TypeError: if ``suppressed`` is not a :class:`~suppress.Suppressed`.
        """
        if not isinstance(suppressed, Suppressed):
            raise TypeError(f"suppress() needs a Suppressed, got {type(suppressed).__name__}")
        name = suppressed.name or self._builder.next_name("KTABLE-SUPPRESS")
        window = self._window
        if suppressed.final_results:
            if window is None:
                raise TopologyError(
                    "Window close time is only defined for windowed computations. Got "
                    f"[{self._node.name}], which is not downstream of a windowed aggregation"
                )
            delay = window.delay_ms
            buffer_time: Callable[[Any], int] | None = window.buffer_time
        else:
            assert suppressed.time_limit_ms is not None
            delay = suppressed.time_limit_ms
            buffer_time = None
        if window is None:
            key_ser = serializer_of(self._key_serde)
        else:
            key_ser = windowed_serializer(self._key_serde, window.session)
        value_ser = serializer_of(self._value_serde, fallback_value_bytes)
        if suppressed.name is None:
            store = self._builder.next_name("KTABLE-SUPPRESS-STATE-STORE")
        else:
            store = f"{suppressed.name}-store"
        self._builder.reserve_store_name(store)
        self._old_values.enable()
        return self._derive(
            "KTABLE-SUPPRESS",
            lambda: SuppressNodeProcessor(suppressed, delay, key_ser, value_ser, buffer_time,
                                          store),
            OldValues(self._old_values), self._value_serde, name=name, stores=[store],
        )

    def group_by(self, selector: Callable[[Any, Any], tuple[Any, Any]],
                 grouped: Grouped | None = None) -> KGroupedTable:
        """Re-group rows by ``selector(key, value) -> (new_key, new_value)``.

        Each update subtracts the old row's pair and adds the new one downstream (Kafka's
        ``KTableRepartitionMap``): the selector is applied to the new value and to the old
        one (never to ``None``); when both pairs have the same key, one change carries both;
        otherwise the old pair's subtraction goes first, then the new pair's addition. A pair
        whose key or value is ``None``, or a selector returning ``None`` instead of a pair,
        is skipped: an old pair like that was never added, so nothing is subtracted; a new
        pair like that is counted in ``dropped-records-total`` (reason ``null-key`` or
        ``null-value``), where Kafka skips it without counting.

        The selecting node is called ``grouped.name`` when given (a number is spent anyway),
        else ``KTABLE-SELECT-<n>``.
        """
        if not callable(selector):
            raise TypeError("group_by selector must be callable")
        from .grouped import KGroupedTable

        grouped = grouped or Grouped()
        self._old_values.enable()
        name = self._builder.given_or_next("KTABLE-SELECT", grouped.name)
        node = self._builder.add_node("KTABLE-SELECT",
                                      lambda: tp.TableRepartitionMapProcessor(selector),
                                      [self._node], name=name)
        return KGroupedTable(self._builder, node, grouped.key_serde, grouped.value_serde,
                             grouped.name)
