"""Snapshots of the Events and Trends screens, after a pass on the demo site, at
80x24 (an SSH window) and 120x36, in colour and under NO_COLOR (where every
bar and mark must still be there: nothing is told by colour alone). The clock,
the data, the terminal size and the cursor blink are pinned, as in
test_snapshots.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual.pilot import Pilot

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import Settings
from coldkeep.core.events import checkpoint

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
    settings: Settings,
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
    done = asyncio.run(Archiver(settings, clock=lambda: NOW_MS).run_pass())
    assert done.status == "ok"
    app = make_app(settings)
    assert app.no_color is no_color
    assert snap_compare(app, terminal_size=size, run_before=_opened(key))
