"""The Events screen after its own restore: the rows it put back are live rows,
counted once (Show again: the same total, none of them archived), with the
engine kept open across the restore as the screen keeps it."""

from __future__ import annotations

from textual.widgets import Input

from coldkeep.core.base.config import Settings
from coldkeep.tui.console.screens.events import EventsScreen

from consolekit import archive_all, make_app, press_to, settle


async def test_restored_rows_are_counted_once(settings: Settings) -> None:
    app = make_app(settings)
    async with app.run_test(size=(120, 36)) as pilot:
        await archive_all(app, pilot)
        screen = await press_to(app, pilot, EventsScreen, "E")
        screen.query_one("#events-from", Input).value = "2026-08-10"
        screen.query_one("#events-to", Input).value = "2026-08-11"
        screen.query_one("#events-kinds", Input).value = "webhook_event"
        screen.query_one("#events-kinds", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        assert screen.counts is not None
        total, archived = screen.counts.total, screen.counts.archived_rows
        assert total == archived > 0
        screen.query_one("#events-rows").focus()
        await pilot.press("R")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        screen.query_one("#events-kinds", Input).focus()
        await pilot.press("enter")  # Show again
        await settle(pilot)
        assert screen.counts is not None
        assert (screen.counts.total, screen.counts.archived_rows) == (total, 0)
