"""Every field of the console takes its keys in the order they were typed, at
any speed: keys posted in one burst (as a paste or tmux send-keys delivers
them) leave exactly what was typed, backspaces and all. tests/console/
test_tmux.py types the same through a real terminal."""

from __future__ import annotations

import ast
from pathlib import Path

from textual import events
from textual.widgets import Input

from coldkeep.core.base.config import Settings
from coldkeep.tui.console.screens.events import EventsScreen
from coldkeep.tui.console.screens.restore import RestoreScreen
from coldkeep.tui.console.widgets.fields import Field

from consolekit import archive_all, make_app, press_to, settle

CONSOLE = Path(__file__).resolve().parents[2] / "tui" / "console"
# The key names Textual gives these characters (a binding is looked up by name).
NAMES = {
    "-": "minus",
    ":": "colon",
    " ": "space",
    "/": "slash",
    "*": "asterisk",
    "(": "left_parenthesis",
    ")": "right_parenthesis",
    "'": "apostrophe",
    "=": "equals_sign",
}
CONTROL = {"backspace": "\x7f", "enter": "\r"}


def burst(*parts: str | list[str]) -> list[events.Key]:
    """Key events for ``parts``: a string is typed character by character, a
    list holds key names (backspace, home, end, enter)."""
    keys: list[events.Key] = []
    for part in parts:
        if isinstance(part, str):
            keys += [events.Key(NAMES.get(c, c), c) for c in part]
        else:
            keys += [events.Key(k, CONTROL.get(k)) for k in part]
    return keys


async def test_a_burst_of_keys_lands_in_order_in_the_filter_and_the_sql_box(
    settings: Settings,
) -> None:
    app = make_app(settings)
    async with app.run_test(size=(120, 36)) as pilot:
        await archive_all(app, pilot)
        browser = await press_to(app, pilot, RestoreScreen, "r")
        # Every key posted before the first is handled: none waits for another.
        for key in burst("zzzzunit-0003", ["backspace"] * 20, "unit:unit-0003"):
            app.post_message(key)
        await settle(pilot)
        assert browser.query_one("#restore-filter", Input).value == "unit:unit-0003"
        for key in burst("logs/zzz", ["home"], "unit:unit-0004 ", ["end"] + ["backspace"] * 3):
            app.post_message(key)
        await settle(pilot)
        # Home, then end, while the characters before them are still arriving.
        assert browser.query_one("#restore-filter", Input).value == (
            "unit:unit-0004 unit:unit-0003logs/"
        )
        await pilot.press("escape")
        await settle(pilot)

        events_screen = await press_to(app, pilot, EventsScreen, "E", "s")
        typed = burst(
            "SELECT count(*) AS n FROM eventz",
            ["backspace"],
            "s WHERE kind = 'zz'",
            ["backspace"] * 4,
            "'ci_completed'",
            ["enter"],
        )
        for key in typed:
            app.post_message(key)
        await settle(pilot)
        assert events_screen.sql == "SELECT count(*) AS n FROM events WHERE kind = 'ci_completed'"


def test_every_text_field_of_the_console_is_a_field() -> None:
    """A plain Input would let its editing keys be overtaken again: every field
    constructed or subclassed under tui/console is a ``Field``."""
    plain = []
    for source in sorted(CONSOLE.rglob("*.py")):
        if source.name == "fields.py":
            continue
        for node in ast.walk(ast.parse(source.read_text())):
            named: list[ast.expr] = []
            if isinstance(node, ast.Call):
                named = [node.func]  # Input(...)
            elif isinstance(node, ast.ClassDef):
                named = node.bases  # class X(Input)
            if any(isinstance(n, ast.Name) and n.id == "Input" for n in named):
                assert isinstance(node, ast.Call | ast.ClassDef)
                plain.append(f"{source.relative_to(CONSOLE)}:{node.lineno}")
    assert not plain, f"plain Inputs (make them Fields): {plain}"
    assert issubclass(Field, Input)
