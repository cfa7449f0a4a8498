"""The console's charts: a series over time with its axes (``SeriesChart``), and
counts by name as text bars (``NameBars``).

Both are told what to draw (``show``) and draw nothing else, so a screen's
handler owns the data. Their marks are characters, never colour alone: under
NO_COLOR, or on a terminal without colour, every bar and line is still there.

A series chart draws what shows its differences in the room it has: bars where
each gets columns of its own with a gap beside it; a line where bars would run
together into one block; a scale that starts near the lowest value (said in
the title) where one from 0 would draw every value at one height; and its
numbers as text (lowest, highest, last; or each one, for a few) where there is
no room for a chart, or too few values for one to say anything.

This module imports plotext (a tenth of a second): the screens that chart are
imported when they are first opened, never at the console's start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import plotext._utility as plotext_utility
from rich.text import Text
from textual.app import RenderResult
from textual.widget import Widget
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from ...text.fmt import human

# plotext drops duplicate ticks through a set, so which of two overlapping tick
# labels it draws last depended on the interpreter's hash seed: one chart came
# out two ways in two runs. The same, in order (its own comment's alternative).
plotext_utility.no_duplicates = lambda data: list(dict.fromkeys(data))

# Tick labels at most this many along the x axis: more overlap at 80 columns.
TICKS = 5
# One mark per series, in order: told apart without colour (NO_COLOR).
MARKS = ("█", "▒", "•")
LINE_MARKS = ("hd", "x", "•")
# Columns a bar needs, its gap included: with fewer, plotext's rounding runs
# neighbouring bars together.
BAR_COLUMNS = 4
# Smaller than this (the box's inside), a chart says its numbers instead.
MIN_WIDTH, MIN_HEIGHT = 24, 6
# Fewer values than this say more as numbers than as a chart.
MIN_POINTS = 3


def _ticks(labels: Sequence[str]) -> tuple[list[float], list[str]]:
    if not labels:
        return [], []
    step = max(1, (len(labels) - 1) // (TICKS - 1)) if len(labels) > 1 else 1
    at = list(range(0, len(labels), step))
    return [float(i) for i in at], [labels[i] for i in at]


def _tick(y: float, *, bytes_axis: bool) -> str:
    if bytes_axis:
        return human(int(y))
    if y >= 10_000:
        return f"{y / 1000:,.0f}k"
    return f"{y:,.0f}" if y >= 10 else f"{y:.2g}"


@dataclass(frozen=True)
class _Drawing:
    labels: Sequence[str]
    series: Sequence[tuple[str, Sequence[float | None]]]
    lines: bool
    empty: str

    def points(self) -> list[list[tuple[int, float]]]:
        """Each series' (x, value) where it has one."""
        return [[(x, float(v)) for x, v in enumerate(vs) if v is not None] for _, vs in self.series]


@dataclass(frozen=True)
class _Layout:
    """How a drawing fits the room it has: ``numbers`` (no chart), else bars or
    a line, on a scale from ``low`` (0, or near the lowest value) to ``high``."""

    numbers: bool
    lines: bool
    low: float
    high: float

    @property
    def zoomed(self) -> bool:
        return self.low > 0


def _layout(d: _Drawing, width: int, height: int, *, bytes_axis: bool) -> _Layout:
    values = [v for pts in d.points() for _, v in pts]
    lo, hi = min(values), max(values)
    if width < MIN_WIDTH or height < MIN_HEIGHT or max(map(len, d.points())) < MIN_POINTS:
        return _Layout(numbers=True, lines=d.lines, low=0.0, high=hi)
    # From 0, values within a third of each other share most of the chart's
    # height: 121 and 138 rows drew as one. Near the lowest, they are apart.
    zoom = lo > 0 and hi - lo < hi / 3
    axis = max(len(_tick(y, bytes_axis=bytes_axis)) for y in (lo, hi)) + 3
    crowded = len(d.labels) * BAR_COLUMNS > width - axis
    # A bar stands on 0: a scale from elsewhere, or bars that run together,
    # draw a line.
    lines = d.lines or zoom or crowded
    if not zoom:
        return _Layout(numbers=False, lines=lines, low=0.0, high=hi)
    pad = (hi - lo) / 8 or hi / 20
    return _Layout(numbers=False, lines=True, low=max(lo - pad, 0.0), high=hi + pad)


class SeriesChart(PlotextPlot):
    """One or two series over the same labels (days, months, passes).

    The figure is made anew at each render from what was shown: plotext keeps
    state from one build to the next (its tick places moved with how many
    renders came before), so the picture is a function of the data and the
    size alone."""

    # The numbers, when drawn instead of a chart, centred as its title is (a
    # chart's own lines fill the width: centring them moves nothing).
    DEFAULT_CSS = """
    SeriesChart {
        text-align: center;
    }
    """

    def __init__(self, title: str, *, id: str | None = None, bytes_axis: bool = False) -> None:
        super().__init__(id=id)
        self.title = title
        self.bytes_axis = bytes_axis
        self.drawing = _Drawing([], [], lines=False, empty="reading…")

    def show(
        self,
        labels: Sequence[str],
        series: Sequence[tuple[str, Sequence[float | None]]],
        *,
        lines: bool = False,
        empty: str = "nothing yet",
    ) -> None:
        """``series``: (name, one value per label; None where there is none),
        the later drawn over the earlier, each with its own mark (no colour
        needed to tell them apart); ``lines``: a line even where bars would
        fit; ``empty``: what the title says without any."""
        self.drawing = _Drawing(list(labels), [(n, list(v)) for n, v in series], lines, empty)
        self.refresh()

    def render(self) -> RenderResult:
        d = self.drawing
        self._plot = Plot()
        if not any(self.drawing.points()):
            self.plt.title(f"{self.title}: {d.empty}")
            return super().render()
        fit = _layout(
            d, self.content_size.width, self.content_size.height, bytes_axis=self.bytes_axis
        )
        if fit.numbers:
            return self._numbers(d)
        self._draw(self.plt, d, fit)
        return super().render()

    def _value(self, v: float) -> str:
        return _tick(v, bytes_axis=self.bytes_axis)

    def _numbers(self, d: _Drawing) -> Text:
        """The values themselves, under the title as a chart has it: each one
        when there are a few, else the lowest, the highest and the last, with
        their labels."""
        lines = [self.title]
        for (name, _), pts in zip(d.series, d.points(), strict=True):
            if not pts:
                continue
            if len(pts) <= MIN_POINTS:
                shown = [f"{d.labels[x]}: {self._value(v)}" for x, v in pts]
            else:
                lo, hi = min(pts, key=lambda p: p[1]), max(pts, key=lambda p: p[1])
                shown = [
                    f"lowest {self._value(lo[1])} ({d.labels[lo[0]]})",
                    f"highest {self._value(hi[1])} ({d.labels[hi[0]]})",
                    f"last {self._value(pts[-1][1])} ({d.labels[pts[-1][0]]})",
                ]
            lines.append((f"{name}: " if len(d.series) > 1 else "") + " · ".join(shown))
        return Text("\n".join(lines), justify="center")

    def _draw(self, plt: Plot, d: _Drawing, fit: _Layout) -> None:
        scale = f" (scale from {self._value(fit.low)})" if fit.zoomed else ""
        plt.title(self.title + scale)
        marks = LINE_MARKS if fit.lines else MARKS
        for (name, _), pts, mark in zip(d.series, d.points(), marks, strict=False):
            # A bar of 0 would still be drawn as a mark on the axis: none is.
            got = pts if fit.lines else [(x, v) for x, v in pts if v != 0]
            if not got:
                continue
            xs, ys = [x for x, _ in got], [v for _, v in got]
            label = name if len(d.series) > 1 else None
            if fit.lines:
                plt.plot(xs, ys, label=label, marker=mark)
            else:
                plt.bar(xs, ys, label=label, marker=mark, width=0.6)
        at, shown = _ticks(d.labels)
        plt.xticks(at, shown)
        # Every label has its place, with values or not: one day's bar is one
        # day wide, not the whole chart.
        plt.xlim(-0.5, len(d.labels) - 0.5)
        plt.ylim(fit.low, fit.high)
        ys = [fit.low + (fit.high - fit.low) * i / 3 for i in range(4)]
        plt.yticks(ys, [self._value(y) for y in ys])


class NameBars(Widget):
    """Counts by name, largest first, as bars of ``█`` scaled to the largest and
    to the widget's width: at most ``limit`` lines, the names past them summed
    on the last."""

    DEFAULT_CSS = """
    NameBars {
        height: 1fr;
    }
    """

    def __init__(self, title: str = "", *, id: str | None = None, limit: int = 8) -> None:
        super().__init__(id=id)
        self.title, self.limit = title, limit
        self.counts: list[tuple[str, int]] = []
        self.fmt = "count"
        self.empty = "nothing yet"

    def show(
        self, counts: Sequence[tuple[str, int]], fmt: str = "count", *, empty: str = "nothing yet"
    ) -> None:
        """``empty``: what is said without any count."""
        self.counts, self.fmt, self.empty = list(counts), fmt, empty
        self.refresh()

    def _value(self, n: int) -> str:
        return human(n) if self.fmt == "bytes" else f"{n:,}"

    def render(self) -> Text:
        shown = self.counts[: self.limit - 1] if len(self.counts) > self.limit else self.counts
        rest = self.counts[len(shown) :]
        text = Text(f"{self.title}\n", style="bold") if self.title else Text()
        if not shown:
            return text.append(self.empty)
        # Names give way to the bars on a narrow screen (cut with "…").
        width = self.content_size.width
        name_w = max(6, min(24, max(len(name) for name, _ in shown), width * 2 // 5))
        value_w = max(len(self._value(n)) for _, n in shown)
        room = max(1, width - name_w - value_w - 2)
        top = max(n for _, n in shown) or 1
        for i, (name, n) in enumerate(shown):
            label = name if len(name) <= name_w else name[: name_w - 1] + "…"
            bar = "█" * max(1 if n else 0, round(room * n / top))
            text.append(f"{label:<{name_w}} ")
            text.append(f"{bar:<{room}}", style="bold")
            text.append(f" {self._value(n):>{value_w}}")
            if i < len(shown) - 1:
                text.append("\n")
        if rest:
            text.append(f"\nand {len(rest)} more: {self._value(sum(n for _, n in rest))}")
        return text
