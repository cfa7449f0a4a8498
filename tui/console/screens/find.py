"""The find box: ``coldkeep find PATTERN`` over the whole manifest (or, in the
fleet view, over every site's snapshot), not just the rows a browser loaded.
A glob (``*``, ``?``, ``[``) is anchored at live_root; other text is a part of
the path. Every version of every path it matches is a row of a keyed table.

Attributes down: the screen gets ``search`` (the pattern to its rows, each with
its site: "" for this archive) and ``pick`` (what Enter, ``H`` and ``v`` do with
a row: the browser selects it, opens its versions or reads it). The search runs
in a worker that posts ``FindDone``; the handler owns the rows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, Literal

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Input, Static

from coldkeep.core.base.errors import explain
from coldkeep.core.files.find import Version

from ...operations.find import utc
from ...operations.spec import ConsoleAction
from ...text.fmt import human, plural, shown
from ..kit.actions import bindings
from ..widgets.fields import Field
from ..widgets.footer import FittedFooter
from ..widgets.tables import Cell, cursor_key, keyed_table, name_cell, sync_table
from .browse import SHOWN
from .help import KeyedScreen

# Each version found, with its site ("" for this archive), and a line about what
# was not searched (the fleet's sites without a snapshot); raises what find raises.
Search = Callable[[str], Awaitable[tuple[list[tuple[str, Version]], str]]]
Pick = Literal["select", "versions", "view"]
Picked = Callable[[str, Version, Pick], None]
HINT = "find in the whole archive: a glob ('**/*.log', anchored at live_root) or part of a path"


@dataclass
class FindDone(Message):
    pattern: str
    found: list[tuple[str, Version]]
    note: str = ""
    error: str | None = None


def find_key(site: str, v: Version) -> str:
    return f"{site}:{v.entry.id}"


class FindInput(Field):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "screen.focus_table", "Results", show=False),
    ]


class FindScreen(KeyedScreen):
    KEYS = (
        ConsoleAction("back", "escape", "Back", "Close the find box, back to where you were"),
        ConsoleAction(
            "pick('versions')", "H", "Versions", "Every version of the highlighted row's path"
        ),
        ConsoleAction(
            "pick('view')",
            "v",
            "View",
            "Read the highlighted version in the pager, without restoring it (sha256 checked)",
        ),
        ConsoleAction(
            "focus_find",
            "slash",
            "Find",
            "Back to the pattern, to find something else",
            at_once=True,
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(KEYS)]
    HELP_TITLE = "Find: keys"
    HELP_FOOT = (
        "Type a glob ('**/*.log', anchored at live_root) or part of a path, then enter; "
        "down leads to the table, where enter selects the row. esc closes this."
    )

    def __init__(
        self,
        search: Search,
        picked: Picked,
        *,
        sites: bool = False,
        offers: tuple[Pick, ...] = ("select", "versions", "view"),
        hint: str = HINT,
    ) -> None:
        super().__init__()
        self.search = search
        self.picked = picked
        self.sites = sites  # a Site column (the fleet view)
        self.offers = offers  # what the rows can do here (the fleet view: select only)
        self.hint = hint
        self.rows: dict[str, tuple[str, Version]] = {}

    def compose(self) -> ComposeResult:
        yield FindInput(placeholder=self.hint, id="find-input")
        yield Static("type a pattern, then enter", id="find-count")
        columns = [
            ("Path", "path"),
            ("Archived (UTC)", "archived"),
            ("Size", "size"),
            ("Location", "location"),
            ("Hold", "hold"),
            ("Id", "id"),
        ]
        yield keyed_table("find-table", [("Site", "site"), *columns] if self.sites else columns)
        yield FittedFooter()

    def on_mount(self) -> None:
        self.set_focus(self.query_one("#find-input", Input))

    def unavailable(self) -> dict[str, str]:
        return {
            f"pick({pick!r})": "not offered here"
            for pick in ("versions", "view")
            if pick not in self.offers
        }

    @work(exclusive=True, group="find", exit_on_error=False)
    async def run_find(self, pattern: str) -> None:
        try:
            found, note = await self.search(pattern)
        except Exception as err:
            known = explain(err)
            if known is None:
                raise  # a bug: the worker's error shows it whole
            self.post_message(FindDone(pattern, [], error=known[1]))
            return
        self.post_message(FindDone(pattern, found, note))

    @on(Input.Submitted, "#find-input")
    def _submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.query_one("#find-count", Static).update(f"finding {shown(event.value)!r}…")
            self.run_find(event.value.strip())

    def on_find_done(self, message: FindDone) -> None:
        count = self.query_one("#find-count", Static)
        if message.error is not None:
            self.rows = {}
            count.update(Text(shown(message.error), style="bold red"))
        else:
            paths = len({(s, v.entry.relpath) for s, v in message.found})
            first = f" (first {SHOWN} shown)" if len(message.found) > SHOWN else ""
            note = f"; {message.note}" if message.note else ""
            keys = ["enter selects it"]
            keys += ["H its versions"] if "versions" in self.offers else []
            keys += ["v reads it"] if "view" in self.offers else []
            count.update(
                f"{plural(len(message.found), 'version')} of {plural(paths, 'file')}{first}"
                f"{note}  ·  {', '.join(keys)}"
            )
            self.rows = {find_key(s, v): (s, v) for s, v in message.found[:SHOWN]}
        sync_table(
            self.query_one("#find-table", DataTable),
            {key: self._cells(site, v) for key, (site, v) in self.rows.items()},
        )
        if self.rows:
            self.action_focus_table()

    def _cells(self, site: str, v: Version) -> tuple[Cell, ...]:
        e = v.entry
        hold: Cell = f"held:{v.hold.id}" if v.hold is not None else ""
        cells: tuple[Cell, ...] = (
            name_cell(e.relpath),
            utc(e.archived_at),
            human(e.bytes),
            v.location,
            hold,
            e.id,
        )
        return (site, *cells) if self.sites else cells

    def current(self) -> tuple[str, Version] | None:
        key = cursor_key(self.query_one("#find-table", DataTable))
        return self.rows.get(key) if key else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "pick":
            # Enter in the field finds; the keys act on the table's rows.
            return parameters[0] in self.offers and not isinstance(self.focused, Input)
        if action == "focus_find":
            return not isinstance(self.focused, Input)
        return True

    @on(DataTable.RowSelected, "#find-table")
    def _selected(self) -> None:
        self.action_pick("select")

    def action_pick(self, what: Pick) -> None:
        found = self.current()
        if found is None:
            return
        if what == "select":
            self.dismiss(None)
        self.picked(found[0], found[1], what)

    def action_focus_table(self) -> None:
        self.set_focus(self.query_one("#find-table", DataTable))  # at once, as in restore.py

    def action_focus_find(self) -> None:
        self.set_focus(self.query_one("#find-input", Input))

    def action_back(self) -> None:
        self.dismiss(None)
