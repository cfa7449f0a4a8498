"""The fleet view's screen: it owns the state (the sites, their catalogs, the
matches listed, the selection, the restore running) and every handler that
changes it, lays the view out and acts on its registry's keys (actions.py).
What it shows is worked out beside it: each site's state (sites.py), the
table of matches (matches.py), a restore to a folder (restore.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Input, Static

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.layout import UnsafePath
from coldkeep.core.files.catalog import Catalog, CatalogRow, close_all
from coldkeep.core.files.find import Version
from coldkeep.core.files.restore import RestoreReport
from coldkeep.core.ops.fleet import Fleet, FleetSite

from ...operations.registry import headline
from ...text.fmt import shown
from ..kit.actions import bindings
from ..screens import ConfirmScreen, HelpScreen
from ..screens.browse import FILTER_HINT, FilterInput, Listing, result_cell, worker_cancelled
from ..screens.find import FindScreen, Pick
from ..widgets.fields import Field
from ..widgets.tables import (
    Cell,
    MeasuredTable,
    cursor_key,
    keyed_table,
    name_cell,
    sync_table,
)
from . import matches, restore, sites
from .actions import FLEET_ACTIONS, FLEET_HELP
from .messages import (
    CatalogsLoaded,
    FleetLoadFailed,
    RestoreEnded,
    RestoreProgress,
    Searched,
    SitesListed,
    SitesLoaded,
    TargetChecked,
)
from .site import SiteScreen

# Matches added to the table at one frame (show_rows).
ROWS_PER_FRAME = 100


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
        self.listing = Listing()  # the filter text the rows answer once all are in

    def compose(self) -> ComposeResult:
        yield Static("", id="status-line")
        yield keyed_table("fleet-sites", sites.COLUMNS)
        yield FilterInput(
            placeholder=FILTER_HINT.replace("filter: ", "filter every site: ") + " site:NAME",
            id="fleet-filter",
        )
        yield Static("", id="fleet-count")
        yield keyed_table("fleet-table", matches.COLUMNS)
        yield Static("", id="fleet-preview")
        with Horizontal(id="fleet-controls"):
            yield Field(
                placeholder="restore under this directory (required: never in place)",
                id="fleet-to",
            )
            yield Button("Restore \\[r]", id="fleet-go", variant="warning")
        results = MeasuredTable(id="fleet-results", cursor_type="row")
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
        """Each site's state gathered (sites.py): each step a message, so the
        screen fills as it goes."""
        await sites.gather(self.fleet, self.post_message)

    @work(thread=True, exclusive=True, group="filter", exit_on_error=False)
    def run_filter(self, text: str) -> None:
        found = matches.matching(self.catalogs, text, stop=worker_cancelled())
        if found is not None:
            self.post_message(found)

    @work(thread=True, group="close", exit_on_error=False)
    def close_catalogs(self, catalogs: list[Catalog]) -> None:
        close_all(catalogs)

    @work(thread=True, exclusive=True, group="target", exit_on_error=False)
    def check_target(self, key: str, picked: list[tuple[str, CatalogRow]], to: str) -> None:
        """Where the highlighted file would go, with the selection it would be
        restored with (several sites: each under its own folder)."""
        self.post_message(restore.check_target(key, picked, to, self.fleet.cache))

    # handlers --------------------------------------------------------------------

    def on_sites_listed(self, message: SitesListed) -> None:
        self.listed = message.names
        sync_table(self.query_one("#fleet-sites", DataTable), sites.listed_rows(message.names))
        self._status()

    def on_sites_loaded(self, message: SitesLoaded) -> None:
        self.sites = {s.site: s for s in message.sites}
        self._show_sites()
        self._status()

    def on_catalogs_loaded(self, message: CatalogsLoaded) -> None:
        if self.catalogs:  # a reload's: the last load's connections closed
            self.close_catalogs(list(self.catalogs.values()))
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
        table = self.query_one("#fleet-sites", DataTable)
        waiting = [name for name in self.listed if name not in self.sites]
        rows = {**sites.listed_rows(waiting), **sites.site_rows(self.sites, self.catalogs)}
        sync_table(table, rows)
        # The sick hosts on top: by health, the longest quiet first within one.
        order = {name: (s.health.sort_key(), name) for name, s in self.sites.items()}
        table.sort("site", key=lambda cell: order.get(str(cell), ((9, 0), str(cell))))

    def _status(self) -> None:
        self.query_one("#status-line", Static).update(
            sites.status_line(
                self.where,
                load_error=self.load_error,
                fetching=self.fetching,
                listed=self.listed,
                sites=self.sites,
                catalogs=self.catalogs,
                running=self.running,
            )
        )

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if not self.fetching:
            self.run_filter(event.value)

    @on(Input.Submitted, "#fleet-filter")
    @on(Input.Submitted, "#fleet-to")
    def action_focus_table(self) -> None:
        self.set_focus(self.query_one("#fleet-table", DataTable))  # at once, as in restore.py

    def action_focus_sites(self) -> None:
        self.set_focus(self.query_one("#fleet-sites", DataTable))

    def on_searched(self, message: Searched) -> None:
        # The filter runs in a thread no one can interrupt: a result for text
        # since changed arrives late and is dropped (the restore browser's rule).
        if message.query != self.query_one("#fleet-filter", Input).value:
            return
        if message.error:
            self.query_one("#fleet-count", Static).update(Text(message.error, style="bold red"))
            self.listing.listed(message.query)
            return
        self.total = message.total
        self.capped = message.capped
        # In path order as listed (matching: one order for the whole table).
        self.rows = {matches.row_key(site, row.id): (site, row) for site, row in message.rows}
        self.show_rows(self.rows, message.query)
        self._show_count()
        self._preview()

    @work(exclusive=True, group="fill", exit_on_error=False)
    async def show_rows(self, rows: dict[str, tuple[str, CatalogRow]], query: str) -> None:
        """The table made to hold ``rows`` (the matches ``query`` listed), at most
        ``ROWS_PER_FRAME`` more of them than it holds added at each frame
        until all are: a table measures every new cell before the next frame,
        and 500 rows added at once kept the screen from answering for 125 ms.
        A worker, so that a newer filter's answer replaces it, and whoever
        waits for the screen to settle waits for the table to fill."""
        table = self.query_one("#fleet-table", DataTable)
        budget = 0
        while True:
            budget += ROWS_PER_FRAME
            now: dict[str, tuple[Cell, ...]] = {}
            for key, (site, row) in rows.items():
                if key in table.rows or len(now) < budget:
                    now[key] = matches.cells(key in self.selected, site, row)
            sync_table(table, now, sort_by="path")
            if len(now) == len(rows):
                break
            budget = len(now)
            await self._drawn()
        self._select_wanted()
        self.listing.listed(query)

    async def _drawn(self) -> None:
        """Once the screen has been drawn again."""
        drawn: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def now() -> None:
            if not drawn.done():  # the worker cancelled: nothing waits
                drawn.set_result(None)

        self.call_after_refresh(now)
        await drawn

    def _listed_now(self, act: Callable[[], None]) -> bool:
        """Whether the table lists what the filter says now (``Listing``)."""
        return self.listing.ready(self.query_one("#fleet-filter", Input).value, act)

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

    def _show_count(self) -> None:
        self.query_one("#fleet-count", Static).update(
            matches.count_line(
                self.total, self.capped, len(self.rows), len(self.selected), self.catalogs
            )
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
        preview.update(Text(matches.head(site, row)) + Text("checking the target…", style="dim"))
        picked = self._picked()
        if current not in picked:
            picked.append(current)
        key = matches.row_key(site, row.id)
        self.check_target(key, picked, self.query_one("#fleet-to", Input).value)

    def on_target_checked(self, message: TargetChecked) -> None:
        current = self._current()
        if current is None or matches.row_key(current[0], current[1].id) != message.key:
            return  # the cursor moved on since
        if message.to != self.query_one("#fleet-to", Input).value:
            return  # checked against a target since edited: a newer check is coming
        site, row = current
        whence = Text(f"  ·  from {self.where}/{site}/", style="dim")
        self.query_one("#fleet-preview", Static).update(
            Text(matches.head(site, row)) + restore.target_words(message) + whence
        )

    # actions ---------------------------------------------------------------------

    def action_select_row(self) -> None:
        if not self._listed_now(self.action_select_row):
            return
        current = self._current()
        if current is None:
            return
        key = matches.row_key(current[0], current[1].id)
        self.selected ^= {key}
        self.query_one("#fleet-table", DataTable).update_cell(
            key, "sel", "✓" if key in self.selected else ""
        )
        self._show_count()
        self._preview()

    def action_select_all(self) -> None:
        """Every match listed selected; when every one already is, none."""
        if not self._listed_now(self.action_select_all):
            return
        listed = set(self.rows)
        self.selected = set() if listed and listed <= self.selected else self.selected | listed
        table = self.query_one("#fleet-table", DataTable)
        with self.app.batch_update():
            # Those not in the table yet are added as selected (show_rows).
            for key in listed & {k.value for k in table.rows}:
                table.update_cell(key, "sel", "✓" if key in self.selected else "")
        self._show_count()
        self._preview()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a site: its health and heartbeat, line by line."""
        if event.data_table.id != "fleet-sites":
            return
        site = self.sites.get(str(event.row_key.value))
        if site is None:  # still loading
            return
        self.app.push_screen(SiteScreen(site), self._site_closed)

    def _site_closed(self, text: str | None) -> None:
        if text is None:
            return
        field = self.query_one("#fleet-filter", Input)
        field.value = text
        self.set_focus(field)

    def action_focus_filter(self) -> None:
        self.set_focus(self.query_one("#fleet-filter", Input))

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
        self.wanted = matches.row_key(site, v.entry.id)
        box = self.query_one("#fleet-filter", Input)
        text = f"site:{site} {v.entry.relpath}"
        if box.value == text:
            self.run_filter(text)
        else:
            box.value = text

    def action_events(self) -> None:
        """The lake's Events screen: over the selected files' sites, else every site.
        Imported when first opened, as the main console's: its charts load plotext."""
        from .events import FleetEventsScreen  # noqa: PLC0415

        chosen = sorted({self.rows[k][0] for k in self.selected if k in self.rows})
        self.app.push_screen(FleetEventsScreen(self.fleet.remote, chosen or None))

    def action_focus_to(self) -> None:
        self.set_focus(self.query_one("#fleet-to", Input))

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
        if self._listed_now(self.action_restore):
            self.confirm_restore()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_restore(self) -> None:
        picked = self._picked()
        if not picked:
            self.notify("nothing selected: space selects, r restores", severity="warning")
            return
        to = self.query_one("#fleet-to", Input).value.strip()
        if not to:
            self.notify(restore.REFUSED, severity="warning")
            self.action_focus_to()
            return
        try:
            root = await asyncio.to_thread(restore.restore_root, to, self.fleet.cache)
            planned = await asyncio.to_thread(restore.plan_restore, picked, root)
        except UnsafePath as err:
            self.notify(str(err), severity="error")
            return
        planned.sort(key=lambda p: (p.site, p.row.relpath, p.row.id))
        ok = await self.app.push_screen_wait(restore.question(planned, root, self.where))
        if ok and not self.running:
            self.start_restore(planned, root)

    def start_restore(self, planned: list[restore.Planned], root: Path) -> None:
        """Run the confirmed restore in a worker, one site after another; its end
        comes back as ``RestoreEnded``."""
        token = self.cancel_token = CancelToken()
        stream = restore.Counting(len(planned), self.post_message)
        self.running = f"restoring {restore.files(len(planned))}…"
        self._status()

        async def run() -> None:
            self.post_message(await restore.restore(self.fleet, planned, root, stream, token))

        self.run_worker(run(), group="operation", exclusive=True, exit_on_error=False)

    def on_restore_progress(self, message: RestoreProgress) -> None:
        if self.running:
            self.running = f"restoring {message.done}/{restore.files(message.total)}… (x stops)"
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
            # Stopped before its first file: its counts are empty, which the
            # restore's own words call "nothing selected".
            done = headline(report) if report.counts else "no file restored yet"
            self.notify(f"{message.stopped}: {done}", title=title, severity="warning")
        else:
            severity: SeverityLevel = "warning" if report.failed else "information"
            self.notify(headline(report), title=title, severity=severity)
        self._show_results(report, message.sites)
        self._preview()  # the highlighted file's target may exist now

    def _show_results(self, report: RestoreReport, site_of: list[str]) -> None:
        table = self.query_one("#fleet-results", DataTable)
        table.display = bool(report.files)
        table.clear()
        for site, f in zip(site_of, report.files, strict=True):
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
