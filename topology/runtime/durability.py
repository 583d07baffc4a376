"""Durability: a task's state on disk, its commits, and what a restart takes back.

With a ``state_dir`` a task is *durable*: its stores default to RocksDB, and each commit writes
every store, buffer, input offset, stream time and node state, with the caller's meta, in one
atomic step (:meth:`TaskDurability.commit`); a task created on the same directory continues
from the last commit (:meth:`TaskDurability._restore`). Spilling suppression buffers keep
their disk tiers in keyspaces named by :func:`spill_keyspace_name`, persistent stores in
keyspaces named by :func:`store_keyspace_name`.

:class:`TaskDurability` is that part of :class:`~topology.runtime.task.Task`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import TopologyError
from ..state.codec import decode, encode
from ..state.rocksdb.errors import StateDirectoryError
from .store_specs import STORES_META, check_store_signatures

if TYPE_CHECKING:
    from ..state.rocksdb import Keyspace
    from ..topology import Topology
    from .graph import StoreSpec
    from .processor import InternalProcessor
    from .state_dir import TaskStateDir, TaskStateView

__all__ = ("TASK_META", "TaskDurability", "spill_keyspace_name", "store_keyspace_name")

TASK_META = b"task"
"""The meta entry of a task's committed offsets, stream times and node states."""


class TaskDurability:
    """The state directory, commits and restore of a :class:`~topology.runtime.task.Task`.

    A part of ``Task`` (its base class), with the attributes ``Task`` sets.
    """

    if TYPE_CHECKING:
        state: TaskStateDir | TaskStateView
        spill_state: TaskStateDir
        durable: bool
        auto_commit: bool
        commit_meta: Callable[[], Mapping[bytes, bytes | None]] | None
        committed_offsets: dict[str, int]
        topology: Topology
        processors: dict[str, InternalProcessor]
        stream_time: int
        _offsets: dict[str, int]
        _store_signatures: bytes

        def _check_alive(self) -> None: ...

    # -- spilled suppression buffers -----------------------------------------------------------

    def spill_keyspace(self, store_name: str) -> Keyspace:
        """The keyspace of suppression buffer ``store_name``'s disk tier.

        A durable task keeps it in its state database, committed with the rest of its state
        (the buffer writes what a restart needs there at each commit, and is restored from
        it: see ``SpillingBuffer.checkpoint``). Otherwise it lives in the scratch database
        ``<task>.spill``, and whatever an earlier run left there is deleted.

        :raises StateDirectoryError: the state directory cannot be used (see
            :class:`~topology.runtime.state_dir.TaskStateDir`).
        """
        if self.durable:
            return self.state.keyspace(spill_keyspace_name(store_name))
        keyspace = self.spill_state.keyspace(spill_keyspace_name(store_name))
        last = next(keyspace.items(reverse=True), None)
        if last is not None:
            keyspace.delete_range(b"", last[0] + b"\x00")
        return keyspace

    def commit_state(self) -> None:
        """Commit the spill tiers' scratch database (a spilling buffer calls it as it goes).

        The spill tiers are scratch space of their own; what a restart needs of a buffer is
        committed with the task's state (see :meth:`commit`).
        """
        self.spill_state.commit()

    # -- durability ----------------------------------------------------------------------------

    def _create_store(self, spec: StoreSpec) -> Any:
        """A fresh store for ``spec``: RocksDB if chosen or (``None``) if the task is durable.

        :raises TopologyError: for an in-memory store in a durable task (its contents would
            be lost at restart while the input offsets say they were processed), or a store
            kind without a RocksDB backend asked to be persistent.
        """
        persistent = self.durable if spec.persistence is None else spec.persistence
        if not persistent:
            if self.durable:
                raise TopologyError(
                    f"store {spec.name!r} is in memory (persistent=False) but the runtime "
                    "has a state_dir: its contents would be lost at a restart that continues "
                    "from the committed offsets; let it follow the runtime (persistent=None)")
            return spec.factory()
        if spec.persistent_factory is None:
            raise TopologyError(f"store {spec.name!r}: {spec.kind} stores have no persistent "
                                "backend")
        return spec.persistent_factory(self.state.keyspace(store_keyspace_name(spec.name)))

    def node_keyspace(self, name: str) -> Keyspace:
        """A keyspace of the task's state database for a node's own state (``node.<name>``)."""
        return self.state.keyspace(store_keyspace_name(name, "node."))

    def _restore(self) -> None:
        """Take back the last commit's offsets, stream time and node states (if any).

        :raises StateDirectoryError: a store's layout (window size, grace, retention ...)
            changed since the state was written, or a node's state has no node now.
        """
        recorded = self.state.read_meta(STORES_META)  # opens the database: path is known
        check_store_signatures(self.state.path or "", recorded, self.topology.stores)
        data = self.state.read_meta(TASK_META)
        if data is None:
            return
        image = decode(data)
        self._offsets = dict(image["offsets"])
        self.committed_offsets = dict(self._offsets)
        self.stream_time = image["stream_time"]
        for name, state in image["nodes"].items():
            proc = self.processors.get(name)
            if proc is None:
                raise StateDirectoryError(
                    self.state.path or "", "restore",
                    f"it holds state of node {name!r}, which this topology does not have: "
                    "it was written by another topology")
            proc.restore(state, self.node_keyspace)

    def commit(self, meta: Mapping[bytes, bytes | None] | None = None) -> None:
        """Commit pending writes; for a durable task with offsets, stream times and meta.

        Every store's and buffer's pending writes, and, for a durable task, the input offsets,
        stream times, node states and meta entries, in one atomic step.

        :param meta: more meta entries to commit (for a durable task).
        :raises TaskFailedError: for a durable task that failed (its last record may be half
            processed: the state stays as of the last commit).
        :raises StateCodecError: for node state the state codec cannot write.
        """
        if not self.durable:
            self.state.commit()
            return
        self._check_alive()
        nodes = {}
        for name, proc in self.processors.items():
            state = proc.checkpoint(self.node_keyspace)
            if state is not None:
                nodes[name] = state
        entries: dict[bytes, bytes | None] = {TASK_META: encode(
            {"offsets": self._offsets, "stream_time": self.stream_time, "nodes": nodes}),
            STORES_META: self._store_signatures}
        if self.commit_meta is not None:
            entries.update(self.commit_meta())
        if meta:
            entries.update(meta)
        self.state.commit(entries)
        self.committed_offsets = dict(self._offsets)

    def _commit_call(self) -> None:
        """The commit at the end of a call: unless ``auto_commit`` is off for a durable task."""
        self.spill_state.commit()
        if not self.durable:
            self.state.commit()
        elif self.auto_commit:
            self.commit()

    def read_meta(self, key: bytes) -> bytes | None:
        """A committed meta entry of the state directory, ``None`` if absent."""
        return self.state.read_meta(key)

_KEYSPACE_NAME = re.compile(r"[A-Za-z0-9._-]{1,240}")


def store_keyspace_name(store_name: str, prefix: str = "store.") -> str:
    """The keyspace of a persistent store: ``store.<store name>``.

    Names that are not keyspace names are hashed as in :func:`spill_keyspace_name`.

    >>> store_keyspace_name("counts")
    'store.counts'
    """
    return spill_keyspace_name(store_name, prefix)


def spill_keyspace_name(store_name: str, prefix: str = "spill.") -> str:
    """The keyspace of a suppression buffer's disk tier: ``spill.<store name>``.

    A store name that is not a keyspace name (``[A-Za-z0-9._-]``, at most 240 characters
    here) is replaced by its SHA-256, under another prefix, so no two stores share one.

    >>> spill_keyspace_name("KTABLE-SUPPRESS-STATE-STORE-0000000003")
    'spill.KTABLE-SUPPRESS-STATE-STORE-0000000003'
    >>> spill_keyspace_name("my store")[:16]
    'spill-sha256.cc5'
    """
    if _KEYSPACE_NAME.fullmatch(store_name):
        return f"{prefix}{store_name}"
    digest = hashlib.sha256(store_name.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix.rstrip('.')}-sha256.{digest}"

