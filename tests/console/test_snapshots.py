"""Snapshots of what an operator sees: the main screen, the pass and ship
confirmations, the restore browser, the pager, a file's versions, help, the
Events screen after its own restore and the Trends screen, at 80x24 (an SSH
window) and 120x36. The clock, the demo data, the terminal size
and the cursor blink are pinned; after a deliberate change to the console,
review the diff and refresh with --snapshot-update."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import Settings
from coldkeep.core.events import checkpoint

from consolekit import NOW_MS, make_app, settle

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 36), id="120x36")]


def steady(*keys: str) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        for field in pilot.app.screen.query(Input):
            field.cursor_blink = False
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare: Any, settings: Settings, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(settings), terminal_size=size, run_before=steady())


@pytest.mark.parametrize("size", SIZES)
def test_pass_confirmation(snap_compare: Any, settings: Settings, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(settings), terminal_size=size, run_before=steady("p"))


@pytest.mark.parametrize("size", SIZES)
def test_ship_confirmation(
    snap_compare: Any, settings: Settings, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Archived before the console opens, so that there is something to ship (and
    # no pass toast or WAL sparkline, which depend on timing). The checkpoints
    # that pass ran are listed beside the dialog at the wall-clock time they ran
    # (core/events/checkpoint.py reads no injected clock): pinned here.
    monkeypatch.setattr(checkpoint, "now_ms", lambda: NOW_MS)
    done = asyncio.run(Archiver(settings, clock=lambda: NOW_MS).run_pass())
    assert done.status == "ok"
    # How many checkpoints a pass runs, and what each found, depends on its
    # timing (one or two, one in ten runs on a loaded machine): none is listed.
    with sqlite3.connect(settings.archive_root / "coldkeep.db") as db:
        db.execute("DELETE FROM checkpoints")
    assert snap_compare(make_app(settings), terminal_size=size, run_before=steady("u"))


@pytest.mark.parametrize("size", SIZES)
def test_restore_browser(snap_compare: Any, settings: Settings, size: tuple[int, int]) -> None:
    # A pass first (confirmed), so the manifest has entries to browse; the
    # first "down" leaves the filter for the table.
    run_before = steady("p", "y", "r", "down", "down", "space", "down")
    assert snap_compare(make_app(settings), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare: Any, settings: Settings, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(settings), terminal_size=size, run_before=steady("question_mark"))


# A pass first (confirmed), then the browser; "down" leaves the filter for the
# table, its first row highlighted (a JSONL file).
BROWSE_ONE = ("p", "y", "r", "down")


@pytest.mark.parametrize("size", SIZES)
def test_pager(snap_compare: Any, settings: Settings, size: tuple[int, int]) -> None:
    run_before = steady(*BROWSE_ONE, "v")
    assert snap_compare(make_app(settings), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_versions(snap_compare: Any, settings: Settings, size: tuple[int, int]) -> None:
    run_before = steady(*BROWSE_ONE, "H")
    assert snap_compare(make_app(settings), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_events_after_a_restore(
    snap_compare: Any, settings: Settings, size: tuple[int, int]
) -> None:
    # A pass, the Events screen, its rows restored (R, asked, y) and shown again.
    run_before = steady("p", "y", "E", "R", "y", "tab", "tab", "enter")
    assert snap_compare(make_app(settings), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_trends(snap_compare: Any, recorded: Settings, size: tuple[int, int]) -> None:
    """The newcomer's demo (weeks of passes and backlog samples) after a pass,
    90 days shown (d), without the pass's toast over the charts."""

    async def run_before(pilot: Pilot[Any]) -> None:
        await steady("p", "y", "T", "d")(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(make_app(recorded), terminal_size=size, run_before=run_before)
