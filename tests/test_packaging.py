"""Packaging: the license, the version in one place, the changelog, the public re-exports, and
clear errors for a missing ``spark`` extra and a system without ``fcntl`` (issue 23, item 7)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

import suppress
import topology

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def _version_in_file() -> str:
    tree = ast.parse((ROOT / "topology" / "_version.py").read_text())
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "__version__"):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            return node.value.value
    raise AssertionError("topology/_version.py assigns no __version__ string literal")


def test_license_file_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text()
    head = [line.strip() for line in text.strip().splitlines()[:3]]
    assert head == ["Apache License", "Version 2.0, January 2004",
                    "http://www.apache.org/licenses/"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert "APPENDIX: How to apply the Apache License to your work." in text


def test_pyproject_declares_license_and_build_backend() -> None:
    data = _pyproject()
    project = data["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    # a license expression needs setuptools 77; with one, a License classifier is an error
    assert "setuptools>=77" in data["build-system"]["requires"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    assert "Operating System :: POSIX" in project["classifiers"]
    assert "Typing :: Typed" in project["classifiers"]


def test_python_classifiers_match_requires_python() -> None:
    project = _pyproject()["project"]
    assert project["requires-python"] == ">=3.11"
    versions = {c.rsplit(" ", 1)[1] for c in project["classifiers"]
                if c.startswith("Programming Language :: Python :: 3.")}
    assert versions == {"3.11", "3.12", "3.13"}


def test_version_is_written_in_one_place() -> None:
    project = _pyproject()
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "topology._version.__version__"
    assert topology.__version__ == _version_in_file()
    parts = topology.__version__.split(".")
    assert len(parts) == 3 and all(p.isdigit() for p in parts), topology.__version__


def test_changelog_has_an_unreleased_section_and_the_first_release() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## [Unreleased]"
    assert any(h.startswith("## [0.1.0]") for h in headings)


def test_contributing_exists() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    assert "make test" in text and "CHANGELOG.md" in text


def test_suppressed_and_buffer_config_are_importable_from_topology() -> None:
    from topology import BufferConfig, Suppressed

    assert Suppressed is suppress.Suppressed
    assert BufferConfig is suppress.BufferConfig
    assert {"Suppressed", "BufferConfig"} <= set(topology.__all__)


@pytest.mark.parametrize("missing", ["pyarrow", "pandas", "pyspark"])
def test_spark_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch,
                                          missing: str) -> None:
    # Import the real three first, so that none is imported for the first time (and caches
    # the others' absence, as pandas does pyarrow's) while one of them is hidden.
    for name in ("pyarrow", "pandas", "pyspark"):
        pytest.importorskip(name)
    # monkeypatch puts every removed or replaced module back afterwards
    for name in [m for m in sys.modules if m == "topology.spark" or
                 m.startswith("topology.spark.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, missing, None)  # None: "import <missing>" fails
    with pytest.raises(ImportError) as info:
        importlib.import_module("topology.spark")
    message = str(info.value)
    assert "pip install 'suppress-topology[spark]'" in message
    assert f"(missing: {missing})" in message
    assert isinstance(info.value.__cause__, ImportError)


def test_import_topology_needs_no_fcntl() -> None:
    code = ("import sys; sys.modules['fcntl'] = None; import topology, suppress; "
            "from topology.state.rocksdb.lock import DirectoryLock; print('ok')")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_state_directory_lock_without_fcntl_says_posix(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    from topology.state.rocksdb.lock import DirectoryLock

    monkeypatch.setitem(sys.modules, "fcntl", None)
    with pytest.raises(ImportError, match=r"POSIX system \(Linux, macOS\)"):
        DirectoryLock.acquire(tmp_path, "LOCK", "open")
    assert list(tmp_path.iterdir()) == []  # refused before the lock file is created
