"""Snapshots of the Events and Trends screens, after a pass on the demo site (with
its weeks of recorded passes and backlog samples), at
80x24 (an SSH window) and 120x36, in colour and under NO_COLOR (where every
bar and mark must still be there: nothing is told by colour alone). The clock,
the data, the terminal size and the cursor blink are pinned, as in
test_snapshots.py."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import Settings
from coldkeep.core.events import checkpoint
from coldkeep.tui.console.widgets.charts import SeriesChart

from consolekit import NOW_MS, make_app, settle

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 36), id="120x36")]
COLOURS = [pytest.param(False, id="colour"), pytest.param(True, id="no_color")]


def _opened(key: str) -> Any:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("no_color", COLOURS)
@pytest.mark.parametrize("key", ["E", "T"], ids=["events", "trends"])
def test_chart_screen(
    snap_compare: Any,
    recorded: Settings,
    size: tuple[int, int],
    no_color: bool,
    key: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")  # read (and taken) by the app when it is made
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    # The pass runs before the console opens: no toast, whose time on screen
    # depends on the machine. Its checkpoints are listed at the wall-clock time
    # they ran (core/events/checkpoint.py reads no injected clock): pinned.
    monkeypatch.setattr(checkpoint, "now_ms", lambda: NOW_MS)
    done = asyncio.run(Archiver(recorded, clock=lambda: NOW_MS).run_pass())
    assert done.status == "ok"
    app = make_app(recorded)
    assert app.no_color is no_color
    assert snap_compare(app, terminal_size=size, run_before=_opened(key))


class _Charted(App[None]):
    def compose(self) -> ComposeResult:
        yield SeriesChart("rows per day", id="chart")


async def test_a_chart_shows_the_differences_in_the_room_it_has() -> None:
    """90 days of 121 to 138 rows in 70 columns: no bars run together into a
    block at one height, but a line on a scale from near 121 (the title says
    so); one value alone, or a box too small, says its numbers."""
    app = _Charted()
    days = [f"d{i:02d}" for i in range(90)]
    async with app.run_test(size=(70, 14)) as pilot:
        chart = app.query_one(SeriesChart)
        chart.show(days, [("rows", [121 + 17 * (i % 2) for i in range(90)])])
        await pilot.pause()
        drawn = Text.from_ansi(str(chart.render())).plain
        assert "rows per day (scale from 119)" in drawn
        ticks = [int(t) for t in re.findall(r"^ *(\d+)┤", drawn, re.MULTILINE)]
        assert min(ticks) == 119 and max(ticks) > 138, ticks
        chart.show(["11-01"], [("ratio", [0.17])])
        await pilot.pause()
        assert str(chart.render()).splitlines() == ["rows per day", "11-01: 0.17"]
        await pilot.resize_terminal(20, 5)
        # The new size reaches the chart when the screen next lays out: a pause
        # or two, as the machine is loaded.
        for _ in range(100):
            if chart.size.width <= 20:
                break
            await pilot.pause()
        chart.show(days, [("rows", [121 + i for i in range(90)])])
        await pilot.pause()
        assert str(chart.render()).splitlines()[1:] == [
            "lowest 121 (d00) · highest 210 (d89) · last 210 (d89)"
        ]
