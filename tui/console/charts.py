"""The console's charts: a series over time as plotext bars or lines with their
axes (``SeriesChart``), and counts by name as text bars (``NameBars``).

Both are told what to draw (``show``) and draw nothing else, so a screen's
handler owns the data. Their marks are characters, never colour alone: under
NO_COLOR, or on a terminal without colour, every bar is still there.

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

from ..text.fmt import human

# plotext drops duplicate ticks through a set, so which of two overlapping tick
# labels it draws last depended on the interpreter's hash seed: one chart came
# out two ways in two runs. The same, in order (its own comment's alternative).
plotext_utility.no_duplicates = lambda data: list(dict.fromkeys(data))

# Tick labels at most this many along the x axis: more overlap at 80 columns.
TICKS = 5
# One mark per series, in order: told apart without colour (NO_COLOR).
MARKS = ("█", "▒", "•")


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


class SeriesChart(PlotextPlot):
    """One or two series over the same labels (days, months, passes).

    The figure is made anew at each render from what was shown: plotext keeps
    state from one build to the next (its tick places moved with how many
    renders came before), so the picture is a function of the data and the
    size alone."""

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
        needed to tell them apart); ``empty``: what the title says without any."""
        self.drawing = _Drawing(list(labels), [(n, list(v)) for n, v in series], lines, empty)
        self.refresh()

    def render(self) -> RenderResult:
        self._plot = Plot()
        self._draw(self.plt, self.drawing)
        return super().render()

    def _draw(self, plt: Plot, d: _Drawing) -> None:
        if all(v is None for _, values in d.series for v in values):
            plt.title(f"{self.title}: {d.empty}")
            return
        plt.title(self.title)
        xs = list(range(len(d.labels)))
        for (name, values), mark in zip(d.series, MARKS, strict=False):
            # A bar of 0 would still be drawn as a mark on the axis: none is.
            got = [
                (x, float(v))
                for x, v in zip(xs, values, strict=True)
                if v is not None and (d.lines or v != 0)
            ]
            if not got:
                continue
            label = name if len(d.series) > 1 else None
            if d.lines:
                plt.plot([x for x, _ in got], [v for _, v in got], label=label, marker=mark)
            else:
                plt.bar(
                    [x for x, _ in got], [v for _, v in got], label=label, marker=mark, width=0.6
                )
        at, shown = _ticks(d.labels)
        plt.xticks(at, shown)
        # Every label has its place, with values or not: one day's bar is one
        # day wide, not the whole chart.
        plt.xlim(-0.5, len(d.labels) - 0.5)
        top = max((v for _, vs in d.series for v in vs if v is not None), default=0.0)
        if top > 0:
            ys = [top * i / 3 for i in range(4)]
            plt.yticks(ys, [_tick(y, bytes_axis=self.bytes_axis) for y in ys])


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

    def show(self, counts: Sequence[tuple[str, int]], fmt: str = "count") -> None:
        self.counts, self.fmt = list(counts), fmt
        self.refresh()

    def _value(self, n: int) -> str:
        return human(n) if self.fmt == "bytes" else f"{n:,}"

    def render(self) -> Text:
        shown = self.counts[: self.limit - 1] if len(self.counts) > self.limit else self.counts
        rest = self.counts[len(shown) :]
        text = Text(f"{self.title}\n", style="bold") if self.title else Text()
        if not shown:
            return text.append("nothing yet")
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
