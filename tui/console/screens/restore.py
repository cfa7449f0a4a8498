"""The restore browser: find archived files as you type, select some, see where
each would go and whether something is already there, restore them (to their
live paths or under another directory) and see each result. Event rows restore
by month and kind from the second tab.

Everything slow runs in workers (opening the catalog, each filter's SQL over the
manifest, checking targets); the handlers here own the screen's state.

Attributes down, messages up: the screen gets what it shows in its constructor
(the settings, read-only or not, the folder paths are shown relative to) and
``blocked`` (why nothing can change the archive now) from the app, which keeps it
current; a confirmed restore goes up as ``Confirmed`` with its call (from the
registry's restore entries), and how it ended comes down through ``finished``
(its result) or ``failed`` (the error).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Static, TabbedContent, TabPane

from coldkeep.core.base.config import Settings
from coldkeep.core.base.configprices import usd
from coldkeep.core.base.errors import ColdkeepError
from coldkeep.core.base.layout import Layout, UnsafePath, resolve_inside
from coldkeep.core.events.restore import ArchivedMonth, EventsRestoreReport, archived_months
from coldkeep.core.files.catalog import Catalog, CatalogRow, QueryError, Stopped, load_catalog
from coldkeep.core.files.find import Version, find
from coldkeep.core.files.restore import (
    RestoreReport,
    Selection,
    check_restore_root,
    select_entries,
)
from coldkeep.core.remote.cold import wait_of
from coldkeep.core.remote.connect import connected
from coldkeep.core.remote.sealing import Identities
from coldkeep.core.remote.thaw import ThawPlan, thaw_plan
from coldkeep.core.store.manifest import Manifest

from ...operations.registry import headline
from ...operations.restore import (
    DEFAULT_THAW_DAYS,
    RESTORE,
    RESTORE_EVENTS,
    restore_files,
    restore_months,
)
from ...operations.spec import ConsoleAction
from ...operations.thaw import THAW, TIER, thaw_files
from ...text.fmt import clock_time, human, plural, short_path, shown
from ..kit.actions import bindings
from ..kit.messages import Confirmed
from ..widgets.fields import Field
from ..widgets.footer import FittedFooter
from ..widgets.tables import MeasuredTable, cursor_key, keyed_table, name_cell, sync_table
from .browse import FILTER_HINT, FilterInput, Listing, result_cell, search, worker_cancelled
from .confirm import ConfirmScreen
from .find import FindScreen, Pick
from .help import KeyedScreen
from .pager import PagerScreen, archived
from .versions import VersionsScreen, pager_for

COPIES = {
    "local": "local copy",
    "remote": "remote copy only: read back from the remote tier",
    "local + remote": "local copy, also on the remote tier",
}


def source(row: CatalogRow, cold: str | None = None) -> str:
    """Where a restore reads the file from: its gzip (or bundle member) and which
    copies of it there are (``cold``: the class remote copies go to, where it
    must be thawed first); what holds it."""
    if row.status == "expired":
        return "expired by retention: never restored (its sha256 stays in the manifest)"
    where = row.location.removesuffix(f" · {row.copies}")
    held = f"  ·  HELD by {row.held}" if row.held else ""
    copies = COPIES.get(row.copies, row.copies)
    if row.copies == "remote" and cold is not None:
        wait = wait_of(cold, "standard")
        copies = (
            f"remote copy only, in {cold}: thaw it first (usually {wait}; t shows what it costs)"
        )
    return f"from {where} ({copies}){held}"


@dataclass
class CatalogLoaded(Message):
    catalog: Catalog


@dataclass
class PathsUnindexed(Message):
    why: str


@dataclass
class Filtered(Message):
    query: str
    total: int
    rows: list[CatalogRow]
    error: str | None = None
    capped: bool = False  # more than `total` match


@dataclass
class TargetChecked(Message):
    entry_id: int
    target: str
    exists: bool | None  # None: the target is refused
    detail: str = ""


@dataclass
class MonthsLoaded(Message):
    months: list[ArchivedMonth]


class RestoreScreen(KeyedScreen):
    KEYS = (
        ConsoleAction("back", "escape", "Back", "Close the browser, back to the main screen"),
        ConsoleAction(
            "select_row",
            "space",
            "Select",
            "Select or unselect the highlighted file (on the Events tab: its month and kind)",
        ),
        ConsoleAction(
            "restore",
            "r",
            "Restore",
            "Restore the selected files (or the highlighted one) to their live paths or under "
            "the directory typed below; on the Events tab the months and kinds selected; "
            "asks first",
        ),
        ConsoleAction(
            "thaw",
            "t",
            "Thaw",
            "Ask S3 to thaw the cold remote copies (GLACIER, DEEP_ARCHIVE) of the selected files "
            "(or the highlighted one); shows what it would ask for and its estimated cost first",
        ),
        ConsoleAction(
            "copy", "y", "Copy path", "Copy a shell line that gives the file's bytes back"
        ),
        ConsoleAction(
            "view",
            "v",
            "View",
            "Read the highlighted file in the pager, without restoring it (sha256 checked)",
        ),
        ConsoleAction("versions", "H", "Versions", "Every version of the highlighted file's path"),
        ConsoleAction(
            "find",
            "g",
            "Find",
            "Find in the whole manifest (a glob or part of a path): every version of every "
            "match; enter selects one here",
        ),
        # Acted on as it is read (priority), so that what is typed right after it
        # lands in the filter; in a text field it is a character (paths have
        # slashes), and the footer does not offer it there.
        ConsoleAction(
            "focus_filter",
            "slash",
            "Filter",
            "Back to the filter, its text selected: typing starts a new one",
            at_once=True,
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(KEYS)]
    HELP_TITLE = "Restore browser: keys"
    HELP_FOOT = (
        f"The filter: {FILTER_HINT.removeprefix('filter: ')}. Down, enter or tab lead "
        "from it to the table, arrow keys move there; tab reaches the target directory "
        "and the buttons. esc closes this."
    )

    def __init__(
        self,
        settings: Settings,
        *,
        base: Path,
        read_only: bool = False,
        blocked: str | None = None,
        identities: Identities | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        # The console's --identity: the pager opens a sealed remote copy with it.
        self.identities = identities
        remote = settings.remote
        self.cold = remote.storage_class if remote is not None and remote.cold else None
        self.archive = Layout(settings.archive_root)
        self.base = base  # paths are shown relative to it (the config's folder)
        # Browsing, previewing and copying a path change nothing; in read-only
        # the restore controls are not shown at all (and refused if reached).
        self.read_only = read_only
        self.blocked = blocked  # why nothing can change the archive now (the app's word)
        self.catalog: Catalog | None = None
        self.rows: dict[int, CatalogRow] = {}
        self.total = 0
        self.capped = False
        self.selected: set[int] = set()
        self.month_rows: dict[str, ArchivedMonth] = {}
        self.months_selected: set[str] = set()
        self.wanted: int | None = None  # the entry the find box chose, selected once listed
        self.listing = Listing()  # the filter text the rows answer, a key waiting

    def compose(self) -> ComposeResult:
        with TabbedContent(id="restore-tabs"):
            with TabPane("Files", id="restore-files"):
                yield FilterInput(placeholder=FILTER_HINT, id="restore-filter")
                yield Static("loading the manifest…", id="restore-count")
                yield keyed_table(
                    "restore-table",
                    [
                        ("✓", "sel"),
                        ("Path", "path"),
                        ("Status", "status"),
                        ("Size", "size"),
                        ("Archived", "archived"),
                        ("Id", "id"),
                    ],
                )
                yield Static("", id="restore-preview")
                with Horizontal(id="restore-controls"):
                    yield Field(
                        placeholder="restore under this directory (empty: to the live paths)",
                        id="restore-to",
                        disabled=self.read_only,
                    )
                    if not self.read_only:
                        yield Button("Restore \\[r]", id="restore-go", variant="warning")
                    yield Button("Copy path \\[y]", id="restore-copy")
                results = MeasuredTable(id="restore-results", cursor_type="row")
                results.add_columns("Result", "Path", "Detail")
                yield results
            with TabPane("Events", id="restore-events"):
                yield Static("archived event rows, by month and kind", id="events-help")
                yield keyed_table(
                    "events-months",
                    [("✓", "sel"), ("Month", "month"), ("Kind", "kind"), ("Rows", "rows")],
                )
                if not self.read_only:
                    yield Button("Restore rows \\[r]", id="events-go", variant="warning")
                yield Static("", id="events-result")
        yield FittedFooter()

    def unavailable(self) -> dict[str, str]:
        why = "the console is read-only (--read-only)" if self.read_only else self.blocked
        off = {"restore": why, "thaw": why} if why else {}
        if self.cold is None:
            off["thaw"] = "the remote's storage_class is not cold: nothing to thaw"
        return off

    def on_mount(self) -> None:
        self.query_one("#restore-results").display = False
        self.load_catalog()
        self.load_months()
        # Focused now, not later (``focus()`` waits a turn): the app awaits this
        # mount before it routes the next key, which must find the filter.
        self.set_focus(self.query_one("#restore-filter", Input))

    # workers -----------------------------------------------------------------

    @work(thread=True, exclusive=True, group="catalog", exit_on_error=False)
    def load_catalog(self) -> None:
        catalog = load_catalog(self.archive.manifest)
        self.post_message(CatalogLoaded(catalog))
        # The index of paths, for the filters typed next (seconds at 10,000,000
        # entries, after the first page is shown).
        if (why := catalog.prepare()) is not None:
            self.post_message(PathsUnindexed(why))

    @work(exclusive=True, group="months", exit_on_error=False)
    async def load_months(self) -> None:
        months = await archived_months(self.settings, self.archive.events)
        self.post_message(MonthsLoaded(months))

    @work(thread=True, exclusive=True, group="filter", exit_on_error=False)
    def run_filter(self, text: str) -> None:
        catalog = self.catalog
        if catalog is None:
            return
        try:
            total, hits, capped = search({"": catalog}, text, stop=worker_cancelled())
        except Stopped:
            return
        except QueryError as err:
            self.post_message(Filtered(text, 0, [], str(err)))
            return
        self.post_message(Filtered(text, total, [row for _, row in hits], capped=capped))

    @work(thread=True, exclusive=True, group="target", exit_on_error=False)
    def check_target(self, row: CatalogRow, to: str) -> None:
        try:
            root = self._root(to)
            target = resolve_inside(root, row.relpath)
        except UnsafePath as err:
            self.post_message(TargetChecked(row.id, "", None, str(err)))
            return
        self.post_message(TargetChecked(row.id, str(target), os.path.lexists(target)))

    def _root(self, to: str) -> Path:
        if not to.strip():
            return self.settings.live_root
        settings = self.settings
        return check_restore_root(
            Path(to.strip()).expanduser(), settings.archive_root, settings.live_root
        )

    # handlers ----------------------------------------------------------------

    def on_catalog_loaded(self, message: CatalogLoaded) -> None:
        self.catalog = message.catalog
        self.run_filter(self.query_one("#restore-filter", Input).value)

    def on_paths_unindexed(self, message: PathsUnindexed) -> None:
        self.notify(f"no index of paths, a filter reads the manifest: {message.why}")

    @on(Input.Changed, "#restore-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.run_filter(event.value)

    @on(Input.Submitted, "#restore-filter")
    def action_focus_table(self) -> None:
        # At once, not after the keys already waiting (as ``focus()`` would):
        # Down and q typed in one burst quit from the table.
        self.set_focus(self.query_one("#restore-table", DataTable))

    def on_filtered(self, message: Filtered) -> None:
        # A filter a newer one replaced stops at its next check, but one that
        # ended just before can still arrive after the text changed: dropped, or
        # it would replace the rows of the newer filter.
        if message.query != self.query_one("#restore-filter", Input).value:
            return
        # A filter that cannot be understood lists nothing (not what an earlier
        # text matched, which would look like its result); the count line says why.
        self.total = message.total
        self.capped = message.capped
        self.rows = {r.id: r for r in sorted(message.rows, key=lambda r: (r.relpath, r.id))}
        sync_table(
            self.query_one("#restore-table", DataTable),
            {
                str(r.id): (
                    "✓" if r.id in self.selected else "",
                    name_cell(r.relpath),
                    f"{r.status} · held" if r.held else r.status,
                    human(r.bytes),
                    clock_time(r.archived_at),
                    r.id,
                )
                for r in self.rows.values()
            },
            sort_by="path",
        )
        self._select_wanted()
        if message.error:
            self.query_one("#restore-count", Static).update(
                Text(f"{message.error} (nothing listed)", style="bold red")
            )
        else:
            self._show_count()
        self._preview()
        self.listing.listed(message.query)

    def _listed_now(self, act: Callable[[], None]) -> bool:
        """Whether the table lists what the filter says now (``Listing``);
        before the list has loaded at all, said and not kept: that is not a
        wait of milliseconds."""
        text = self.query_one("#restore-filter", Input).value
        if self.catalog is None and self.listing.answers != text:
            self.notify("the list is still loading: press it again once it shows")
            return False
        return self.listing.ready(text, act)

    def _select_wanted(self) -> None:
        """The entry the find box chose: highlighted, its table focused."""
        wanted, self.wanted = self.wanted, None
        if wanted is None:
            return
        table = self.query_one("#restore-table", DataTable)
        if wanted not in self.rows:
            self.notify(f"entry {wanted} is not among the rows listed", severity="warning")
            return
        table.move_cursor(row=table.get_row_index(str(wanted)))
        table.focus()

    def jump_to(self, relpath: str, entry_id: int) -> None:
        """List ``relpath`` (the filter set to it) and highlight entry ``entry_id``."""
        self.wanted = entry_id
        self.query_one(TabbedContent).active = "restore-files"
        box = self.query_one("#restore-filter", Input)
        if box.value == relpath:
            self.run_filter(relpath)  # no Changed for the same text
        else:
            box.value = relpath

    def _show_count(self) -> None:
        size = len(self.catalog) if self.catalog else 0
        shown = f" (first {len(self.rows)} shown)" if self.total > len(self.rows) else ""
        picked = f" · {len(self.selected)} selected" if self.selected else ""
        many = "more than " if self.capped else ""
        self.query_one("#restore-count", Static).update(
            f"{many}{self.total:,} of {size:,} entries match{shown}{picked}"
        )

    @on(DataTable.RowHighlighted, "#restore-table")
    def _highlighted(self) -> None:
        self._preview()

    @on(Input.Changed, "#restore-to")
    def _to_changed(self) -> None:
        self._preview()

    def _current(self) -> CatalogRow | None:
        key = cursor_key(self.query_one("#restore-table", DataTable))
        return self.rows.get(int(key)) if key else None

    def _chosen(self) -> list[CatalogRow]:
        """The selected files, or else the highlighted one (none: nothing)."""
        picked = [self.rows[i] for i in sorted(self.selected) if i in self.rows]
        if not picked and (current := self._current()) is not None:
            picked = [current]
        return picked

    def _preview(self) -> None:
        row = self._current()
        preview = self.query_one("#restore-preview", Static)
        if row is None:
            preview.update("")
            return
        preview.update(
            name_cell(row.relpath)
            + Text(
                f"  ·  {human(row.bytes)}  ·  sha256 {row.sha256[:16]}…  ·  "
                f"archived {clock_time(row.archived_at)}  ·  {row.status}\n"
                f"checking the target…  ·  {source(row, self.cold)}"
            )
        )
        self.check_target(row, self.query_one("#restore-to", Input).value)

    def on_target_checked(self, message: TargetChecked) -> None:
        row = self._current()
        if row is None or row.id != message.entry_id:
            return
        if message.exists is None:
            where = Text(f"refused: {shown(message.detail)}", style="bold red")
        elif message.exists:
            where = Text(
                f"→ {short_path(Path(message.target), self.base)}  (EXISTS: left untouched)",
                style="yellow",
            )
        else:
            where = Text(f"→ {short_path(Path(message.target), self.base)}  (free)")
        head = name_cell(row.relpath) + Text(
            f"  ·  {human(row.bytes)}  ·  sha256 {row.sha256[:16]}…  ·  "
            f"archived {clock_time(row.archived_at)}  ·  {row.status}\n"
        )
        whence = Text(f"  ·  {source(row, self.cold)}", style="dim")
        self.query_one("#restore-preview", Static).update(head + where + whence)

    def action_select_row(self) -> None:
        if self.query_one(TabbedContent).active == "restore-events":
            self._toggle_month()
            return
        if not self._listed_now(self.action_select_row):
            return
        row = self._current()
        if row is None:
            return
        self.selected ^= {row.id}
        self.query_one("#restore-table", DataTable).update_cell(
            str(row.id), "sel", "✓" if row.id in self.selected else ""
        )
        self._show_count()

    def action_focus_filter(self) -> None:
        """``/``: to the filter (from the Events tab too), at once: the keys
        typed right after it land there. Its text is selected, so that typing
        starts a new filter (End keeps it)."""
        self.query_one(TabbedContent).active = "restore-files"
        self.set_focus(self.query_one("#restore-filter", Input))

    @on(Button.Pressed, "#restore-copy")
    def action_copy(self) -> None:
        row = self._current()
        if row is not None:
            line = row.extract_command(self.archive.root)
            self.app.copy_to_clipboard(line)
            self.notify(f"copied {line}")

    def action_back(self) -> None:
        self.dismiss(None)

    # reading without restoring: the pager, the versions, the find box ------------

    def action_view(self) -> None:
        """``v``: the highlighted file's content in the pager, nothing restored."""
        row = self._current()
        if row is None:
            self.notify("no file highlighted", severity="warning")
            return
        if row.status == "expired":
            self.notify(
                f"{shown(row.relpath)}: expired by retention, not read here (coldkeep cat "
                "--expired reads a remote copy the bucket's lock still keeps)",
                severity="warning",
                markup=False,
            )
            return
        title = name_cell(row.relpath) + Text(
            f"  ·  entry {row.id}  ·  {human(row.bytes)}  ·  archived {clock_time(row.archived_at)}"
            f"  ·  {source(row, self.cold)}"
        )
        self.app.push_screen(
            PagerScreen(
                title, row.relpath, archived(self.settings, row.relpath, row.id, self.identities)
            )
        )

    def action_versions(self) -> None:
        """``H``: every version of the highlighted file's path."""
        row = self._current()
        if row is None:
            self.notify("no file highlighted", severity="warning")
            return
        self.open_versions(row.relpath)

    def open_versions(self, relpath: str) -> None:
        to = self.query_one("#restore-to", Input).value
        try:
            root = self._root(to) if to.strip() else None
        except UnsafePath as err:
            self.notify(str(err), severity="error", markup=False)
            return
        self.app.push_screen(
            VersionsScreen(
                self.settings,
                relpath,
                root=root,
                read_only=self.read_only,
                blocked=self.blocked,
                identities=self.identities,
            )
        )

    async def action_find(self) -> None:
        """``g``: the find box, over the whole manifest."""
        await self.app.push_screen(FindScreen(self._find, self._picked))

    async def _find(self, pattern: str) -> tuple[list[tuple[str, Version]], str]:
        found = await find(self.archive.manifest, pattern, self.settings.live_root)
        return [("", v) for v in found.versions], ""

    def _picked(self, site: str, v: Version, what: Pick) -> None:
        e = v.entry
        if what == "select":
            self.jump_to(e.relpath, e.id)
        elif what == "versions":
            self.open_versions(e.relpath)
        elif v.location == "expired":
            self.notify(f"entry {e.id}: expired by retention, never restored", severity="warning")
        elif v.location == "missing":
            self.notify(f"entry {e.id}: missing, no copy to read", severity="warning")
        else:
            self.app.push_screen(pager_for(self.settings, v, self.identities))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "focus_filter":
            # In a text field `/` is typed (and the footer does not offer it).
            return not isinstance(self.focused, Input)
        # Off the footer in read-only (and thaw without a cold class); the
        # actions still refuse if reached.
        if action == "thaw":
            return "thaw" not in self.unavailable()
        return not (action == "restore" and self.read_only)

    @on(Button.Pressed, "#restore-go")
    @on(Button.Pressed, "#events-go")
    def action_restore(self) -> None:
        if why := self.unavailable().get("restore"):
            self.notify(why, severity="warning")
            return
        if self.query_one(TabbedContent).active == "restore-events":
            self.confirm_events()
        elif self._listed_now(self.action_restore):
            self.confirm_files()

    def action_thaw(self) -> None:
        if why := self.unavailable().get("thaw"):
            self.notify(why, severity="warning")
            return
        if self._listed_now(self.action_thaw):
            self.confirm_thaw()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_thaw(self) -> None:
        """The plan of a thaw of the selected files (HEADs, nothing asked), as
        the question; yes asks for it through the app."""
        picked = self._chosen()
        remote = self.settings.remote
        if not picked or remote is None:
            self.notify("nothing selected: space selects, t thaws", severity="warning")
            return
        selection = Selection(ids=tuple(r.id for r in picked))
        manifest = await Manifest.open_existing(self.archive.manifest)
        if manifest is None:
            self.notify("nothing is archived yet: nothing to thaw", severity="warning")
            return
        try:
            async with manifest, connected(remote) as store:
                entries = await select_entries(manifest, selection)
                plan = await thaw_plan(manifest, store, remote, entries, TIER, DEFAULT_THAW_DAYS)
        except ColdkeepError as err:
            self.notify(str(err), severity="error", markup=False)
            return
        if not plan.to_ask:
            self.notify(f"thaw: {headline(plan)}", markup=False)
            return
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                f"Thaw {plural(len(plan.to_ask), 'object')}",
                headline(plan).removesuffix("; run again with --yes to ask"),
                columns=("State", "Class", "Size", "Object"),
                rows=[
                    (o.state, o.storage_class or "STANDARD", human(o.bytes), name_cell(o.path))
                    for o in plan.objects[:200]
                ],
                warning=f"S3 bills the thaw ({usd(plan.cost_usd())} estimated); a restore "
                "reads the files once they are thawed.",
                confirm="Thaw",
            )
        )
        if ok:
            run = thaw_files(selection, TIER, DEFAULT_THAW_DAYS)
            # Under the browser's own action ("restore"): the app refuses it
            # as it would a restore (read-only, the lock elsewhere).
            self.post_message(Confirmed("restore", THAW.name, run))

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_files(self) -> None:
        picked = self._chosen()
        if not picked:
            self.notify("nothing selected: space selects, r restores", severity="warning")
            return
        # Expired by retention: only the tombstone is left (the browser shows it
        # as gone), so there is nothing to ask about restoring it.
        gone = [r for r in picked if r.status == "expired"]
        picked = [r for r in picked if r.status != "expired"]
        if not picked:
            what = gone[0].relpath if len(gone) == 1 else plural(len(gone), "file")
            self.notify(
                f"{what}: expired by retention, never restored "
                "(only its sha256 stays, in the manifest)",
                severity="warning",
                markup=False,
            )
            return
        left_out = (
            f"\n{plural(len(gone), 'selected file')} expired by retention: not restored."
            if gone
            else ""
        )
        to = self.query_one("#restore-to", Input).value.strip()
        try:
            root = self._root(to)
        except UnsafePath as err:
            self.notify(str(err), severity="error")
            return
        where = "their live paths, held from passes for the hold time" if not to else str(root)
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                f"Restore {plural(len(picked), 'file')}",
                f"to {where}; {human(sum(r.bytes for r in picked))} in all.{left_out}",
                columns=("Path", "Size", "Status"),
                rows=[(name_cell(r.relpath), human(r.bytes), r.status) for r in picked[:200]],
                warning="Existing files are never overwritten: they are reported and left alone.",
                confirm="Restore",
            )
        )
        if ok:
            selection = Selection(ids=tuple(r.id for r in picked))
            run = restore_files(selection, root if to else None)
            self.post_message(Confirmed("restore", RESTORE.name, run))

    def finished(self, result: object, headline: str) -> None:
        """An operation ended with ``result`` (``headline``: it in one line)."""
        match result:
            case RestoreReport(files=files):
                self.show_results([(f.result, f.relpath, f.detail or f.target) for f in files])
            case EventsRestoreReport():
                self.show_events_result(headline)
            case ThawPlan():
                self.notify(f"thaw: {headline}", markup=False)

    def failed(self, error: str) -> None:
        """An operation ended in an error before its result."""
        self.show_events_result(error)

    def show_results(self, results: list[tuple[str, str, str]]) -> None:
        table = self.query_one("#restore-results", DataTable)
        table.display = True
        table.clear()
        for result, path, detail in results:
            table.add_row(result_cell(result), name_cell(path), name_cell(detail))
        self.selected.clear()
        # The restore changed the entries' statuses in the manifest: reload it
        # (on_catalog_loaded filters again with the operator's filter text).
        self.load_catalog()

    # events ------------------------------------------------------------------

    def on_months_loaded(self, message: MonthsLoaded) -> None:
        self.month_rows = {f"{m.month}|{m.kind}": m for m in message.months}
        sync_table(
            self.query_one("#events-months", DataTable),
            {
                key: ("✓" if key in self.months_selected else "", m.month, m.kind, m.rows)
                for key, m in self.month_rows.items()
            },
        )

    def _toggle_month(self) -> None:
        table = self.query_one("#events-months", DataTable)
        key = cursor_key(table)
        if key is None:
            return
        self.months_selected ^= {key}
        table.update_cell(key, "sel", "✓" if key in self.months_selected else "")

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_events(self) -> None:
        picked = [self.month_rows[k] for k in sorted(self.months_selected) if k in self.month_rows]
        if not picked:
            self.notify("select months and kinds with space first", severity="warning")
            return
        rows = sum(m.rows for m in picked)
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                f"Restore {rows:,} event {'row' if rows == 1 else 'rows'}",
                "into the live table, held from passes for the hold time.",
                columns=("Month", "Kind", "Rows"),
                rows=[(m.month, m.kind, m.rows) for m in picked],
                warning="A live row with the same id is never overwritten: it is reported.",
                confirm="Restore",
            )
        )
        if ok:
            self.post_message(Confirmed("restore", RESTORE_EVENTS.name, restore_months(picked)))

    def show_events_result(self, text: str) -> None:
        self.query_one("#events-result", Static).update(text)
        self.months_selected.clear()
        self.load_months()
