"""Store contracts: the semantic checks any store backend must pass, ours and users' alike.

Each checker takes a factory of fresh, empty stores and raises ``AssertionError`` naming the
first check that failed: ``check_key_value_store``, ``check_window_store``,
``check_session_store`` and ``check_versioned_store`` (which returns the names of the
checks it ran).

>>> from topology.state.memory import InMemoryKeyValueStore
>>> check_key_value_store(lambda: InMemoryKeyValueStore("s", str.encode))
"""

from .key_value import check_key_value_store as check_key_value_store
from .session import check_session_store as check_session_store
from .versioned import VersionedStoreFactory as VersionedStoreFactory
from .versioned import check_versioned_store as check_versioned_store
from .window import check_window_store as check_window_store

__all__ = ("VersionedStoreFactory", "check_key_value_store", "check_session_store",
           "check_versioned_store", "check_window_store")
