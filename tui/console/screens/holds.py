"""Legal holds: the ones in force, a form to place one, and releasing the
selected one (asked first). Read-only, only the list: no form, no release key.

Attributes down, messages up: the screen gets the archiver, the holds to show and
why nothing can be changed now (``blocked``: read-only) from the app. It places
and releases holds itself (workers that post ``HoldsRead`` to the screen, whose
handler shows the new list), and tells the app what changed (``HoldsChanged``:
its log line, and everything read again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Select, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.ops.holds import HoldChange
from coldkeep.core.store.connection import ManifestError
from coldkeep.core.store.legalholds import SCOPES, Hold, HoldError

from ...operations.spec import ConsoleAction
from ...text.fmt import day, parse_day
from ..kit.actions import bindings
from ..kit.messages import HoldsChanged
from ..widgets.fields import Field
from ..widgets.footer import FittedFooter
from ..widgets.tables import cursor_key, keyed_table, sync_table
from .confirm import ConfirmScreen
from .help import KeyedScreen

HELP = (
    "Nothing a hold covers is expired, and no ship drops its local copy, until it is "
    "released or its end date passes. A unit covers every file archived under it (the "
    "unit 'events': every event month); a path is a glob (events/YYYY-MM for a month); "
    "an entry is an id from the restore browser."
)


@dataclass
class HoldsRead(Message):
    """The holds in force, after one was placed (``placed``) or released."""

    holds: list[Hold]
    said: str
    placed: bool = False


class HoldsScreen(KeyedScreen):
    KEYS = (
        ConsoleAction(
            "app.pop_screen", "escape", "Back", "Close the holds, back to the main screen"
        ),
        ConsoleAction(
            "release", "d", "Release selected", "Release the highlighted hold (asks first)"
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(KEYS)]
    HELP_TITLE = "Legal holds: keys"
    HELP_FOOT = (
        f"{HELP} Tab moves between the table and the form; enter in the form places the "
        "hold. esc closes this."
    )

    def __init__(self, archiver: Archiver, holds: list[Hold], *, blocked: str | None) -> None:
        super().__init__()
        self.archiver = archiver
        self.holds = holds
        self.blocked = blocked

    def compose(self) -> ComposeResult:
        yield Static("Legal holds", id="holds-title")
        yield Static(HELP, id="holds-help")
        if self.blocked is None:
            with Horizontal(id="holds-form"):
                yield Select(
                    [(s, s) for s in SCOPES], value="unit", allow_blank=False, id="hold-scope"
                )
                yield Field(placeholder="unit, glob or entry id", id="hold-target")
                yield Field(placeholder="reason (required)", id="hold-reason")
                yield Field(placeholder="until YYYY-MM-DD (optional)", id="hold-until")
                yield Button("Place hold", id="hold-place")
        blocked = f"{self.blocked}: holds are listed, not placed or released"
        yield Static(blocked if self.blocked else "", id="holds-status")
        yield keyed_table(
            "holds-table",
            [
                ("Id", "id"),
                ("Covers", "covers"),
                ("Reason", "reason"),
                ("Until", "until"),
                ("Placed", "placed"),
            ],
        )
        yield FittedFooter()

    def on_mount(self) -> None:
        self.show(self.holds)

    def show(self, holds: list[Hold], said: str = "") -> None:
        self.holds = holds
        sync_table(
            self.query_one("#holds-table", DataTable),
            {
                str(h.id): (
                    h.id,
                    f"{h.scope} {h.target}",
                    h.reason,
                    "(until released)" if h.until is None else day(h.until),
                    f"{day(h.placed_at)} by {h.placed_by}",
                )
                for h in holds
            },
        )
        if said:
            self.query_one("#holds-status", Static).update(said)

    @on(Button.Pressed, "#hold-place")
    @on(Input.Submitted, "#holds-form Input")
    def _place(self) -> None:
        if self.blocked is not None:
            self.notify(f"Holds: {self.blocked}", severity="warning")
            return
        target = self.query_one("#hold-target", Input).value.strip()
        reason = self.query_one("#hold-reason", Input).value.strip()
        if not target or not reason:
            self.notify("a hold needs what it covers and a reason", severity="warning")
            return
        scope = self.query_one("#hold-scope", Select).value
        until = self.query_one("#hold-until", Input).value.strip()
        self.place(str(scope), target, reason, until)

    @work(exclusive=True, group="holds", exit_on_error=False)
    async def place(self, scope: str, target: str, reason: str, until: str) -> None:
        try:
            at = parse_day(until) if until else None
            change = await self.archiver.place_hold(scope, target, reason, at)
        except (HoldError, ManifestError, OSError, ValueError) as err:
            self.notify(str(err), title="holds", severity="error", markup=False)
            return
        self._bucket_said(change)
        said = f"placed {change.hold.describe()}"
        self.post_message(HoldsRead(await self.archiver.holds(), said, placed=True))

    @work(exclusive=True, group="holds", exit_on_error=False)
    async def release(self, hold_id: int) -> None:
        try:
            change = await self.archiver.release_hold(hold_id)
        except (HoldError, ManifestError, OSError) as err:
            self.notify(str(err), title="holds", severity="error", markup=False)
            return
        self._bucket_said(change)
        said = f"released {change.hold.describe()}"
        self.post_message(HoldsRead(await self.archiver.holds(), said))

    def _bucket_said(self, change: HoldChange) -> None:
        """What the bucket's legal holds could not be told (the hold stands)."""
        for problem in change.problems:
            self.notify(problem, title="holds: the bucket", severity="warning", markup=False)

    def on_holds_read(self, message: HoldsRead) -> None:
        if message.placed:  # the form is cleared for the next one
            for name in ("#hold-target", "#hold-reason", "#hold-until"):
                self.query_one(name, Input).value = ""
        self.show(message.holds, message.said)
        self.post_message(HoldsChanged("info" if message.placed else "warning", message.said))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # No release key where nothing can change (nor in the footer).
        return not (action == "release" and self.blocked is not None)

    def action_release(self) -> None:
        if self.blocked is not None:
            self.notify(f"Holds: {self.blocked}", severity="warning")
            return
        key = cursor_key(self.query_one("#holds-table", DataTable))
        if key is None:
            self.notify("no hold is selected")
            return
        hold = next((h for h in self.holds if str(h.id) == key), None)
        if hold is not None:
            self.confirm_release(hold)

    @work(exclusive=True, group="confirm")  # waits for the operator: the console is settled
    async def confirm_release(self, hold: Hold) -> None:
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                f"Release hold {hold.id}",
                f"{hold.scope} {hold.target}: {hold.reason} (placed {day(hold.placed_at)} by "
                f"{hold.placed_by})",
                warning="What it covers may then be expired, or its local copy dropped, "
                "by the next expire or ship.",
                confirm="Release",
            )
        )
        if ok:
            self.release(hold.id)
