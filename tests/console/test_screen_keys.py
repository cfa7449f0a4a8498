"""Each screen's keys, from its own registry: ``?`` over a screen lists what
that screen's keys do there (never the main screen's), every binding of a
screen is in its help, and tab never hands the Events screen's fields over
with their text selected for one key to wipe."""

from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.widgets import Input

from coldkeep.core.base.config import Settings
from coldkeep.tui.console.fleet.events import FleetEventsScreen
from coldkeep.tui.console.screens import (
    HelpScreen,
    KeyedScreen,
    PagerScreen,
    RestoreScreen,
    VersionsScreen,
)
from coldkeep.tui.console.screens.events import EventsScreen
from coldkeep.tui.console.screens.find import FindScreen
from coldkeep.tui.console.screens.holds import HoldsScreen
from coldkeep.tui.console.screens.trends import TrendsScreen

from consolekit import archive_all, current_screen, make_app, press_to, settle

SCREENS: list[type[KeyedScreen]] = [
    RestoreScreen,
    VersionsScreen,
    PagerScreen,
    FindScreen,
    HoldsScreen,
    EventsScreen,
    TrendsScreen,
    FleetEventsScreen,
]


def listed(help_screen: Any) -> dict[str, str]:
    """What a help screen lists: key label -> action label."""
    assert isinstance(help_screen, HelpScreen)
    return {a.key_label: a.label for a in help_screen.actions}


def test_every_screen_binds_exactly_the_keys_its_help_lists() -> None:
    assert set(KeyedScreen.__subclasses__()) == set(SCREENS)
    for screen in SCREENS:
        bound = {
            (key, b.action)
            for b in screen.BINDINGS
            if isinstance(b, Binding)
            for key in b.key.split(",")
        }
        helped = {(key, a.name) for a in screen.KEYS for key in a.keys.split(",")}
        assert bound == helped, screen.__name__
        assert screen.HELP_TITLE, screen.__name__


async def test_help_over_a_screen_lists_that_screens_keys(settings: Settings) -> None:
    app = make_app(settings)
    async with app.run_test(size=(120, 36)) as pilot:
        await archive_all(app, pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert listed(current_screen(app))["v"] == "Verify"  # the main screen's v
        await pilot.press("escape", "r")
        await settle(pilot)
        await pilot.press("down")  # from the filter to the table: ? is a key there
        await settle(pilot)
        assert isinstance(current_screen(app), RestoreScreen)
        # The browser, a file's versions (H), and one version in the pager (v).
        for key, screen, own in (
            ("", RestoreScreen, {"v": "View", "H": "Versions", "/": "Filter"}),
            ("H", VersionsScreen, {"v": "View", "r": "Restore"}),
            ("v", PagerScreen, {"esc / q": "Close", "/": "Search", "n": "Next"}),
        ):
            if key:
                await pilot.press(key)
                await settle(pilot)
            assert isinstance(current_screen(app), screen)
            await pilot.press("question_mark")
            await settle(pilot)
            keys = listed(current_screen(app))
            assert own.items() <= keys.items(), keys
            assert "Verify" not in keys.values() and "Pass" not in keys.values()
            assert keys["? / f1"] == "Help"
            # q closes the pager; elsewhere it still quits, and help says so.
            assert ("q" in keys) is (screen is not PagerScreen)
            await pilot.press("escape")
            await settle(pilot)
    # Read-only, the browser's help says why r does not restore (and why t does
    # not thaw: the demo's remote is not cold).
    app = make_app(settings, read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        shown = await press_to(app, pilot, HelpScreen, "down", "f1")
        assert shown.unavailable == {
            "restore": "the console is read-only (--read-only)",
            "thaw": "the remote's storage_class is not cold: nothing to thaw",
        }


async def test_tab_keeps_the_events_fields_text(settings: Settings) -> None:
    """From the rows, tab goes through the SQL box and wraps to the range: each
    field keeps its text, and what is typed goes after it."""
    app = make_app(settings)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        screen = await press_to(app, pilot, EventsScreen, "E")
        start = screen.query_one("#events-from", Input)
        before = start.value
        assert before
        for _ in range(5):
            await pilot.press("tab")
            if app.focused is start:
                break
        assert app.focused is start, app.focused
        assert start.selection.is_empty
        await pilot.press("x")
        assert start.value == before + "x"
