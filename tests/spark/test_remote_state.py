"""RemoteState: committed versions of a state directory at a Hadoop URI (file: here)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from topology.spark._remote import RemoteState
from topology.state.rocksdb import StateDB
from topology.state.rocksdb.errors import StateDirectoryError


class Source:
    """A local StateDB and its checkpoints, one per committed batch."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.db = StateDB.open(tmp / "db")
        self.batch = -1

    def commit(self, **values: str) -> Path:
        self.batch += 1
        for key, value in values.items():
            self.db.keyspace("k").put(key.encode(), value.encode())
        self.db.commit({b"batch": str(self.batch).encode()})
        snapshot = self.tmp / f"ckpt{self.batch}"
        self.db.checkpoint(snapshot)
        return snapshot


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Source]:
    src = Source(tmp_path)
    yield src
    src.db.close()


@pytest.fixture
def remote_dir(tmp_path: Path) -> Path:
    return tmp_path / "remote"


@pytest.fixture
def remote(spark: Any, remote_dir: Path) -> Iterator[RemoteState]:
    state = RemoteState("file://" + str(remote_dir), spark)
    yield state
    state.close()


def files(folder: Path) -> set[str]:
    """Data files (no Hadoop .crc files) below folder, as relative paths."""
    if not folder.exists():
        return set()
    return {
        os.path.relpath(os.path.join(root, name), folder)
        for root, _dirs, names in os.walk(folder)
        for name in names
        if not name.endswith(".crc")
    }


def sst_files(remote_dir: Path) -> set[str]:
    return files(remote_dir / "sst")


def snapshot_sst(snapshot: Path) -> set[str]:
    return {Path(p).name for p in files(snapshot) if p.endswith(".sst")}


def read_all(path: Path) -> tuple[dict[bytes, bytes], bytes | None]:
    with StateDB.open(path) as db:
        return dict(db.keyspace("k").items()), db.read_meta(b"batch")


def test_latest_is_none_before_any_upload(remote: RemoteState) -> None:
    assert remote.latest() is None


def test_round_trip(remote: RemoteState, source: Source, tmp_path: Path,
                    remote_dir: Path) -> None:
    snapshot = source.commit(a="1", b="2")
    remote.upload(snapshot, 0, b"info0")
    assert remote.latest() == (0, b"info0")

    target = tmp_path / "restored" / "state"
    remote.download(0, target)
    assert files(target) == files(snapshot)
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert all(stat.S_IMODE((target / f).stat().st_mode) == 0o600 for f in files(target))
    assert [p.name for p in target.parent.iterdir()] == ["state"]  # no staging folder left
    assert read_all(target) == ({b"a": b"1", b"b": b"2"}, b"0")
    assert (remote_dir / "latest" / f"{0:020d}").is_file()
    assert (remote_dir / "versions" / "0" / "manifest").is_file()


def test_latest_and_download_of_a_later_version(remote: RemoteState, source: Source,
                                                tmp_path: Path) -> None:
    remote.upload(source.commit(a="1"), 0, b"info0")
    remote.upload(source.commit(b="2"), 5, b"\x00\xff")
    assert remote.latest() == (5, b"\x00\xff")
    remote.download(5, tmp_path / "v5")
    assert read_all(tmp_path / "v5") == ({b"a": b"1", b"b": b"2"}, b"1")
    remote.download(0, tmp_path / "v0")
    assert read_all(tmp_path / "v0") == ({b"a": b"1"}, b"0")


def test_a_new_object_sees_what_another_committed(spark: Any, remote: RemoteState,
                                                  source: Source, remote_dir: Path) -> None:
    remote.upload(source.commit(a="1"), 0, b"x")
    other = RemoteState("file://" + str(remote_dir) + "/", spark)
    assert other.latest() == (0, b"x")
    other.upload(source.commit(b="2"), 1, b"y")
    assert remote.latest() == (1, b"y")
    other.close()


def test_sst_files_are_uploaded_once(remote: RemoteState, source: Source,
                                     remote_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = source.commit(a="1")
    remote.upload(first, 0, b"")
    assert sst_files(remote_dir) == snapshot_sst(first)

    second = source.commit(b="2")
    shared = snapshot_sst(first) & snapshot_sst(second)
    assert shared  # RocksDB keeps the files of the first commit
    uploaded: list[str] = []
    original = remote._put

    def spy(local: Path, target: Any, relative: str) -> None:
        uploaded.append(relative)
        original(local, target, relative)

    monkeypatch.setattr(remote, "_put", spy)
    remote.upload(second, 1, b"")
    sst_uploaded = {Path(r).name for r in uploaded if r.startswith("sst/")}
    assert sst_uploaded == snapshot_sst(second) - snapshot_sst(first)
    assert sst_files(remote_dir) == snapshot_sst(first) | snapshot_sst(second)


def test_version_must_increase(remote: RemoteState, source: Source) -> None:
    snapshot = source.commit(a="1")
    remote.upload(snapshot, 3, b"")
    with pytest.raises(ValueError, match=r"version 3 is not above .* version 3"):
        remote.upload(snapshot, 3, b"")
    with pytest.raises(ValueError, match=r"version 2 is not above .* version 3"):
        remote.upload(snapshot, 2, b"")
    with pytest.raises(ValueError, match="-1"):
        remote.upload(snapshot, -1, b"")
    assert remote.latest() == (3, b"")


def compact(db: StateDB) -> None:
    """Merge keyspace k's sst files into new ones (RocksDB's manual compaction, blocking)."""
    db._db.get_column_family("ks:k").compact_range(None, None)  # type: ignore[union-attr]


def test_pruning_keeps_two_versions(remote: RemoteState, source: Source,
                                    remote_dir: Path, tmp_path: Path) -> None:
    snapshots = [source.commit(a="0")]
    remote.upload(snapshots[0], 0, b"0")
    snapshots.append(source.commit(a="1", b="1"))  # overlaps: compaction must merge
    remote.upload(snapshots[1], 1, b"1")
    (remote_dir / "sst" / "999999.sst").write_bytes(b"left by an upload that crashed")
    compact(source.db)  # the sst files of versions 0 and 1 in k are replaced by a new one
    for version in (2, 3):
        snapshots.append(source.commit(**{f"key{version}": str(version)}))
        remote.upload(snapshots[-1], version, str(version).encode())

    assert files(remote_dir / "latest") == {f"{2:020d}", f"{3:020d}"}
    assert {f.split("/")[0] for f in files(remote_dir / "versions")} == {"2", "3"}
    kept = snapshot_sst(snapshots[2]) | snapshot_sst(snapshots[3])
    assert sst_files(remote_dir) == kept
    assert snapshot_sst(snapshots[0]) - kept  # something was removed
    remote.download(2, tmp_path / "v2")
    assert read_all(tmp_path / "v2") == ({b"a": b"1", b"b": b"1", b"key2": b"2"}, b"2")
    remote.download(3, tmp_path / "v3")
    assert read_all(tmp_path / "v3") == (
        {b"a": b"1", b"b": b"1", b"key2": b"2", b"key3": b"3"}, b"3")


def test_a_missing_remote_file_is_corruption(remote: RemoteState, source: Source,
                                             remote_dir: Path, tmp_path: Path) -> None:
    snapshot = source.commit(a="1")
    remote.upload(snapshot, 7, b"")
    name = sorted(snapshot_sst(snapshot))[0]
    os.remove(remote_dir / "sst" / name)
    target = tmp_path / "restored"
    with pytest.raises(StateDirectoryError, match=rf"version 7 .*sst/{name} is missing"):
        remote.download(7, target)
    assert not target.exists()
    assert not [p for p in os.listdir(tmp_path) if "download" in p]


def test_a_missing_version_file_is_corruption(remote: RemoteState, source: Source,
                                              remote_dir: Path, tmp_path: Path) -> None:
    remote.upload(source.commit(a="1"), 1, b"")
    os.remove(remote_dir / "versions" / "1" / "files" / "db" / "CURRENT")
    with pytest.raises(StateDirectoryError, match=r"version 1 .*versions/1/files/db/CURRENT"):
        remote.download(1, tmp_path / "restored")
    with pytest.raises(StateDirectoryError, match=r"version 9 .*versions/9/manifest"):
        remote.download(9, tmp_path / "restored")


def test_crash_before_the_pointer_leaves_the_old_version(
        remote: RemoteState, source: Source, remote_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    remote.upload(source.commit(a="1"), 0, b"old")
    original = remote._write

    def crash(target: Any, data: bytes, relative: str) -> None:
        if relative.startswith("latest/"):
            raise OSError("crash")
        original(target, data, relative)

    monkeypatch.setattr(remote, "_write", crash)
    with pytest.raises(OSError, match="crash"):
        remote.upload(source.commit(b="2"), 1, b"new")
    assert (remote_dir / "versions" / "1" / "manifest").is_file()
    assert remote.latest() == (0, b"old")
    monkeypatch.undo()

    remote.download(0, tmp_path / "v0")
    assert read_all(tmp_path / "v0") == ({b"a": b"1"}, b"0")
    # the same version again, from the local database restored to version 0
    source.db.close()
    source.db = StateDB.open(tmp_path / "v0")
    remote.upload(source.commit(c="3"), 1, b"retry")
    assert remote.latest() == (1, b"retry")
    remote.download(1, tmp_path / "v1")
    assert read_all(tmp_path / "v1") == ({b"a": b"1", b"c": b"3"}, b"2")


def test_download_to_an_existing_target_is_refused(remote: RemoteState, source: Source,
                                                   tmp_path: Path) -> None:
    remote.upload(source.commit(a="1"), 0, b"")
    target = tmp_path / "exists"
    target.mkdir()
    with pytest.raises(ValueError, match="already exists"):
        remote.download(0, target)
    assert list(target.iterdir()) == []


def test_hadoop_errors_are_os_errors(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"nosuchscheme://x/y: open the file system failed"):
        RemoteState("nosuchscheme://x/y", spark)


def test_closed_is_refused(spark: Any, remote_dir: Path) -> None:
    state = RemoteState("file://" + str(remote_dir), spark)
    state.close()
    state.close()
    with pytest.raises(ValueError, match="closed"):
        state.latest()
