"""Jobs: each scheduled job (its schedule, next fire, last success, running or not)
and the history of their runs; ``j`` runs the job chosen in its table now.

The pane reads them itself (``load``: a worker that posts ``JobsLoaded`` to the
pane) from the config's [jobs] and the manifest's job runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from zoneinfo import ZoneInfo

from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import DataTable

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.configjobs import JobsSettings
from coldkeep.core.sched.jobs import JobInfo, job_infos
from coldkeep.core.store.jobruns import JobRun, job_history
from coldkeep.core.store.manifest import Manifest

from ...text.fmt import clock_time
from ..widgets.tables import cursor_key, keyed_table, sync_table
from .base import Pane

RUNS_SHOWN = 30


@dataclass
class JobsLoaded(Message):
    jobs: list[JobInfo]
    runs: list[JobRun]


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

    def load(self, archiver: Archiver) -> None:
        jobs, manifest = archiver.settings.jobs, archiver.layout.manifest
        self._read(jobs, manifest, archiver.clock() / 1000)

    @work(exclusive=True, group="jobs", exit_on_error=False)
    async def _read(self, jobs: JobsSettings, manifest: Path, now_s: float) -> None:
        """The jobs as of ``now_s`` and their last runs (none before there is a
        manifest: an empty one in memory answers for it)."""
        tz = ZoneInfo(jobs.timezone) if jobs.timezone else None
        opened = await Manifest.open_existing(manifest)
        if opened is None:
            empty = await Manifest.open(Path(":memory:"))
            async with empty:
                infos = await job_infos(empty, jobs.jobs, tz, now_s)
            self.post_message(JobsLoaded(infos, []))
            return
        async with opened:
            infos = await job_infos(opened, jobs.jobs, tz, now_s)
            self.post_message(JobsLoaded(infos, await job_history(opened, RUNS_SHOWN)))

    def on_jobs_loaded(self, message: JobsLoaded) -> None:
        self.show(message.jobs, message.runs)

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

    def jobs(self) -> int:
        """How many jobs the table lists."""
        return self.query_one("#jobs-table", DataTable).row_count

    def chosen(self) -> str | None:
        """The job the operator chose: the highlighted one while the table has
        focus (its cursor sits on the first row until someone moves it)."""
        table = self.query_one("#jobs-table", DataTable)
        return cursor_key(table) if table.has_focus else None
