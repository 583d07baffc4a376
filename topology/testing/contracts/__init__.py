"""Store contracts: checks any store backend must pass, ours and users' alike.

>>> from topology.state.memory import InMemoryKeyValueStore
>>> check_key_value_store(lambda: InMemoryKeyValueStore("s", str.encode))
"""

from .key_value import check_key_value_store as check_key_value_store
from .window import check_window_store as check_window_store

__all__ = ("check_key_value_store", "check_window_store")
