"""A griffe extension for the docs site: the docstrings' reST-isms, as Markdown.

The docstrings are written for readers of the source and for ``help()``: Sphinx roles
(``:class:`~topology.Topology```), doctest examples (``>>> ...``) and literal blocks after
``::``. mkdocstrings renders docstrings as Markdown, where those come out as literal
``:meth:`` text, nested block quotes and run-on paragraphs. This extension rewrites each
docstring once the package is loaded (before mkdocstrings parses its ``:param:`` fields):

- a role becomes a cross-reference to the object, resolved in the docstring's scope, marked
  optional: a name the site does not document renders as code, without a warning;
- a run of ``>>>``/``...`` lines and their output becomes a ``pycon`` code block;
- a paragraph ending in ``::`` keeps one colon, and the indented block after it becomes a
  code block.
"""

from __future__ import annotations

import ast
import html
import re
import textwrap
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(class|meth|func|mod|attr|exc|data|obj|const):`(~?)([^`]+)`")
_PROMPT = re.compile(r"^(\s*)>>>( |$)")


def _resolve(obj: griffe.Object | griffe.Alias, name: str, roots: frozenset[str]) -> str | None:
    """The full path of ``name`` as written in ``obj``'s docstring, or None."""
    name = name.strip().lstrip(".")
    if name.split(".")[0] in roots:  # an absolute name: topology.errors.StoreClosedError
        return name
    scopes: list[Any] = [obj]
    parent = obj.parent
    while parent is not None:
        scopes.append(parent)
        parent = parent.parent
    for scope in scopes:
        try:
            if name.split(".")[0] in scope.members:
                return str(scope.members[name.split(".")[0]].path) + (
                    "." + name.split(".", 1)[1] if "." in name else "")
            return str(scope.resolve(name))
        except (griffe.NameResolutionError, KeyError, AttributeError):
            continue
    return name if "." in name else None


def _role(obj: griffe.Object | griffe.Alias, match: re.Match[str], roots: frozenset[str]) -> str:
    _kind, short, target = match.groups()
    target = target.strip()
    if "<" in target and target.endswith(">"):  # :class:`text <target>`
        text, target = target[:-1].split("<", 1)
        text = text.strip()
    else:
        text = target.rsplit(".", 1)[-1] if short else target
    if _kind in {"meth", "func"} and not text.endswith(")"):
        text += "()"
    path = _resolve(obj, target.lstrip("~"), roots)
    code = f"<code>{html.escape(text)}</code>"
    if path is None:
        return code
    return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'


def _language(code: str) -> str:
    """``python`` for a literal block that parses as Python, else ``text``."""
    try:
        ast.parse(code)
    except SyntaxError:
        return "text"
    return "python"


def _blocks(text: str) -> str:
    """Doctest runs and ``::`` literal blocks, as fenced code blocks."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        prompt = _PROMPT.match(line)
        if prompt:
            indent = prompt.group(1)
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += [f"{indent}```pycon", *block, f"{indent}```"]
            continue
        if line.rstrip().endswith("::") and i + 1 < len(lines) and not lines[i + 1].strip():
            indent = len(line) - len(line.lstrip())
            j = i + 2
            block = []
            while j < len(lines) and (not lines[j].strip()
                                      or len(lines[j]) - len(lines[j].lstrip()) > indent):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
                j -= 1
            if block:
                head = line.rstrip()[:-1]
                if head.strip() == ":":
                    head = ""
                pad = " " * indent
                if head.strip():
                    out += [head, ""]
                code = textwrap.dedent("\n".join(block))
                out += [f"{pad}```{_language(code)}", *code.split("\n"), f"{pad}```"]
                i = j
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def rewrite(obj: griffe.Object | griffe.Alias, text: str, roots: frozenset[str]) -> str:
    """``text``, a docstring of ``obj``, in Markdown."""
    parts = re.split(r"(```.*?```)", _blocks(text), flags=re.S)
    return "".join(
        part if part.startswith("```") else _ROLE.sub(lambda m: _role(obj, m, roots), part)
        for part in parts
    )


class RestToMarkdown(griffe.Extension):
    """Rewrites every docstring of a loaded package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader,
                   **kwargs: Any) -> None:
        """Rewrite the docstrings of ``pkg`` and everything defined in it."""
        roots = frozenset({pkg.name, *loader.modules_collection.members})
        seen: set[int] = set()

        def walk(obj: griffe.Object | griffe.Alias) -> None:
            if id(obj) in seen:
                return
            seen.add(id(obj))
            if obj.docstring is not None:
                obj.docstring.value = rewrite(obj, obj.docstring.value, roots)
            for member in obj.members.values():
                if not member.is_alias:
                    walk(member)

        walk(pkg)
