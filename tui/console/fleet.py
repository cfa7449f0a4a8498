"""The fleet view (``coldkeep console --remote URL``): every site that ships to one
remote prefix, read from the manifest snapshots its ships left there, searched
together, and restored from into a local folder, with no site's host and no
coldkeep.toml (core/ops/fleet.py does the work).

Read-only: nothing is written to the remote or to any site. The only writes are
the snapshot cache and a confirmed restore, always under the target directory
the operator names (never in place): one site's files straight under it, the
files of several sites each under ``<target>/<site>/``.

The main console's model: workers only post messages, the handlers own the
state; one registry (``FLEET_ACTIONS``) makes the bindings, the footer, help and
the palette; the tables are keyed and diffed; a restore asks first, showing what
will be written where.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Input, Static
from textual.worker import Worker

from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.config import RemoteSettings
from coldkeep.core.base.errors import RemoteError
from coldkeep.core.base.layout import UnsafePath, resolve_inside
from coldkeep.core.base.stream import Event, EventStream, FileDone
from coldkeep.core.files.catalog import Catalog, CatalogRow, QueryError, Stopped
from coldkeep.core.files.find import Version
from coldkeep.core.files.restore import RestoreReport, check_restore_root, target_names
from coldkeep.core.ops.fleet import Fleet, FleetSite
from coldkeep.core.remote.sealing import Identities
from coldkeep.core.store.manifest import Entry, ManifestError

from ..operations import headline
from ..operations.spec import ConsoleAction
from ..text.fmt import clock_time, human, shown
from .kit.actions import bindings
from .kit.pilot import busy
from .screens import ConfirmScreen, HelpScreen
from .screens.browse import FILTER_HINT, FilterInput, result_cell, search, worker_cancelled
from .screens.find import FindScreen, Pick
from .widgets.fields import Field
from .widgets.tables import Cell, cursor_key, keyed_table, name_cell, sync_table

# The fleet view's own registry: browsing, selecting and restoring --to a folder;
# nothing that changes a site or the remote (no pass, ship, sweep…) exists here.
FLEET_ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction(
        "restore",
        "r",
        "Restore",
        "Restore the selected files (or the highlighted one) under the target directory: "
        "shows what goes where and asks first",
    ),
    ConsoleAction(
        "select_row", "space", "Select", "Select or unselect the highlighted file", button=False
    ),
    ConsoleAction(
        "focus_filter",
        "slash",
        "Filter",
        "Search every site at once: words of the path, site:NAME, unit:NAME, sha:PREFIX, "
        "status:STATUS, after:DATE, before:DATE",
    ),
    ConsoleAction(
        "find",
        "g",
        "Find",
        "Find archived files at every site (a glob or part of a path, as coldkeep find "
        "--fleet): every version, where it is, its hold; enter selects it here",
    ),
    ConsoleAction(
        "focus_to", "t", "Target", "Type the directory restores go under (required)", button=False
    ),
    ConsoleAction(
        "focus_table",
        "escape",
        "Results",
        "Leave the filter or the target for the table of matches",
        button=False,
    ),
    ConsoleAction(
        "reload",
        "f",
        "Reload",
        "List the sites again and fetch any newer manifest snapshot",
        alt_key="f5",
    ),
    ConsoleAction("stop", "x", "Stop", "Stop the restore before its next file"),
    ConsoleAction(
        "help", "question_mark", "Help", "Show every key and action", alt_key="f1", button=False
    ),
    ConsoleAction("quit", "q", "Quit", "Quit (asks first while a restore runs)"),
)
FLEET_HELP = (
    "The fleet view reads the manifest snapshots the sites shipped: it shows each "
    "site as of its last ship, and changes nothing on the remote or on any site. "
    "Type in the filter, move to the table (down, enter, tab or esc), select with "
    "space, set the target (t), restore (r). esc closes this."
)
# Confirmation rows listed at most (the title and summary count them all).
CONFIRM_ROWS = 200
# What the preview and a restore say while no target is typed.
REFUSED = "the fleet view never restores in place: type a target directory (t) first"


def snapshot_time(taken_at: int | None) -> str:
    """When a site's snapshot was taken (as its statement signs it), in UTC."""
    if taken_at is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(taken_at / 1000))


def files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def restore_root(to: str, cache: Path) -> Path:
    """The target directory typed (``~`` expanded, relative to the current
    directory), checked as ``restore --to`` checks it: reached through no
    symlink, not a file, and outside the snapshot cache. Blocking (it stats)."""
    return check_restore_root(Path(to.strip()).expanduser(), cache.absolute())


def row_key(site: str, entry_id: int) -> str:
    return f"{site}:{entry_id}"


def split_sites(text: str, known: Iterable[str]) -> tuple[set[str] | None, str]:
    """The ``site:NAME`` words of a filter (None: every site), and the rest of
    it for the catalog's own query language. An unknown site is refused, naming
    the ones there are, rather than silently matching nothing."""
    names = set(known)
    sites: set[str] = set()
    rest = []
    for word in text.split():
        key, sep, value = word.partition(":")
        if sep and key == "site" and value:
            if value not in names:
                raise QueryError(f"{word}: no such site; the sites are {', '.join(sorted(names))}")
            sites.add(value)
        else:
            rest.append(word)
    return (sites or None), " ".join(rest)


def _locks(site: FleetSite) -> Text | str:
    """What the site's bucket keeps locked and what is sealed, as its snapshot
    says ("" for neither)."""
    parts = []
    if site.locked or site.legal_held:
        parts.append(f"{site.locked} locked, {site.legal_held} legally held")
    if site.sealed:
        parts.append(f"{site.sealed} sealed")
    return Text(", ".join(parts), style="dim") if parts else ""


@dataclass(frozen=True)
class Planned:
    """One file of a restore as the confirmation shows it."""

    site: str
    row: CatalogRow
    base: Path  # the site's restore root: the target, or its <site>/ folder
    target: Path
    exists: bool


def plan_restore(picked: list[tuple[str, CatalogRow]], root: Path) -> list[Planned]:
    """Where each picked file goes under ``root``: one site's straight under it,
    several sites' each under ``root/<site>/`` (two hosts' files of one path
    would collide); and whether something is there already (left alone). Blocking
    (it stats): run it in a thread."""
    by_site: dict[str, list[CatalogRow]] = defaultdict(list)
    for site, row in picked:
        by_site[site].append(row)
    planned = []
    for site, rows in by_site.items():
        base = root if len(by_site) == 1 else resolve_inside(root, site)
        # The core's own naming (older versions of one path get .entry-<id>), so
        # the dialog shows the names the restore will write. It reads only id,
        # relpath and mtime_ns, which a catalog row has too.
        names = target_names(cast("list[Entry]", rows), in_place=False)
        for row in rows:
            target = resolve_inside(base, names[row.id])
            planned.append(Planned(site, row, base, target, os.path.lexists(target)))
    return planned


# messages (workers post them; the screen's handlers own the state) -------------


@dataclass
class SitesListed(Message):
    """The prefix's folders: the sites whose snapshots are being fetched."""

    names: list[str]


@dataclass
class SitesLoaded(Message):
    sites: list[FleetSite]


@dataclass
class CatalogsLoaded(Message):
    catalogs: dict[str, Catalog]


@dataclass
class FleetLoadFailed(Message):
    error: str


@dataclass
class Searched(Message):
    query: str
    total: int
    rows: list[tuple[str, CatalogRow]]
    error: str | None = None
    capped: bool = False  # more than `total` match


@dataclass
class TargetChecked(Message):
    key: str
    to: str  # the target field's text it was checked with
    target: str
    exists: bool | None  # None: refused, or no target yet
    detail: str = ""


@dataclass
class RestoreProgress(Message):
    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RestoreProgress)


@dataclass
class RestoreEnded(Message):
    """A confirmed restore ended: done, stopped (``stopped``), or cut short by an
    error (``error``); ``report`` has the files it got to, ``sites`` the site of
    each (entry ids are each site's own)."""

    root: Path
    report: RestoreReport
    sites: list[str]
    stopped: str | None = None
    error: str | None = None


class _Counting(EventStream):
    """The restore's stream, counting the files done for the status line."""

    def __init__(self, total: int, post: Callable[[Message], object]) -> None:
        super().__init__()
        self.total = total
        self.done = 0
        self.post = post

    def emit(self, event: Event) -> None:
        super().emit(event)
        if isinstance(event, FileDone):
            self.done += 1
            self.post(RestoreProgress(self.done, self.total))


# the view --------------------------------------------------------------------


class FleetScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(FLEET_ACTIONS)]

    def __init__(self, fleet: Fleet) -> None:
        super().__init__()
        self.fleet = fleet
        self.where = fleet.remote.url
        self.listed: list[str] = []  # the sites being loaded
        self.sites: dict[str, FleetSite] = {}
        self.catalogs: dict[str, Catalog] = {}
        # Not "loading": that is a Widget reactive, which covers the screen with a spinner.
        self.fetching = True
        self.load_error: str | None = None
        self.rows: dict[str, tuple[str, CatalogRow]] = {}
        self.total = 0
        self.capped = False
        self.selected: set[str] = set()
        self.running: str | None = None  # what the restore's status line says
        self.cancel_token: CancelToken | None = None
        self.last: RestoreReport | None = None  # the last restore's report
        self.wanted: str | None = None  # the row the find box chose, selected once listed

    def compose(self) -> ComposeResult:
        yield Static("", id="status-line")
        yield keyed_table(
            "fleet-sites",
            [("Site", "site"), ("Snapshot", "snapshot"), ("Entries", "entries"), ("", "note")],
        )
        yield FilterInput(
            placeholder=FILTER_HINT.replace("filter: ", "filter every site: ") + " site:NAME",
            id="fleet-filter",
        )
        yield Static("", id="fleet-count")
        yield keyed_table(
            "fleet-table",
            [
                ("✓", "sel"),
                ("Site", "site"),
                ("Path", "path"),
                ("Size", "size"),
                # Two versions of one path differ here (archived, stale…).
                ("Status", "status"),
                ("Modified", "modified"),
                ("Location", "location"),
            ],
        )
        yield Static("", id="fleet-preview")
        with Horizontal(id="fleet-controls"):
            yield Field(
                placeholder="restore under this directory (required: never in place)",
                id="fleet-to",
            )
            yield Button("Restore \\[r]", id="fleet-go", variant="warning")
        results: DataTable[Cell] = DataTable(id="fleet-results", cursor_type="row")
        results.add_columns("Result", "Site", "Path", "Detail")
        yield results
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#fleet-results").display = False
        self.query_one("#fleet-filter", Input).focus()
        self._status()
        self.load()

    # workers -------------------------------------------------------------------

    @work(exclusive=True, group="load", exit_on_error=False)
    async def load(self) -> None:
        """The sites, their snapshots (fetched when newer than the cache's), then
        their catalogs: each step a message, so the screen fills as it goes."""
        try:
            # Listed first only to say how many are coming: Fleet.load lists
            # again (one delimiter listing) and fetches each site's snapshot.
            self.post_message(SitesListed(await self.fleet.store.list_dirs("")))
            self.post_message(SitesLoaded(await self.fleet.load()))
            catalogs = await self.fleet.catalogs()
            self.post_message(CatalogsLoaded(catalogs))
            # Each site's index of paths, for the filters typed next; a site
            # without one (no room in the cache) is filtered by its manifest.
            for catalog in catalogs.values():
                await asyncio.to_thread(catalog.prepare)
        except (RemoteError, ManifestError, OSError, sqlite3.Error) as err:
            self.post_message(FleetLoadFailed(str(err)))

    @work(thread=True, exclusive=True, group="filter", exit_on_error=False)
    def run_filter(self, text: str) -> None:
        catalogs = self.catalogs
        try:
            only, rest = split_sites(text, catalogs)
            chosen = {s: c for s, c in catalogs.items() if only is None or s in only}
            total, hits, capped = search(chosen, rest, stop=worker_cancelled())
        except Stopped:
            return
        except QueryError as err:
            self.post_message(Searched(text, 0, [], str(err)))
            return
        self.post_message(Searched(text, total, hits, capped=capped))

    @work(thread=True, exclusive=True, group="target", exit_on_error=False)
    def check_target(self, key: str, picked: list[tuple[str, CatalogRow]], to: str) -> None:
        """Where the highlighted file would go, with the selection it would be
        restored with (several sites: each under its own folder)."""
        if not to.strip():
            self.post_message(TargetChecked(key, to, "", None, REFUSED))
            return
        try:
            root = restore_root(to, self.fleet.cache)
            planned = plan_restore(picked, root)
        except UnsafePath as err:
            self.post_message(TargetChecked(key, to, "", None, str(err)))
            return
        mine = next(p for p in planned if row_key(p.site, p.row.id) == key)
        self.post_message(TargetChecked(key, to, str(mine.target), mine.exists))

    # handlers --------------------------------------------------------------------

    def on_sites_listed(self, message: SitesListed) -> None:
        self.listed = message.names
        sync_table(
            self.query_one("#fleet-sites", DataTable),
            {name: (name, Text("loading…", style="dim"), "", "") for name in message.names},
        )
        self._status()

    def on_sites_loaded(self, message: SitesLoaded) -> None:
        self.sites = {s.site: s for s in message.sites}
        self._show_sites()
        self._status()

    def on_catalogs_loaded(self, message: CatalogsLoaded) -> None:
        self.catalogs = message.catalogs
        self.fetching = False
        self._show_sites()
        self._status()
        self.run_filter(self.query_one("#fleet-filter", Input).value)

    def on_fleet_load_failed(self, message: FleetLoadFailed) -> None:
        self.fetching = False
        self.load_error = message.error
        self._status()
        self.notify(message.error, title=f"reading {self.where}", severity="error", timeout=10)

    def _show_sites(self) -> None:
        rows: dict[str, tuple[Cell, ...]] = {}
        for name, site in self.sites.items():
            if site.usable:
                catalog = self.catalogs.get(name)
                entries = f"{len(catalog):,}" if catalog is not None else "…"
                rows[name] = (name, snapshot_time(site.taken_at), entries, _locks(site))
            else:
                # Listed, with why, rather than left out: a host that stopped
                # shipping is what the operator needs to see here.
                rows[name] = (
                    Text(name, style="dim"),
                    Text("no usable snapshot", style="dim"),
                    "",
                    Text(site.problem or "", style="red"),
                )
        sync_table(self.query_one("#fleet-sites", DataTable), rows)

    def _status(self) -> None:
        line = self.query_one("#status-line", Static)
        if self.load_error is not None:
            line.update(Text(f"cannot read {self.where}: {self.load_error}", style="bold red"))
            return
        if self.fetching:
            n = len(self.listed)
            text = (
                f"loading {n} sites… (each one's newest manifest snapshot)"
                if self.listed
                else f"listing the sites under {self.where}…"
            )
            if self.sites:
                text = f"loading {sum(s.usable for s in self.sites.values())} sites' catalogs…"
            line.update(text)
            return
        if not self.sites:
            line.update(
                Text(f"no sites under {self.where}: nothing has shipped there yet", style="yellow")
            )
            return
        unusable = sum(not s.usable for s in self.sites.values())
        entries = sum(len(c) for c in self.catalogs.values())
        # What matters first: at 80 columns the end of the line is cut.
        parts = [f"fleet: {len(self.sites)} sites"]
        if unusable:
            parts[-1] += f" ({unusable} without a usable snapshot)"
        if self.running:
            parts.append(self.running)
        parts += [f"{entries:,} entries", "read-only", self.where]
        line.update(" · ".join(parts))

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if not self.fetching:
            self.run_filter(event.value)

    @on(Input.Submitted, "#fleet-filter")
    @on(Input.Submitted, "#fleet-to")
    def action_focus_table(self) -> None:
        self.query_one("#fleet-table", DataTable).focus()

    def on_searched(self, message: Searched) -> None:
        # The filter runs in a thread no one can interrupt: a result for text
        # since changed arrives late and is dropped (the restore browser's rule).
        if message.query != self.query_one("#fleet-filter", Input).value:
            return
        if message.error:
            self.query_one("#fleet-count", Static).update(Text(message.error, style="bold red"))
            return
        self.total = message.total
        self.capped = message.capped
        ordered = sorted(message.rows, key=lambda hit: (hit[1].relpath, hit[0], hit[1].id))
        self.rows = {row_key(site, row.id): (site, row) for site, row in ordered}
        sync_table(
            self.query_one("#fleet-table", DataTable),
            {key: self._cells(key, site, row) for key, (site, row) in self.rows.items()},
            sort_by="path",
        )
        self._show_count()
        self._select_wanted()
        self._preview()

    def _select_wanted(self) -> None:
        wanted, self.wanted = self.wanted, None
        if wanted is None:
            return
        if wanted not in self.rows:
            self.notify(f"{wanted} is not among the rows listed", severity="warning")
            return
        table = self.query_one("#fleet-table", DataTable)
        table.move_cursor(row=table.get_row_index(wanted))
        table.focus()

    def _cells(self, key: str, site: str, row: CatalogRow) -> tuple[Cell, ...]:
        where: Cell = name_cell(row.gz_path)
        if row.member_offset is not None:
            where = name_cell(f"{row.gz_path} (member at byte {row.member_offset})")
        if row.copies == "local":
            # The snapshot says its ship never sent it: a restore reports it missing.
            where = Text(f"{shown(row.gz_path)} · NOT SHIPPED", style="yellow")
        return (
            "✓" if key in self.selected else "",
            site,
            name_cell(row.relpath),
            human(row.bytes),
            row.status,
            clock_time(row.mtime_ns // 1_000_000),
            where,
        )

    def _show_count(self) -> None:
        if not self.catalogs:
            # Nothing to search: the status line and the sites table say why.
            self.query_one("#fleet-count", Static).update("")
            return
        size = sum(len(c) for c in self.catalogs.values())
        shown = f" (first {len(self.rows)} shown)" if self.total > len(self.rows) else ""
        picked = f" · {len(self.selected)} selected" if self.selected else ""
        many = "more than " if self.capped else ""
        self.query_one("#fleet-count", Static).update(
            f"{many}{self.total:,} of {size:,} entries in {len(self.catalogs)} sites "
            f"match{shown}{picked}"
        )

    def _current(self) -> tuple[str, CatalogRow] | None:
        key = cursor_key(self.query_one("#fleet-table", DataTable))
        return self.rows.get(key) if key else None

    def _picked(self) -> list[tuple[str, CatalogRow]]:
        """What a restore would take: the selected rows shown, else the highlighted one."""
        picked = [self.rows[k] for k in sorted(self.selected) if k in self.rows]
        if not picked and (current := self._current()) is not None:
            picked = [current]
        return picked

    @on(DataTable.RowHighlighted, "#fleet-table")
    @on(Input.Changed, "#fleet-to")
    def _preview(self) -> None:
        preview = self.query_one("#fleet-preview", Static)
        current = self._current()
        if current is None:
            preview.update("")
            return
        site, row = current
        preview.update(Text(self._head(site, row)) + Text("checking the target…", style="dim"))
        picked = self._picked()
        if current not in picked:
            picked.append(current)
        key = row_key(site, row.id)
        self.check_target(key, picked, self.query_one("#fleet-to", Input).value)

    def _head(self, site: str, row: CatalogRow) -> str:
        return (
            f"{site}  ·  {shown(row.relpath)}  ·  {human(row.bytes)}  ·  "
            f"sha256 {row.sha256[:16]}…  ·  "
            f"modified {clock_time(row.mtime_ns // 1_000_000)}  ·  {row.status}\n"
        )

    def on_target_checked(self, message: TargetChecked) -> None:
        current = self._current()
        if current is None or row_key(current[0], current[1].id) != message.key:
            return  # the cursor moved on since
        if message.to != self.query_one("#fleet-to", Input).value:
            return  # checked against a target since edited: a newer check is coming
        site, row = current
        if message.exists is None and message.detail == REFUSED:
            where = Text("no target directory yet: type one (t)", style="yellow")
        elif message.exists is None:
            where = Text(f"refused: {message.detail}", style="bold red")
        elif message.exists:
            where = Text(f"→ {message.target}  (EXISTS: left untouched)", style="yellow")
        else:
            where = Text(f"→ {message.target}  (free)")
        whence = Text(f"  ·  from {self.where}/{site}/", style="dim")
        self.query_one("#fleet-preview", Static).update(
            Text(self._head(site, row)) + where + whence
        )

    # actions ---------------------------------------------------------------------

    def action_select_row(self) -> None:
        current = self._current()
        if current is None:
            return
        key = row_key(current[0], current[1].id)
        self.selected ^= {key}
        self.query_one("#fleet-table", DataTable).update_cell(
            key, "sel", "✓" if key in self.selected else ""
        )
        self._show_count()
        self._preview()

    def action_focus_filter(self) -> None:
        self.query_one("#fleet-filter", Input).focus()

    async def action_find(self) -> None:
        if self.fetching:
            self.notify("the sites are still loading", severity="warning")
            return
        await self.app.push_screen(
            FindScreen(
                self._find,
                self._found_picked,
                sites=True,
                offers=("select",),
                hint="find at every site: a glob ('**/*.log', anchored at live_root) "
                "or part of a path",
            )
        )

    async def _find(self, pattern: str) -> tuple[list[tuple[str, Version]], str]:
        found = await self.fleet.find(pattern)
        rows = [(site, v) for site, f in sorted(found.sites.items()) for v in f.versions]
        gone = ", ".join(f"{shown(site)} ({why})" for site, why in sorted(found.problems.items()))
        return rows, f"not searched: {gone}" if gone else ""

    def _found_picked(self, site: str, v: Version, what: Pick) -> None:
        """The row the find box chose: listed here (its site and path as the
        filter) and highlighted."""
        self.wanted = row_key(site, v.entry.id)
        box = self.query_one("#fleet-filter", Input)
        text = f"site:{site} {v.entry.relpath}"
        if box.value == text:
            self.run_filter(text)
        else:
            box.value = text

    def action_focus_to(self) -> None:
        self.query_one("#fleet-to", Input).focus()

    def action_reload(self) -> None:
        if self.running:
            self.notify("a restore is running; reload when it ends", severity="warning")
            return
        self.fetching = True
        self.load_error = None
        self.sites = {}
        self._status()
        self.load()
        self.notify(f"reading {self.where} again")

    def action_stop(self) -> None:
        if self.cancel_token is None or not self.running:
            self.notify("nothing is running")
            return
        self.cancel_token.cancel("stopped from the fleet view")

    def action_help(self) -> None:
        self.app.push_screen(
            HelpScreen(
                self.unavailable(),
                actions=FLEET_ACTIONS,
                title=f"coldkeep fleet view ({self.where}): keys",
                foot=FLEET_HELP,
            )
        )

    def unavailable(self) -> dict[str, str]:
        """Why an action cannot run now, by name (help says it)."""
        why: dict[str, str] = {}
        if self.running:
            why["reload"] = "a restore is running"
        else:
            why["stop"] = "nothing is running"
        if self.fetching:
            why["restore"] = "the sites are still loading"
        elif not self.query_one("#fleet-to", Input).value.strip():
            why["restore"] = "no target directory yet (t)"
        return why

    @on(Button.Pressed, "#fleet-go")
    def action_restore(self) -> None:
        if self.running:
            self.notify(f"{self.running}: stop it first (x) or wait", severity="warning")
            return
        if self.fetching:
            self.notify("the sites are still loading", severity="warning")
            return
        self.confirm_restore()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_restore(self) -> None:
        picked = self._picked()
        if not picked:
            self.notify("nothing selected: space selects, r restores", severity="warning")
            return
        to = self.query_one("#fleet-to", Input).value.strip()
        if not to:
            self.notify(REFUSED, severity="warning")
            self.action_focus_to()
            return
        try:
            root = await asyncio.to_thread(restore_root, to, self.fleet.cache)
            planned = await asyncio.to_thread(plan_restore, picked, root)
        except UnsafePath as err:
            self.notify(str(err), severity="error")
            return
        planned.sort(key=lambda p: (p.site, p.row.relpath, p.row.id))
        sites = sorted({p.site for p in planned})
        size = human(sum(p.row.bytes for p in planned))
        one = len(sites) == 1
        whose = sites[0] if one else f"{len(sites)} sites ({', '.join(sites)})"
        into = str(root) if one else f"{root}/<site>/"
        unshipped = sum(p.row.copies == "local" for p in planned)
        there = sum(p.exists for p in planned)
        summary = (
            f"Each file is read back from {self.where}/{sites[0] if one else '<site>'}/ and "
            "its sha256 checked before it is placed. Nothing is written to the remote or "
            "to any site."
        )
        if there:
            summary += f"\n{files(there)} already there: left untouched."
        warning = "Existing files are never overwritten: they are reported and left alone."
        if unshipped:
            warning += f" {files(unshipped)} never shipped (not on the remote): reported missing."
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                f"Restore {files(len(planned))} ({size}) of {whose} to {into}",
                summary,
                # "Now" before the long path, so that a narrow dialog never cuts it.
                columns=("Site", "Path", "Size", "Now", "Written to"),
                rows=[
                    (
                        p.site,
                        name_cell(p.row.relpath),
                        human(p.row.bytes),
                        Text("EXISTS", style="bold yellow") if p.exists else "free",
                        str(p.target),
                    )
                    for p in planned[:CONFIRM_ROWS]
                ],
                warning=warning,
                confirm="Restore",
            )
        )
        if ok and not self.running:
            self.start_restore(planned, root)

    def start_restore(self, planned: list[Planned], root: Path) -> None:
        """Run the confirmed restore in a worker, one site after another; its end
        comes back as ``RestoreEnded``."""
        by_site: dict[str, list[int]] = defaultdict(list)
        for p in planned:
            by_site[p.site].append(p.row.id)
        roots = {p.site: p.base for p in planned}
        token = self.cancel_token = CancelToken()
        stream = _Counting(len(planned), self.post_message)
        self.running = f"restoring {files(len(planned))}…"
        self._status()

        async def run() -> None:
            report, sites = RestoreReport(), []
            stopped = error = None
            try:
                for site, ids in by_site.items():
                    got = await self.fleet.restore(
                        site, ids, roots[site], stream=stream, cancel=token
                    )
                    report.files += got.files
                    sites += [site] * len(got.files)
            except Cancelled as err:
                stopped = str(err) or token.reason
            except (RemoteError, ManifestError, UnsafePath, OSError, sqlite3.Error) as err:
                error = str(err)
            self.post_message(RestoreEnded(root, report, sites, stopped, error))

        self.run_worker(run(), group="operation", exclusive=True, exit_on_error=False)

    def on_restore_progress(self, message: RestoreProgress) -> None:
        if self.running:
            self.running = f"restoring {message.done}/{files(message.total)}… (x stops)"
            self._status()

    def on_restore_ended(self, message: RestoreEnded) -> None:
        self.running = None
        self.cancel_token = None
        self.last = report = message.report
        self._status()
        title = f"restore to {message.root}"
        if message.error is not None:
            self.notify(message.error.splitlines()[0], title=title, severity="error", timeout=10)
        elif message.stopped is not None:
            self.notify(f"{message.stopped}: {headline(report)}", title=title, severity="warning")
        else:
            severity: SeverityLevel = "warning" if report.failed else "information"
            self.notify(headline(report), title=title, severity=severity)
        self._show_results(report, message.sites)
        self._preview()  # the highlighted file's target may exist now

    def _show_results(self, report: RestoreReport, sites: list[str]) -> None:
        table = self.query_one("#fleet-results", DataTable)
        table.display = bool(report.files)
        table.clear()
        for site, f in zip(sites, report.files, strict=True):
            table.add_row(
                result_cell(f.result), site, name_cell(f.relpath), name_cell(f.detail or f.target)
            )
        shown = self.query_one("#fleet-table", DataTable)
        for key in self.selected & self.rows.keys():
            shown.update_cell(key, "sel", "")
        self.selected.clear()
        self._show_count()

    async def action_quit(self) -> None:
        if not self.running:
            self.app.exit()
            return
        self.confirm_quit()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_quit(self) -> None:
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                "Quit while a restore runs?",
                "The restore stops before its next file (the one being written is "
                "removed), then the fleet view quits.",
                warning="The files restored so far stay where they are.",
                confirm="Stop and quit",
            )
        )
        if not ok:
            return
        if self.cancel_token is not None:
            self.cancel_token.cancel("the fleet view is quitting")
        for worker in self.app.workers:
            if worker.group == "operation":
                await worker.wait()
        self.app.exit()


# the app -----------------------------------------------------------------------


class FleetApp(App[None]):
    """The fleet view's app: the main console's look (its stylesheet: dialogs,
    help), one screen, the fleet's registry in the palette."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    CSS = """
    #fleet-sites { height: auto; max-height: 8; scrollbar-size-horizontal: 0; }
    #fleet-count, #fleet-preview { height: auto; padding: 0 1; }
    #fleet-table { height: 1fr; min-height: 4; }
    #fleet-controls { height: 3; }
    #fleet-to { width: 1fr; }
    #fleet-results { height: auto; max-height: 7; }
    """
    TITLE = "coldkeep fleet"

    def __init__(
        self, remote: RemoteSettings, cache: Path, identities: Identities | None = None
    ) -> None:
        super().__init__()
        self.fleet = Fleet(remote, cache, identities)
        self.view = FleetScreen(self.fleet)

    def get_default_screen(self) -> Screen[Any]:
        return self.view

    async def on_unmount(self) -> None:
        await self.fleet.close()

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for a in FLEET_ACTIONS:
            yield SystemCommand(
                a.label, f"{a.help} \\[{a.key_label}]", partial(self.view.run_action, a.name)
            )

    def busy_workers(self) -> list[Worker[Any]]:
        return busy(self)

    def flush_panes(self) -> None:
        """Nothing waits for a frame here: every handler draws what it is told."""
