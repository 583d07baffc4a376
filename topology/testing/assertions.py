"""Compare record lists with a readable diff: :func:`assert_records` and :func:`diff_records`.

Neither imports pytest; the pytest plugin (:mod:`topology.testing.plugin`) shows the same diff
for a failing ``assert records == expected`` of record lists.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any

from ..record import normalize_headers
from ..runtime.outputs import TestRecord

__all__ = ("assert_records", "diff_records", "is_record_list")

FIELDS = ("key", "value", "timestamp", "headers")
"""The fields of a record, in the order of a ``TestRecord`` and of its tuple forms."""
CONTEXT = 2
"""Equal records shown around each difference; longer runs of equal records are elided."""
CELL_WIDTH = 60
"""A cell's longest text; a longer one is cut, ending in ``...``."""


def _fields(item: Any) -> tuple[Any, ...]:
    """A record as a tuple of its fields: a ``TestRecord`` gives all four."""
    if isinstance(item, TestRecord):
        return (item.key, item.value, item.timestamp, item.headers)
    if isinstance(item, tuple) and 2 <= len(item) <= 4:
        if len(item) == 4:
            return (*item[:3], normalize_headers(item[3]))
        return item
    raise TypeError(f"a record is a TestRecord or a (key, value[, timestamp[, headers]]) "
                    f"tuple, got {item!r}")


def is_record_list(obj: object) -> bool:
    """Whether ``obj`` is a list or tuple of records holding at least one ``TestRecord``.

    Every item must be a ``TestRecord`` or a 2- to 4-tuple; this is what the pytest plugin
    checks before it explains a failing ``==``.
    """
    if not isinstance(obj, list | tuple):
        return False
    has_record = False
    for item in obj:
        if isinstance(item, TestRecord):
            has_record = True
        elif not (isinstance(item, tuple) and 2 <= len(item) <= 4):
            return False
    return has_record


def _cell(fields: tuple[Any, ...], names: Sequence[str]) -> str:
    text = ", ".join(f"{name}={value!r}" for name, value in zip(names, fields, strict=False))
    return text if len(text) <= CELL_WIDTH else text[:CELL_WIDTH - 3] + "..."


def diff_records(actual: Iterable[Any], expected: Iterable[Any]) -> list[str] | None:
    """The lines of a readable diff of two record lists, or ``None`` when they match.

    Items are :class:`~topology.testing.TestRecord` objects or tuples ``(key, value)``,
    ``(key, value, timestamp)`` (ms) or ``(key, value, timestamp, headers)``, in any mix.
    Records are compared on the fields *every* item gives: key and value when any item is a
    pair, plus the timestamp when every item has one, plus the headers when every item is a
    ``TestRecord`` or a 4-tuple. Order matters.

    The diff aligns the two lists (``difflib.SequenceMatcher``) and shows one row per record:
    the marker (``=`` equal, ``~`` changed, ``-`` expected but missing from actual, ``+``
    extra in actual), the expected and the actual index, then both records, with the fields
    that differ named at the end of a changed row. Runs of equal records are shortened.

    :raises TypeError: for an item that is not a record.
    """
    act = [_fields(item) for item in actual]
    exp = [_fields(item) for item in expected]
    width = min((len(f) for f in act + exp), default=len(FIELDS))
    act = [f[:width] for f in act]
    exp = [f[:width] for f in exp]
    if act == exp:
        return None
    names = FIELDS[:width]
    shown = names
    if width == 4 and not any(f[3] for f in act + exp):
        shown = names[:3]  # every record has no headers: do not print "headers=()" everywhere

    rows: list[tuple[str, int | None, int | None]] = []  # (marker, expected i, actual j)
    matcher = difflib.SequenceMatcher(None, [repr(f) for f in exp], [repr(f) for f in act],
                                      autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [("=", i1 + k, j1 + k) for k in range(i2 - i1)]
            continue
        paired = min(i2 - i1, j2 - j1)
        for k in range(paired):  # a replaced block: pair records up, the rest is -/+
            same = exp[i1 + k] == act[j1 + k]  # equal values may have different reprs
            rows.append(("=" if same else "~", i1 + k, j1 + k))
        rows += [("-", i, None) for i in range(i1 + paired, i2)]
        rows += [("+", None, j) for j in range(j1 + paired, j2)]

    changed = [n for n, row in enumerate(rows) if row[0] != "="]
    keep = {n for c in changed for n in range(c - CONTEXT, c + CONTEXT + 1)}
    exp_cells = [_cell(f, shown) for f in exp]
    left = max([len("expected"), *(len(c) for c in exp_cells)])
    digits = max(3, len(str(max(len(exp), len(act)))))
    header = (f"  {'exp':>{digits}} {'act':>{digits}}  {'expected':<{left}}  actual")
    lines = [f"records differ: {len(exp)} expected, {len(act)} actual, {len(changed)} "
             f"difference{'s' if len(changed) > 1 else ''}, compared on {', '.join(names)} "
             f"(= equal, ~ changed, - missing, + extra)", header]
    elided = 0
    for n, (marker, i, j) in enumerate(rows):
        if n not in keep:
            elided += 1
            continue
        if elided:
            lines.append(f"  ... {elided} equal record{'s' if elided > 1 else ''} ...")
            elided = 0
        e = exp_cells[i] if i is not None else ""
        a = _cell(act[j], shown) if j is not None else "<missing>"
        ei = "-" if i is None else str(i)
        aj = "-" if j is None else str(j)
        line = f"{marker} {ei:>{digits}} {aj:>{digits}}  {e:<{left}}  {a}"
        if marker == "~" and i is not None and j is not None:
            differ = [name for name, x, y in zip(names, exp[i], act[j], strict=True) if x != y]
            line += f"   ({', '.join(differ)})"
        lines.append(line.rstrip())
    if elided:
        lines.append(f"  ... {elided} equal record{'s' if elided > 1 else ''} ...")
    return lines


def assert_records(actual: Iterable[Any], expected: Iterable[Any]) -> None:
    """Assert that two record lists match, with a readable diff when they do not.

    ``actual`` is typically ``output_topic.read_records_to_list()``; ``expected`` a list of
    ``TestRecord`` objects or ``(key, value)`` / ``(key, value, timestamp)`` tuples (ms).
    Records are compared on the fields every item gives, in order (see :func:`diff_records`).

    :raises AssertionError: when they differ, its message the diff.
    :raises TypeError: for an item that is not a record.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this one
    lines = diff_records(actual, expected)
    if lines is not None:
        raise AssertionError("\n".join(lines))
