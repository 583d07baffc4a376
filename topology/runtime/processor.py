"""The node protocol of the runtime: how a built-in processor receives and forwards records.

A node receives records through its *entry points* and passes results on through the entry
points of its children, which the task binds with :meth:`InternalProcessor.connect` once
every node is initialised. There are two kinds of entry:

- a record entry ``(key, value, context)``, for streams;
- a change entry ``(key, new, old, context)``, for table updates: a table update travels as
  its two values, without a :class:`~topology.record.Change` object between built-in nodes;
- a stale entry, shaped like the change entry, for an update of a versioned table that is
  not the key's latest version (an out-of-order update within the history retention, Kafka's
  ``isLatest=false``). Nodes that pass updates on keep the flag; joins and re-groupings drop
  such updates (counted); every other node treats them as ordinary updates.

A node names its entries with :meth:`InternalProcessor.record_entry` and
:meth:`InternalProcessor.change_entry` (by default its ``process`` and ``process_change``
methods); a sink without serdes, for instance, names its producer, so records skip a call.
Nothing outside a node replaces its methods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from suppress.entry import RecordContext

from ..record import Change

if TYPE_CHECKING:
    from ..state.rocksdb import Keyspace
    from .task import Task

__all__ = ("Entry", "Forward", "ForwardChange", "InternalProcessor", "fan_out")

Forward = Callable[[Any, Any, RecordContext], None]
"""A record entry: ``forward(key, value, context)``."""
ForwardChange = Callable[[Any, Any, Any, RecordContext], None]
"""A change entry: ``forward_change(key, new, old, context)``."""


class Entry(NamedTuple):
    """Where a node receives records: its record, change and stale-update entries."""

    record: Forward
    change: ForwardChange
    stale: ForwardChange


def _discard(*args: Any) -> None:
    """The forward of a node without children."""


def fan_out(targets: Sequence[Callable[..., None]]) -> Callable[..., None]:
    """One callable passing its arguments to every target, in order (the target itself if one).

    >>> calls = []
    >>> fan_out([lambda x: calls.append(("a", x)), lambda x: calls.append(("b", x))])(1)
    >>> calls
    [('a', 1), ('b', 1)]
    """
    if not targets:
        return _discard
    if len(targets) == 1:
        return targets[0]
    kids = tuple(targets)

    def forward(*args: Any) -> None:
        for child in kids:
            child(*args)

    return forward


class InternalProcessor:
    """Base of the built-in processors.

    Lifecycle, driven by the task: :meth:`init` (parents before children), then
    :meth:`connect` with the children's entries, then records through the entries, then
    :meth:`close`.

    ``forward``, ``forward_change`` and ``forward_stale`` are the children's entries, bound by
    :meth:`connect`; until then they discard.
    """

    name: str = ""
    """The node's name in the topology (set by the task when it creates the processor)."""
    forward: Forward = staticmethod(_discard)
    """Sends a record to every child's record entry."""
    forward_change: ForwardChange = staticmethod(_discard)
    """Sends a table update to every child's change entry."""
    forward_stale: ForwardChange = staticmethod(_discard)
    """Sends an out-of-order update of a versioned table to every child's stale entry."""

    def init(self, task: Task) -> None:
        """Bind the stores and metrics this node uses (called once, parents first)."""

    def record_entry(self) -> Forward:
        """The callable parents send records to (after :meth:`init`): :meth:`process`."""
        return self.process

    def change_entry(self) -> ForwardChange:
        """The callable parents send table updates to: :meth:`process_change`."""
        return self.process_change

    def stale_entry(self) -> ForwardChange:
        """The callable parents send out-of-order versioned updates to: :meth:`process_stale`."""
        return self.process_stale

    def connect(self, children: Sequence[Entry]) -> None:
        """Bind the forwards to the children's entries, in order."""
        self.forward = fan_out([child.record for child in children])
        self.forward_change = fan_out([child.change for child in children])
        self.forward_stale = fan_out([child.stale for child in children])

    def process(self, key: Any, value: Any, ctx: RecordContext) -> None:
        """Handle one record (the default passes it on)."""
        self.forward(key, value, ctx)

    def process_change(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Handle one table update; the default hands ``Change(new, old)`` to :meth:`process`."""
        self.process(key, Change(new, old), ctx)

    def process_stale(self, key: Any, new: Any, old: Any, ctx: RecordContext) -> None:
        """Handle an out-of-order versioned update; the default: as an ordinary update."""
        self.process_change(key, new, old, ctx)

    def checkpoint(self, keyspace: Callable[[str], Keyspace]) -> Any:
        """What this node keeps outside its stores that a restart must get back.

        Called at every commit of a task with a state directory. Returns state-codec types
        (``None``: nothing); may also write to keyspaces of its own, ``keyspace(name)`` with
        a name derived from the node's, committed in the same atomic step.
        """
        return None

    def restore(self, state: Any, keyspace: Callable[[str], Keyspace]) -> None:
        """Take back what :meth:`checkpoint` returned at the last commit (after :meth:`init`)."""

    def close(self) -> None:
        """Release resources when the task closes."""
