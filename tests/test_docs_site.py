"""The docs site (mkdocs.yml) stays in step with the pages and the public API.

``make docs`` builds the site with ``--strict``; these checks say earlier, and more plainly,
what a new guide page or a new public name needs: an entry in the nav, a line in a
reference page's ``members`` list.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _config() -> dict[str, Any]:
    # mkdocs.yml may hold tags such as !ENV or !!python/name; none matter to these checks
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=Loader)  # noqa: S506
    assert isinstance(config, dict)
    return config


def _nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def test_nav_lists_every_page_once() -> None:
    nav = _nav_pages(_config()["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")
                   if "_ext" not in p.parts)
    assert sorted(set(nav)) == pages, "mkdocs.yml's nav and the pages under docs/ differ"
    assert len(nav) == len(set(nav)), "a page is in mkdocs.yml's nav twice"


def test_guide_nav_follows_the_index() -> None:
    """The guide pages are in the nav in docs/index.md's order."""
    index = re.findall(r"^\| \[[^]]+\]\(([^)]+\.md)\)", (DOCS / "index.md").read_text(), re.M)
    guide = [p for p in _nav_pages(_config()["nav"])
             if p != "index.md" and not p.startswith("reference/")]
    assert guide == index


def _module_all(module: str) -> list[str]:
    """``module.__all__``, read from its source (importing topology.spark needs pyspark)."""
    base = ROOT / module.replace(".", "/")
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{module} has no __all__")


def test_reference_pages_list_every_public_name() -> None:
    """Each ``::: module`` block's ``members`` are that module's ``__all__``, in its order."""
    blocks = 0
    for page in sorted((DOCS / "reference").glob("*.md")):
        for match in re.finditer(r"^::: (\S+)\n((?:    .*\n?)*)", page.read_text(), re.M):
            blocks += 1
            module, options = match.group(1), yaml.safe_load(
                "\n".join(line[4:] for line in match.group(2).splitlines()))
            members = (options or {}).get("options", {}).get("members")
            assert members == _module_all(module), (
                f"{page.name}: the members of {module} are not its __all__")
    assert blocks
