"""A picture of a test driver's run: records per key over event time, windows, stream time.

:meth:`TopologyTestDriver.timeline() <topology.testing.TopologyTestDriver.timeline>` returns a
:class:`Timeline` of what a driver created with ``config={"record_timeline": True}`` has seen
so far. Its :attr:`~Timeline.events` are typed named tuples, in the order they happened:

* :class:`InputEvent`: a record piped into the driver (its arrival index, topic, key and
  timestamp) with the task's stream time after it;
* :class:`OutputEvent`: a record with a windowed key written to an output topic (key, window,
  value), with the arrival index of the input whose processing wrote it, and whether it is a
  final result (written downstream of a suppression);
* :class:`LateDropEvent`: a record a windowed aggregation dropped because its window had
  closed, with that window and the aggregation's stream time.

:meth:`Timeline.to_svg` draws them (hand-written SVG, no dependency, the same events always
give the same text): one lane per key over event time (ms), records as circles, each window
a light rectangle ``[start, end)`` with a bar where stream time stood when it closed, final
results as diamonds at the window end labelled with their value, late drops as red crosses
in the window that refused them; below, stream time after each arrival, stepping down the
arrival order, with each record's timestamp as a dot. :meth:`Timeline.save` writes the SVG,
or a PNG of the same picture when the path ends with ``.png`` and matplotlib is installed
(the ``plot`` extra).
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any, NamedTuple

from ..windows import Windowed

__all__ = ("InputEvent", "LateDropEvent", "OutputEvent", "Timeline")


class InputEvent(NamedTuple):
    """A record piped into the driver."""

    arrival: int
    """Arrival index: 0 for the driver's first input record, counted over all topics."""
    topic: str
    key: Any
    timestamp: int
    stream_time: int
    """The task's stream time (ms) after the record."""


class OutputEvent(NamedTuple):
    """A record with a windowed key written to an output topic."""

    arrival: int
    """Arrival index of the input being processed when it was written (the last input's,
    for a record written by a wall-clock advance; -1 before any input)."""
    topic: str
    key: Any
    """The key inside the window."""
    start: int
    end: int
    """The window's end as its type states it (exclusive for time windows)."""
    value: Any
    timestamp: int
    final: bool
    """Written downstream of a suppression: a final result (``until_window_closes``)."""
    stream_time: int
    """When it was written: the suppression's stream time for a final result, else the
    task's."""


class LateDropEvent(NamedTuple):
    """A record a windowed aggregation dropped for a closed window (once per window)."""

    arrival: int
    """Arrival index of the input being processed (the record itself, unless it came through
    a repartition topic)."""
    key: Any
    timestamp: int
    start: int
    end: int
    stream_time: int
    """The aggregation's stream time when it dropped the record."""


Event = InputEvent | OutputEvent | LateDropEvent
_new = tuple.__new__  # a named tuple of its fields, without its __new__


class Recorder:
    """What a recording driver keeps: small tuples per input, windowed output and late drop.

    The driver calls :meth:`mark` when one of its calls starts (outputs already there are
    not new), :meth:`begin` before an input record, :meth:`finish` after it (stream time,
    new outputs) and :meth:`collect` after a wall-clock advance.
    """

    def __init__(self, outputs: Mapping[str, Sequence[Any]], stream_time: Callable[[], int],
                 skip_topics: Iterable[str], final_topics: Mapping[str, Any]) -> None:
        """:param final_topics: topic -> the suppression view (``stream_time``) writing it."""
        self.events: list[Event] = []
        self._outputs = outputs
        self._stream_time = stream_time
        self._skip = frozenset(skip_topics)
        self._final = dict(final_topics)
        self._seen: dict[str, int] = {}
        self._total = 0
        """Records in the output topics at the last look (a look that finds as many stops)."""
        self._next = 0
        self._current = -1
        self._pending = -1
        """Position in :attr:`events` of the input being processed, -1 if none."""

    def mark(self) -> None:
        """Outputs there now are old: records are read (popped) only between driver calls."""
        self._seen = {topic: len(queue) for topic, queue in self._outputs.items()}
        self._total = sum(self._seen.values())

    def begin(self, topic: str, key: Any, timestamp: int) -> None:
        """An input record is about to be processed."""
        self._current = self._next
        self._next += 1
        self._pending = len(self.events)
        self.events.append(_new(InputEvent, (self._current, topic, key, timestamp, -1)))

    def abort(self) -> None:
        """The pending record was refused before processing (unknown topic)."""
        if self._pending >= 0:
            del self.events[self._pending:]
            self._pending = -1
            self._next -= 1
            self._current = self._next - 1

    def finish(self) -> None:
        """After an input record: its event, then the outputs it wrote."""
        pending = self._pending
        if pending >= 0:
            self._pending = -1
            self.events[pending] = _new(InputEvent, (*self.events[pending][:4],
                                                     self._stream_time()))
        if sum(map(len, self._outputs.values())) != self._total:
            self.collect()

    def late(self, key: Any, timestamp: int, start: int, end: int, stream_time: int) -> None:
        """The late-drop observer (``TaskMetrics.late_observer``)."""
        self.events.append(LateDropEvent(self._current, key, timestamp, start, end,
                                         stream_time))

    def collect(self) -> None:
        """Record the windowed records written since the last look."""
        seen = self._seen
        self._total = sum(map(len, self._outputs.values()))
        for topic, queue in self._outputs.items():
            old = seen.get(topic, 0)
            size = len(queue)
            if size <= old or topic in self._skip:
                seen[topic] = size
                continue
            seen[topic] = size
            view = self._final.get(topic)
            final = view is not None
            now = view.stream_time if view is not None else self._stream_time()
            for i in range(old, size):
                record = queue[i]
                if len(record) == 8:  # a Windowed key kept as its parts
                    key, value, ts, start, end = (record[0], record[1], record[2], record[6],
                                                  record[7])
                elif isinstance(record[0], Windowed):
                    key, window = record[0]
                    value, ts, start, end = record[1], record[2], window.start, window.end
                else:
                    continue
                self.events.append(OutputEvent(self._current, topic, key, start, end, value,
                                               ts, final, now))


class Timeline:
    """A picture of a run: :attr:`events`, drawn by :meth:`to_svg`, written by :meth:`save`."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.events: list[Event] = list(events)
        """Inputs, windowed outputs and late drops, in the order they happened."""

    @property
    def inputs(self) -> list[InputEvent]:
        """The input records, in arrival order."""
        return [e for e in self.events if type(e) is InputEvent]

    @property
    def outputs(self) -> list[OutputEvent]:
        """The windowed output records, final results and updates."""
        return [e for e in self.events if type(e) is OutputEvent]

    @property
    def final_results(self) -> list[OutputEvent]:
        """The windowed records written downstream of a suppression."""
        return [e for e in self.events if type(e) is OutputEvent and e.final]

    @property
    def late_drops(self) -> list[LateDropEvent]:
        """Records dropped for closed windows, once per (record, window)."""
        return [e for e in self.events if type(e) is LateDropEvent]

    def keys(self) -> list[str]:
        """The lanes' labels: one per key, in the order keys first appeared."""
        return list(_lanes(self.events))

    def to_svg(self) -> str:
        """The picture as an SVG document (same events, same text)."""
        return _svg(_scene(self.events))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the picture: SVG, or PNG where ``path`` ends with ``.png``.

        :raises ImportError: for a PNG without matplotlib (the ``plot`` extra).
        :raises ValueError: for another file extension.
        """
        name = os.fspath(path)
        suffix = os.path.splitext(name)[1].lower()
        if suffix == ".svg":
            with open(name, "w", encoding="utf-8") as f:
                f.write(self.to_svg())
        elif suffix == ".png":
            _png(_scene(self.events), name)
        else:
            raise ValueError(f"Timeline.save writes .svg or .png files, not {name!r}")

    def _repr_svg_(self) -> str:
        """Jupyter shows the picture."""
        return self.to_svg()

    def __repr__(self) -> str:
        return (f"Timeline({len(self.inputs)} inputs, {len(self.outputs)} windowed outputs, "
                f"{len(self.late_drops)} late drops)")


# -- layout ------------------------------------------------------------------------------------

LEFT, RIGHT, TOP, PLOT_W = 130, 40, 64, 760
SUB, RECORD_ROW = 18, 34
"""Pitch of a window row, and the height of a lane's record row (px)."""
BLUE, RED, GREEN, GREY, INK = "#1f77b4", "#d62728", "#2ca02c", "#999999", "#222222"

Shape = tuple[Any, ...]
"""``(kind, ...)``: ``rect x y w h style``, ``line x1 y1 x2 y2 style``, ``poly points
closed style``, ``circle cx cy r style``, ``text x y string size anchor style``. A style is a
tuple of (name, value) pairs: fill, stroke, width, opacity, dash, weight."""


def _label(value: Any, limit: int = 24) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _lanes(events: Iterable[Event]) -> dict[str, int]:
    lanes: dict[str, int] = {}
    for e in events:
        lanes.setdefault(_label(e.key), len(lanes))
    return lanes


def _ticks(lo: float, hi: float) -> list[int]:
    raw = (hi - lo) / 8
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(1, int(step))
    first = math.ceil(lo / step) * step
    return list(range(first, int(hi) + 1, step))


def _scene(events: list[Event]) -> tuple[int, int, list[Shape]]:
    """Width, height and the shapes of the picture, in drawing order."""
    inputs = [e for e in events if type(e) is InputEvent]
    drops = [e for e in events if type(e) is LateDropEvent]
    lanes = _lanes(events)
    # windows per lane, in the order they appeared, and when each closed (a final result)
    windows: dict[int, dict[tuple[int, int], int | None]] = {i: {} for i in lanes.values()}
    finals: list[tuple[int, OutputEvent]] = []
    for e in events:
        if type(e) is InputEvent:
            continue
        assert type(e) is OutputEvent or type(e) is LateDropEvent
        lane = lanes[_label(e.key)]
        known = windows[lane].setdefault((e.start, e.end), None)
        if type(e) is OutputEvent and e.final:
            finals.append((lane, e))
            if known is None:
                windows[lane][(e.start, e.end)] = max(e.stream_time, e.end)
    # a row per window, packed so that windows of a row do not overlap
    rows: dict[int, dict[tuple[int, int], int]] = {}
    for lane, spans in windows.items():
        ends: list[float] = []
        rows[lane] = {}
        for start, end in sorted(spans):
            reach = max(end, spans[(start, end)] or end)
            row = next((r for r, last in enumerate(ends) if last <= start), len(ends))
            if row == len(ends):
                ends.append(reach)
            else:
                ends[row] = reach
            rows[lane][(start, end)] = row
    times = [t for e in inputs for t in (e.timestamp, e.stream_time) if t >= 0]
    times += [t for spans in windows.values() for (s, e_) in spans for t in (s, e_)]
    times += [c for spans in windows.values() for c in spans.values() if c is not None]
    times += [e.timestamp for e in drops]
    lo, hi = (min(times), max(times)) if times else (0, 1)
    if hi == lo:
        hi = lo + 1
    pad = (hi - lo) * 0.04
    lo_x, hi_x = lo - pad, hi + pad

    def x(t: float) -> float:
        return LEFT + (t - lo_x) / (hi_x - lo_x) * PLOT_W

    shapes: list[Shape] = []
    width = LEFT + PLOT_W + RIGHT
    title = ", ".join(_count(n, what) for n, what in (
        (len(inputs), "record"), (len(lanes), "key"), (len(finals), "final result"),
        (len(drops), "late drop")))
    shapes.append(("text", 12, 22, f"Timeline: {title}", 14, "start",
                   (("fill", INK), ("weight", "bold"))))
    # lanes
    y = TOP
    lane_top: dict[int, float] = {}
    lane_height: dict[int, float] = {}
    for name, lane in lanes.items():
        n_rows = max(rows[lane].values(), default=-1) + 1
        height = 6 + n_rows * SUB + RECORD_ROW
        lane_top[lane], lane_height[lane] = y, height
        shapes.append(("rect", LEFT, y, PLOT_W, height,
                       (("fill", "#f7f7f7" if lane % 2 == 0 else "#ffffff"),)))
        shapes.append(("text", LEFT - 8, y + height / 2 + 4, name, 12, "end",
                       (("class", "lane"), ("fill", INK))))
        y += height
    lanes_bottom = y
    strip_top = lanes_bottom + 34
    n = len(inputs)
    pitch = max(2.0, min(14.0, 280 / n)) if n else 14.0
    strip_bottom = strip_top + max(n, 1) * pitch
    ticks = _ticks(lo_x, hi_x)
    for t in ticks:  # grid and axis labels, above the lanes and above the strip
        shapes.append(("line", x(t), TOP, x(t), lanes_bottom, (("stroke", "#dddddd"),)))
        shapes.append(("line", x(t), strip_top, x(t), strip_bottom, (("stroke", "#dddddd"),)))
        for label_y in (TOP - 6, strip_top - 6):
            shapes.append(("text", x(t), label_y, str(t), 10, "middle", (("fill", GREY),)))
    shapes.append(("text", LEFT + PLOT_W, TOP - 22, "event time (ms)", 10, "end",
                   (("fill", GREY),)))
    # windows, their closes, late drops and final results
    for lane, spans in windows.items():
        for (start, end), close in spans.items():
            row_y = lane_top[lane] + 6 + rows[lane][(start, end)] * SUB
            mid = row_y + (SUB - 4) / 2
            shapes.append(("rect", x(start), row_y, max(1.0, x(end) - x(start)), SUB - 4,
                           (("class", "window"), ("fill", BLUE), ("opacity", "0.12"),
                            ("stroke", BLUE), ("width", "0.5"))))
            if close is not None:
                if close > end:
                    shapes.append(("line", x(end), mid, x(close), mid,
                                   (("stroke", INK), ("width", "1"), ("dash", "3,2"))))
                shapes.append(("line", x(close), row_y - 1, x(close), row_y + SUB - 3,
                               (("class", "close"), ("stroke", INK), ("width", "2"))))
    for e in drops:
        lane = lanes[_label(e.key)]
        row_y = lane_top[lane] + 6 + rows[lane][(e.start, e.end)] * SUB
        shapes.append(_cross(x(e.timestamp), row_y + (SUB - 4) / 2, 5))
    for lane, f in finals:
        row_y = lane_top[lane] + 6 + rows[lane][(f.start, f.end)] * SUB
        cx, cy = x(f.end), row_y + (SUB - 4) / 2
        shapes.append(_diamond(cx, cy, 6))
        shapes.append(("text", cx + 8, cy - 3, _label(f.value, 16), 10, "start",
                       (("fill", GREEN), ("weight", "bold"))))
    # records
    stream_time = -1
    for e in inputs:
        lane = lanes[_label(e.key)]
        cy = lane_top[lane] + lane_height[lane] - RECORD_ROW + 11
        in_order = e.timestamp >= stream_time
        shapes.append(_record(x(e.timestamp), cy, in_order))
        shapes.append(("text", x(e.timestamp), cy + 17, f"#{e.arrival}", 9, "middle",
                       (("fill", GREY),)))
        stream_time = max(stream_time, e.stream_time)
    # stream time, stepping down the arrival order
    shapes.append(("text", LEFT - 8, strip_top - 6, "arrival", 10, "end", (("fill", GREY),)))
    shapes.append(("rect", LEFT, strip_top, PLOT_W, strip_bottom - strip_top,
                   (("fill", "none"), ("stroke", "#cccccc"))))
    points: list[tuple[float, float]] = []
    for i, e in enumerate(inputs):
        top = strip_top + i * pitch
        if e.stream_time >= 0:
            points += [(x(e.stream_time), top), (x(e.stream_time), top + pitch)]
        shapes.append(("circle", x(e.timestamp), top + pitch / 2, min(3.0, pitch / 2),
                       (("class", "arrival"), ("fill", BLUE))))
        if pitch >= 10:
            shapes.append(("text", LEFT - 8, top + pitch / 2 + 3, f"#{e.arrival}", 9, "end",
                           (("fill", GREY),)))
    if points:
        shapes.append(("poly", tuple(points), False,
                       (("class", "stream-time"), ("fill", "none"), ("stroke", RED),
                        ("width", "1.5"))))
    # legend
    ly = strip_bottom + 26
    items: list[tuple[list[Shape], str]] = [
        ([_record(0, 0, True)], "record"),
        ([_record(0, 0, False)], "out-of-order record"),
        ([_cross(0, 0, 5)], "late drop"),
        ([("rect", -9, -6, 18, 12, (("fill", BLUE), ("opacity", "0.12"), ("stroke", BLUE),
                                     ("width", "0.5")))], "window"),
        ([("line", 0, -7, 0, 7, (("stroke", INK), ("width", "2")))], "closed (stream time)"),
        ([_diamond(0, 0, 6)], "final result"),
        ([("line", -9, 0, 9, 0, (("stroke", RED), ("width", "1.5")))], "stream time"),
    ]
    lx = 12.0
    for glyphs, text in items:
        shapes.extend(_moved(glyph, lx + 9, ly) for glyph in glyphs)
        shapes.append(("text", lx + 24, ly + 4, text, 11, "start", (("fill", INK),)))
        lx += 32 + 6.5 * len(text)
    return width, int(ly + 20), shapes


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _record(cx: float, cy: float, in_order: bool) -> Shape:
    fill = BLUE if in_order else "#ffffff"
    return ("circle", cx, cy, 5,
            (("class", "record"), ("fill", fill), ("stroke", BLUE), ("width", "1.5")))


def _cross(cx: float, cy: float, r: float) -> Shape:
    points = ((cx - r, cy - r), (cx + r, cy + r), (cx, cy), (cx + r, cy - r), (cx - r, cy + r))
    return ("poly", points, False,
            (("class", "late"), ("fill", "none"), ("stroke", RED), ("width", "2.5")))


def _diamond(cx: float, cy: float, r: float) -> Shape:
    return ("poly", ((cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)), True,
            (("class", "final"), ("fill", GREEN), ("stroke", "#ffffff"), ("width", "1")))


def _moved(shape: Shape, dx: float, dy: float) -> Shape:
    """A legend glyph: ``shape`` moved, without its class."""
    shape = (*shape[:-1], tuple(item for item in shape[-1] if item[0] != "class"))
    kind = shape[0]
    if kind in ("rect", "circle"):
        return (kind, shape[1] + dx, shape[2] + dy, *shape[3:])
    if kind == "line":
        _, x1, y1, x2, y2, style = shape
        return (kind, x1 + dx, y1 + dy, x2 + dx, y2 + dy, style)
    _, points, closed, style = shape
    return (kind, tuple((px + dx, py + dy) for px, py in points), closed, style)


# -- SVG ---------------------------------------------------------------------------------------

def _n(v: float) -> str:
    """A coordinate: two decimals at most, the same for the same value."""
    text = f"{v:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


_SVG_STYLE = {"class": "class", "fill": "fill", "stroke": "stroke", "width": "stroke-width",
              "opacity": "fill-opacity", "dash": "stroke-dasharray", "weight": "font-weight"}


def _attrs(style: tuple[tuple[str, str], ...]) -> str:
    return "".join(f' {_SVG_STYLE[name]}="{escape(value)}"' for name, value in style)


def _svg(scene: tuple[int, int, list[Shape]]) -> str:
    width, height, shapes = scene
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    for shape in shapes:
        kind = shape[0]
        if kind == "rect":
            _, x, y, w, h, style = shape
            out.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}"'
                       f'{_attrs(style)}/>')
        elif kind == "line":
            _, x1, y1, x2, y2, style = shape
            out.append(f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}"'
                       f'{_attrs(style)}/>')
        elif kind == "poly":
            _, points, closed, style = shape
            tag = "polygon" if closed else "polyline"
            text = " ".join(f"{_n(px)},{_n(py)}" for px, py in points)
            out.append(f'<{tag} points="{text}"{_attrs(style)}/>')
        elif kind == "circle":
            _, cx, cy, r, style = shape
            out.append(f'<circle cx="{_n(cx)}" cy="{_n(cy)}" r="{_n(r)}"{_attrs(style)}/>')
        else:
            _, x, y, text, size, anchor, style = shape
            out.append(f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" '
                       f'text-anchor="{anchor}"{_attrs(style)}>{escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# -- PNG ---------------------------------------------------------------------------------------

def _png(scene: tuple[int, int, list[Shape]], path: str) -> None:
    """Draw the same shapes with matplotlib (pixels as SVG's, y downwards)."""
    try:
        figure_module = importlib.import_module("matplotlib.figure")
        patches = importlib.import_module("matplotlib.patches")
        backend = importlib.import_module("matplotlib.backends.backend_agg")
    except ImportError as exc:
        raise ImportError("Timeline.save() of a .png needs matplotlib: install the 'plot' "
                          "extra (pip install 'suppress-topology[plot]'), or save a .svg"
                          ) from exc
    width, height, shapes = scene
    fig = figure_module.Figure(figsize=(width / 100, height / 100), dpi=100)
    backend.FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.axis("off")
    pt = 0.75  # points per pixel at 100 dpi... as SVG's 96 px per inch read it

    def kw(style: tuple[tuple[str, str], ...]) -> dict[str, Any]:
        s = dict(style)
        fill = s.get("fill", "none")
        out: dict[str, Any] = {"facecolor": fill, "edgecolor": s.get("stroke", "none"),
                               "linewidth": float(s.get("width", "1")) * pt}
        if "opacity" in s and fill != "none":
            colors = importlib.import_module("matplotlib.colors")
            out["facecolor"] = colors.to_rgba(fill, float(s["opacity"]))
        return out

    for shape in shapes:
        kind = shape[0]
        if kind == "rect":
            _, x, y, w, h, style = shape
            ax.add_patch(patches.Rectangle((x, y), w, h, **kw(style)))
        elif kind == "circle":
            _, cx, cy, r, style = shape
            ax.add_patch(patches.Circle((cx, cy), r, **kw(style)))
        elif kind == "line" or (kind == "poly" and not shape[2]):
            if kind == "line":
                _, x1, y1, x2, y2, style = shape
                xs, ys = [x1, x2], [y1, y2]
            else:
                _, points, _, style = shape
                xs, ys = [p[0] for p in points], [p[1] for p in points]
            s = dict(style)
            dash = (0, tuple(float(d) for d in s["dash"].split(","))) if "dash" in s else "-"
            ax.plot(xs, ys, color=s.get("stroke", INK), linestyle=dash,
                    linewidth=float(s.get("width", "1")) * pt)
        elif kind == "poly":
            _, points, _, style = shape
            ax.add_patch(patches.Polygon(list(points), closed=True, **kw(style)))
        else:
            _, x, y, text, size, anchor, style = shape
            s = dict(style)
            ax.text(x, y, text, fontsize=size * pt, color=s.get("fill", INK),
                    ha={"start": "left", "end": "right"}.get(anchor, "center"),
                    va="baseline", fontweight=s.get("weight", "normal"))
    fig.savefig(path, dpi=100)
