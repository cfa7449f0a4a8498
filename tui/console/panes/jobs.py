"""Jobs: each scheduled job (its schedule, next fire, last success, running or not)
and the history of their runs; ``j`` runs the selected job now."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.widgets import DataTable

from coldkeep.core.sched.jobs import JobInfo
from coldkeep.core.store.jobruns import JobRun

from ...text.fmt import clock_time
from ..tables import keyed_table, sync_table
from .base import Pane


class JobsPane(Pane):
    TITLE: ClassVar[str] = "Jobs"

    def compose(self) -> ComposeResult:
        yield keyed_table(
            "jobs-table",
            [("Job", "job"), ("Schedule", "schedule"), ("Next", "next"), ("Last ok", "last")],
        )
        yield keyed_table(
            "jobs-runs",
            [("Run", "id"), ("Job", "job"), ("Started", "started"), ("Result", "status")],
        )

    def show(self, jobs: list[JobInfo], runs: list[JobRun]) -> None:
        sync_table(
            self.query_one("#jobs-table", DataTable),
            {
                j.name: (
                    j.name,
                    j.schedule + (" (running)" if j.running else ""),
                    clock_time(int(j.next_fire * 1000)) if j.next_fire else "",
                    clock_time(j.last_ok) if j.last_ok else "never",
                )
                for j in jobs
            },
            sort_by="job",
        )
        sync_table(
            self.query_one("#jobs-runs", DataTable),
            {
                str(r.id): (
                    r.id,
                    r.job,
                    clock_time(r.started_at),
                    r.describe(),
                )
                for r in runs
            },
            sort_by="id",
            reverse=True,
        )

    def selected(self) -> str | None:
        table = self.query_one("#jobs-table", DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
