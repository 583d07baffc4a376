"""RocksDB tuning of a state database: the one place that builds ``rocksdict.Options``.

Every field left ``None`` keeps RocksDB's default, so ``RocksDBOptions()`` is the plain raw-mode
database ``StateDB`` has always opened. Memory-lean settings matter for state that exists to
*bound* memory, such as the disk tier of a spilling suppression buffer: with the defaults,
RocksDB's memtables (64 MB each, two per column family) and its block cache (32 MB) grow far
past the records they stand in for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rocksdict import BlockBasedOptions, Cache, DBCompactionStyle, Options

__all__ = ("OptionsFactory", "RocksDBOptions")

OptionsFactory = Callable[[bool], Options]
"""``factory(create)``: the options of one database or column family; ``create`` says whether
it may be created."""


def _check_size(value: int | None, what: str) -> None:
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError(f"{what} must be a positive int or None, got {value!r}")


@dataclass(frozen=True, slots=True)
class RocksDBOptions:
    """How RocksDB runs one state database (``None``: RocksDB's default).

    :param write_buffer_bytes: size of a column family's memtable before it is flushed.
    :param max_write_buffers: memtables a column family may hold (one filling, the others
        being flushed).
    :param block_cache_bytes: capacity of the LRU cache of file blocks, one cache shared by
        every column family of the database.
    :param bloom_bits_per_key: bits per key of a Bloom filter in each file, so that a lookup
        of an absent key rarely reads the file.
    :param universal_compaction: RocksDB's universal (tiered) compaction instead of levels:
        far less rewriting for random updates over a database much larger than its
        memtables, for somewhat more files to look in per read.
    :param writable_file_buffer_bytes: buffer of each file being written (the write-ahead
        log, flush and compaction outputs; RocksDB's default is 1 MiB each).
    :raises ValueError: for a size that is not a positive int.

    >>> RocksDBOptions(write_buffer_bytes=1 << 20).factory()(True) is not None
    True
    """

    write_buffer_bytes: int | None = None
    max_write_buffers: int | None = None
    block_cache_bytes: int | None = None
    bloom_bits_per_key: int | None = None
    universal_compaction: bool = False
    writable_file_buffer_bytes: int | None = None

    def __post_init__(self) -> None:
        _check_size(self.write_buffer_bytes, "write_buffer_bytes")
        _check_size(self.max_write_buffers, "max_write_buffers")
        _check_size(self.block_cache_bytes, "block_cache_bytes")
        _check_size(self.bloom_bits_per_key, "bloom_bits_per_key")
        _check_size(self.writable_file_buffer_bytes, "writable_file_buffer_bytes")

    def factory(self) -> OptionsFactory:
        """The options factory of one database: all its calls share one block cache.

        Runtime complexity: O(1).
        """
        cache = None if self.block_cache_bytes is None else Cache(self.block_cache_bytes)

        def options(create: bool) -> Options:
            built = Options(raw_mode=True)
            built.create_if_missing(create)
            if self.write_buffer_bytes is not None:
                built.set_write_buffer_size(self.write_buffer_bytes)
            if self.max_write_buffers is not None:
                built.set_max_write_buffer_number(self.max_write_buffers)
            if self.universal_compaction:
                built.set_compaction_style(DBCompactionStyle.universal())
            if self.writable_file_buffer_bytes is not None:
                built.set_writable_file_max_buffer_size(self.writable_file_buffer_bytes)
            if cache is not None or self.bloom_bits_per_key is not None:
                table = BlockBasedOptions()
                if cache is not None:
                    table.set_block_cache(cache)
                if self.bloom_bits_per_key is not None:
                    table.set_bloom_filter(self.bloom_bits_per_key, False)
                built.set_block_based_table_factory(table)
            return built

        return options
