"""One path's versions (``coldkeep versions`` in a table): when each was
archived, its size, where its bytes are (its gzip, a bundle member, the remote
copy only, missing, expired) and the legal hold on it; ``v`` reads one in the
pager, ``r`` restores it (asked first, as the browser's restore).

Attributes down, messages up: the screen gets the settings, where a restore
goes (``root``: None for the live path) and why nothing can change the archive
(``blocked``); a confirmed restore goes up as ``Confirmed``, which the app
refuses or runs as any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.widgets import DataTable, Static

from coldkeep.core.base.config import Settings
from coldkeep.core.base.errors import explain
from coldkeep.core.base.layout import Layout
from coldkeep.core.files.find import Version, versions
from coldkeep.core.files.restore import Selection
from coldkeep.core.remote.sealing import Identities

from ...operations.find import utc
from ...operations.restore import RESTORE, restore_files
from ...operations.spec import ConsoleAction
from ...text.fmt import human, plural, shown
from ..kit.actions import bindings
from ..kit.messages import Confirmed
from ..widgets.footer import FittedFooter
from ..widgets.tables import Cell, cursor_key, keyed_table, name_cell, sync_table
from .confirm import ConfirmScreen
from .help import KeyedScreen
from .pager import PagerScreen, archived

LOCATIONS = {
    "gzip": "its gzip",
    "bundle": "a bundle member",
    "remote": "remote copy only",
    "missing": "MISSING: no copy",
    "expired": "expired: never restored",
}


@dataclass
class VersionsLoaded(Message):
    versions: list[Version]
    error: str | None = None


def version_cells(v: Version) -> tuple[Cell, ...]:
    e = v.entry
    where = LOCATIONS.get(v.location, v.location)
    location: Cell = Text(where, style="bold red") if v.location == "missing" else where
    hold: Cell = Text(f"held:{v.hold.id}", style="yellow") if v.hold is not None else ""
    return (utc(e.archived_at), human(e.bytes), location, hold, e.id, e.sha256[:12])


class VersionsScreen(KeyedScreen):
    KEYS = (
        ConsoleAction("back", "escape", "Back", "Close the versions, back to where you were"),
        ConsoleAction(
            "view",
            "v",
            "View",
            "Read the highlighted version in the pager, without restoring it (sha256 checked)",
        ),
        ConsoleAction(
            "restore",
            "r",
            "Restore",
            "Restore the highlighted version (to its live path, or under the browser's "
            "directory); asks first",
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(KEYS)]
    HELP_TITLE = "A file's versions: keys"
    HELP_FOOT = "Arrow keys move in the table, newest first. esc closes this."

    def __init__(
        self,
        settings: Settings,
        relpath: str,
        *,
        root: Path | None = None,
        read_only: bool = False,
        blocked: str | None = None,
        identities: Identities | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.identities = identities  # the console's --identity: the pager opens sealed copies
        self.relpath = relpath
        self.root = root  # where a restore goes; None: the live path
        self.read_only = read_only
        self.blocked = blocked
        self.rows: dict[int, Version] = {}

    def compose(self) -> ComposeResult:
        yield Static(
            Text("Versions of ") + name_cell(self.relpath) + Text("  (newest first)"),
            id="versions-title",
        )
        yield keyed_table(
            "versions-table",
            [
                ("Archived (UTC)", "archived"),
                ("Size", "size"),
                ("Location", "location"),
                ("Hold", "hold"),
                ("Id", "id"),
                ("sha256", "sha"),
            ],
        )
        yield Static("reading the manifest…", id="versions-preview")
        yield FittedFooter()

    def unavailable(self) -> dict[str, str]:
        why = "the console is read-only (--read-only)" if self.read_only else self.blocked
        return {"restore": why} if why else {}

    def on_mount(self) -> None:
        self.query_one("#versions-table").focus()
        self.load()

    @work(exclusive=True, group="versions", exit_on_error=False)
    async def load(self) -> None:
        manifest = Layout(self.settings.archive_root).manifest
        try:
            found = await versions(manifest, self.relpath, self.settings.live_root)
        except Exception as err:
            known = explain(err)
            if known is None:
                raise  # a bug: the worker's error shows it whole
            self.post_message(VersionsLoaded([], known[1]))
            return
        self.post_message(VersionsLoaded(found.versions))

    def on_versions_loaded(self, message: VersionsLoaded) -> None:
        self.rows = {v.entry.id: v for v in message.versions}
        sync_table(
            self.query_one("#versions-table", DataTable),
            {str(i): version_cells(v) for i, v in self.rows.items()},
        )
        note = self.query_one("#versions-preview", Static)
        if message.error is not None:
            note.update(Text(shown(message.error), style="bold red"))
            return
        where = "the live path" if self.root is None else str(self.root)
        note.update(
            f"{plural(len(self.rows), 'version')}  ·  v reads one without restoring it  ·  "
            f"r restores it to {shown(where)} (asked first)"
        )

    def current(self) -> Version | None:
        key = cursor_key(self.query_one("#versions-table", DataTable))
        return self.rows.get(int(key)) if key else None

    def action_back(self) -> None:
        self.dismiss(None)

    def action_view(self) -> None:
        v = self.current()
        if v is None:
            return
        if v.location in ("expired", "missing"):
            self.notify(f"entry {v.entry.id}: {LOCATIONS[v.location]} to read", severity="warning")
            return
        self.app.push_screen(pager_for(self.settings, v, self.identities))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "restore" and self.read_only)

    def action_restore(self) -> None:
        if why := self.unavailable().get("restore"):
            self.notify(why, severity="warning")
            return
        self.confirm()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm(self) -> None:
        v = self.current()
        if v is None:
            return
        e = v.entry
        if v.location == "expired":
            self.notify(f"entry {e.id}: expired by retention, never restored", severity="warning")
            return
        where = (
            "its live path, held from passes for the hold time"
            if self.root is None
            else (str(self.root))
        )
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                f"Restore the version archived {utc(e.archived_at)}",
                f"entry {e.id}, {human(e.bytes)}, to {where}.",
                columns=("Path", "Size", "Archived (UTC)"),
                rows=[(name_cell(e.relpath), human(e.bytes), utc(e.archived_at))],
                warning="Existing files are never overwritten: they are reported and left alone.",
                confirm="Restore",
            )
        )
        if ok:
            run = restore_files(Selection(ids=(e.id,)), self.root)
            self.post_message(Confirmed("restore", RESTORE.name, run))


def pager_for(settings: Settings, v: Version, identities: Identities | None) -> PagerScreen:
    """The pager on version ``v`` (a sealed copy opened with ``identities``)."""
    e = v.entry
    title = name_cell(e.relpath) + Text(
        f"  ·  entry {e.id}  ·  {human(e.bytes)}  ·  archived {utc(e.archived_at)}  ·  "
        f"from {LOCATIONS.get(v.location, v.location)}"
    )
    return PagerScreen(title, e.relpath, archived(settings, e.relpath, e.id, identities))
