"""The registry of versioned store backends every state test runs against.

A backend joins the data-driven conformance scenarios, the contract checker and the
property tests by adding one entry: a factory taking the store's keyword options
(``history_retention_ms``, and optionally ``segment_interval_ms`` and ``max_versions``) and
returning a new, empty store for ``str`` keys serialized as UTF-8 and ``str`` values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from topology.state.api import VersionedKeyValueStore
from topology.state.memory import InMemoryVersionedKeyValueStore


def _memory(**options: Any) -> VersionedKeyValueStore:
    return InMemoryVersionedKeyValueStore("test", str.encode, **options)


VERSIONED_BACKENDS: dict[str, Callable[..., VersionedKeyValueStore]] = {
    "memory": _memory,
}


def check_internals(store: Any) -> None:
    """Run the backend's own invariant check (``_check()``) if it has one."""
    check = getattr(store, "_check", None)
    if check is not None:
        check()
