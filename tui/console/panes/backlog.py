"""Backlog: what a pass would take now: files per unit, rows per month, totals.

The pane counts it itself (``load``: a worker that posts ``BacklogLoaded``, which
the app keeps too); the app asks again when files may have aged into
eligibility or the live tree changed."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.times import now_ms
from coldkeep.core.files.scan import ScanError
from coldkeep.core.ops.plan import Plan
from coldkeep.core.store.connection import ManifestError

from ...text.fmt import age, human, plural
from ...text.plan import months
from ..kit.messages import BacklogLoaded, LoadFailed
from ..widgets.tables import keyed_table, sync_table
from .base import Pane


class BacklogPane(Pane):
    TITLE: ClassVar[str] = "Backlog"

    def __init__(self) -> None:
        super().__init__()
        self.clock: Callable[[], int] = now_ms  # ages are measured against it

    def load(self, archiver: Archiver) -> None:
        self.clock = archiver.clock
        self._count(archiver)

    @work(exclusive=True, group="backlog", exit_on_error=False)
    async def _count(self, archiver: Archiver) -> None:
        try:
            self.post_message(BacklogLoaded(await archiver.backlog()))
        except (ManifestError, ScanError, OSError) as err:
            self.post_message(LoadFailed("the backlog", str(err)))

    def on_backlog_loaded(self, message: BacklogLoaded) -> None:
        self.show(message.plan, self.clock())

    def compose(self) -> ComposeResult:
        yield Static("counting…", id="backlog-total", classes="pane-summary")
        yield keyed_table(
            "backlog-units",
            [("Unit", "unit"), ("Files", "files"), ("Size", "size"), ("Oldest", "oldest")],
            zebra_stripes=True,
        )
        yield keyed_table(
            "backlog-months", [("Month", "month"), ("Rows", "rows"), ("~Size", "size")]
        )

    def show(self, plan: Plan, now_ms: int) -> None:
        sync_table(
            self.query_one("#backlog-units", DataTable),
            {
                u.unit: (
                    u.unit,
                    u.files,
                    human(u.bytes),
                    age(now_ms / 1000 - u.oldest_mtime_ns / 1e9),
                )
                for u in plan.units
            },
            sort_by="unit",
        )
        events = plan.events
        sync_table(
            self.query_one("#backlog-months", DataTable),
            {month: (month, rows, human(size)) for month, (rows, size) in months(events).items()},
            sort_by="month",
        )
        skipped = ", ".join(
            f"{n} {why.replace('_', ' ')}" for why, n in sorted(plan.skipped.items())
        )
        rows = "no state_db"
        if events:
            n = events.rows
            rows = f"{n:,} {'row' if n == 1 else 'rows'} ~{human(events.approx_bytes)}"
        if plan.events_error:
            rows = f"events: {plan.events_error}"
        files, units = plural(plan.files, "file"), plural(len(plan.units), "unit")
        total = f"{files} {human(plan.bytes)} in {units} · {rows}"
        if skipped:
            total += f"\nwaiting: {skipped}"
        self.query_one("#backlog-total", Static).update(total)
