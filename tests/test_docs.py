"""Every Python example in docs/ and the README runs (the examples are the user's docs).

Every ```python block runs on its own, as a user who copies it runs it: in a fresh module
namespace (its imports included), from a fresh temporary working directory; a block of ``>>>``
lines as a doctest (its outputs compared), any other as code. ``tests/test_typing_strict.py``
checks every block under ``mypy --strict``.
"""

from __future__ import annotations

import doctest
import os
import re
import sys
import types
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_every_page_has_a_runnable_example() -> None:
    missing = [p.name for p in PAGES if p.name not in {"implementation.md", "performance.md"}
               and not BLOCK.search(p.read_text(encoding="utf-8"))]
    assert missing == []


def test_docs_link_nothing_outside_the_repository() -> None:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "../" not in text and "shared/" not in text, page.name
        assert not re.search(r"\bissue\b", text, re.I), page.name


def _blocks() -> list[tuple[Path, int, str]]:
    return [(page, i, code) for page in PAGES
            for i, code in enumerate(BLOCK.findall(page.read_text(encoding="utf-8")))]


@pytest.mark.parametrize(("page", "index", "code"), [  # a block that starts Spark is a spark test
    pytest.param(page, i, code, marks=[pytest.mark.spark] if "local_session(" in code else [],
                 id=f"{page.name}[{i}]") for page, i, code in _blocks()])
def test_block_runs_on_its_own(page: Path, index: int, code: str, tmp_path: Path) -> None:
    restore_spark = _spark_settings()
    module = types.ModuleType(f"docs_{page.stem}_{index}")  # a real module, as a user's code is in
    namespace: dict[str, object] = module.__dict__
    sys.modules[module.__name__] = module
    cwd = os.getcwd()
    os.chdir(tmp_path)
    name = f"{page.name}[block {index}]"
    try:
        if code.lstrip().startswith(">>>"):
            test = doctest.DocTestParser().get_doctest(code, namespace, name, name, 0)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test, clear_globs=False)
            assert runner.failures == 0, f"{name}: {runner.failures} failing example(s)"
        else:
            exec(compile(code, name, "exec"), namespace)  # noqa: S102
    finally:
        os.chdir(cwd)
        del sys.modules[module.__name__]
        restore_spark()


SESSION_SETTINGS = ("spark.sql.streaming.stateStore.providerClass",)
"""Settings a page may change on the shared Spark session: put back after it ran."""


def _spark_settings() -> Callable[[], None]:
    """What puts the shared Spark session's settings back as they are now."""
    session = sys.modules.get("pyspark.sql")
    active = None if session is None else session.SparkSession.getActiveSession()
    before = {} if active is None else {k: active.conf.get(k, None) for k in SESSION_SETTINGS}

    def restore() -> None:
        pyspark = sys.modules.get("pyspark.sql")
        now = None if pyspark is None else pyspark.SparkSession.getActiveSession()
        if now is None:
            return
        for key in SESSION_SETTINGS:
            value = before.get(key)
            if value is None:
                now.conf.unset(key)
            else:
                now.conf.set(key, value)

    return restore
