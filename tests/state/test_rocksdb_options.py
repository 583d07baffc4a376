"""RocksDBOptions: validated on construction; a database opens (and reopens) with any of them."""

from __future__ import annotations

import pytest

from topology.state.rocksdb import RocksDBOptions, StateDB

LEAN = RocksDBOptions(write_buffer_bytes=64 << 10, max_write_buffers=2,
                      block_cache_bytes=64 << 10, bloom_bits_per_key=10,
                      universal_compaction=True, writable_file_buffer_bytes=16 << 10)


@pytest.mark.parametrize("field", ["write_buffer_bytes", "max_write_buffers",
                                   "block_cache_bytes", "bloom_bits_per_key",
                                   "writable_file_buffer_bytes"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "1"])
def test_sizes_must_be_positive_ints(field, bad) -> None:
    with pytest.raises(ValueError, match=field):
        RocksDBOptions(**{field: bad})


def test_a_database_works_the_same_with_lean_options_and_reopens_with_others(tmp_path) -> None:
    path = tmp_path / "state"
    with StateDB.open(path, options=LEAN) as db:
        ks = db.keyspace("ks")
        for i in range(5_000):  # many flushes of 64 KiB memtables, and compactions
            ks.put(b"k%05d" % i, b"v" * 100)
            if i % 500 == 0:
                db.commit()
        db.commit()
        for i in range(0, 5_000, 2):
            ks.delete(b"k%05d" % i)
        db.commit()
        kept = [k for k, _ in ks.items()]
        assert kept == [b"k%05d" % i for i in range(1, 5_000, 2)]
        assert ks.get(b"k00001") == b"v" * 100 and ks.get(b"k00000") is None
    with StateDB.open(path) as db:  # RocksDB's defaults this time: options are not stored
        assert [k for k, _ in db.keyspace("ks").items()] == kept


def test_the_default_options_are_rocksdbs() -> None:
    options = RocksDBOptions()
    assert all(getattr(options, f) in (None, False) for f in options.__dataclass_fields__)
