"""The job runner's audit (``job_runs``: one row per run, ``waiting`` or
``running`` first, then how it ended) and its state (``job_state``: each job's
last successful run), for sched/jobs.py and whoever shows or measures the jobs.

Invariants:
- ``job_state.last_run_at`` moves only on success (``set_last_ok``): start-up
  compares it with the schedule, so a run that failed is due again.
- Pruning never removes a run still ``running``.
- A run records its owner (core/base/process.py). A run left ``running`` or
  ``waiting`` by a process that has certainly ended (SIGKILL, the host's power)
  is settled ``killed`` by ``settle_killed``, ended when that was learnt; a run of
  a live process, or of another host, is never touched.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from ..base.process import gone, this_process
from .manifest import Manifest

_RUN_COLUMNS = "id, job, trigger, started_at, ended_at, status, error, summary"


@dataclass(frozen=True)
class JobRun:
    id: int
    job: str
    trigger: str
    started_at: int
    ended_at: int | None
    status: str
    error: str | None
    summary: dict[str, Any]

    def describe(self) -> str:
        """How it ended (or why it waits), in one line: ``ok (waited 12 s for pass)``."""
        text = self.status
        if self.status == "waiting":
            text += f" for {self.summary.get('waiting_for', 'another job')}"
        if self.error:
            text += f": {self.error}"
        if "waited_for" in self.summary:
            waited = float(self.summary.get("waited_s", 0))
            text += f" (waited {waited:.0f} s for {self.summary['waited_for']})"
        if "said" in self.summary:  # what the run read and what it left out
            text += f" — {self.summary['said']}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _run(r: Any) -> JobRun:
    return JobRun(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]) if r[7] else {})


async def start_run(manifest: Manifest, job: str, trigger: str, at: int) -> int:
    """A run's row, ``running`` and owned by this process; its id."""
    return await manifest.insert(
        "INSERT INTO job_runs (job, trigger, started_at, owner) VALUES (?, ?, ?, ?)",
        (job, trigger, at, this_process()),
    )


KILLED = "its process ended before the run did (killed, or the host went down)"


async def settle_killed(manifest: Manifest, at: int) -> list[JobRun]:
    """Every run still ``running`` or ``waiting`` whose process has ended, set
    ``killed`` and ended at ``at`` (ms): the runs settled. A run from before
    owners were recorded (schema 20) is settled too: the coldkeep that ran it
    has been replaced by this one."""
    rows = await manifest.rows(
        f"SELECT {_RUN_COLUMNS}, owner FROM job_runs WHERE status IN ('running', 'waiting')"
    )
    dead = [_run(r) for r in rows if r[8] is None or gone(str(r[8]))]
    for run in dead:
        await manifest.run(
            "UPDATE job_runs SET status = 'killed', ended_at = ?, error = ? "
            "WHERE id = ? AND status IN ('running', 'waiting')",
            (at, KILLED, run.id),
        )
    return [dataclasses.replace(run, status="killed", ended_at=at, error=KILLED) for run in dead]


async def end_run(
    manifest: Manifest,
    run_id: int,
    *,
    at: int,
    status: str,
    error: str | None,
    summary: dict[str, Any],
) -> None:
    await manifest.run(
        "UPDATE job_runs SET ended_at = ?, status = ?, error = ?, summary = ? WHERE id = ?",
        (at, status, error, json.dumps(summary, default=str), run_id),
    )


async def set_last_ok(manifest: Manifest, job: str, started_at: int) -> None:
    """``job``'s run that started at ``started_at`` succeeded."""
    await manifest.run(
        "INSERT INTO job_state (job, last_run_at) VALUES (?, ?) "
        "ON CONFLICT (job) DO UPDATE SET last_run_at = excluded.last_run_at",
        (job, started_at),
    )


async def set_waiting(manifest: Manifest, run_id: int, behind: str) -> None:
    """The run waits for ``behind`` to let go of the archive lock."""
    await manifest.run(
        "UPDATE job_runs SET status = 'waiting', summary = ? WHERE id = ?",
        (json.dumps({"waiting_for": behind}), run_id),
    )


async def set_running(manifest: Manifest, run_id: int) -> None:
    await manifest.run("UPDATE job_runs SET status = 'running' WHERE id = ?", (run_id,))


async def prune_before(manifest: Manifest, cutoff: int) -> None:
    """Runs that started before ``cutoff`` (ms) and are over."""
    await manifest.run(
        "DELETE FROM job_runs WHERE started_at < ? AND status != 'running'", (cutoff,)
    )


async def prune_beyond(manifest: Manifest, rows: int) -> None:
    """Each job's runs beyond its newest ``rows``."""
    await manifest.run(
        "DELETE FROM job_runs WHERE id IN (SELECT id FROM (SELECT id, ROW_NUMBER() "
        "OVER (PARTITION BY job ORDER BY started_at DESC, id DESC) AS n FROM job_runs) "
        "WHERE n > ?)",
        (rows,),
    )


async def last_runs(manifest: Manifest) -> dict[str, int]:
    """Each job's last SUCCESSFUL run (its start, ms)."""
    rows = await manifest.rows(
        "SELECT job, last_run_at FROM job_state WHERE last_run_at IS NOT NULL"
    )
    return {str(r[0]): int(r[1]) for r in rows}


async def latest_statuses(manifest: Manifest) -> dict[str, str]:
    """Each job's most recent run's status (``running`` if the process died in it)."""
    rows = await manifest.rows(
        "SELECT job, status FROM job_runs WHERE id IN (SELECT max(id) FROM job_runs GROUP BY job)"
    )
    return {str(r[0]): str(r[1]) for r in rows}


async def job_history(manifest: Manifest, limit: int = 50) -> list[JobRun]:
    rows = await manifest.rows(
        f"SELECT {_RUN_COLUMNS} FROM job_runs ORDER BY id DESC LIMIT ?", (limit,)
    )
    return [_run(r) for r in rows]


async def failed_runs(manifest: Manifest, limit: int) -> list[JobRun]:
    """The last ``limit`` runs that ended in error or timeout or were killed,
    newest first."""
    rows = await manifest.rows(
        f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE status IN ('error', 'timeout', 'killed') "
        "ORDER BY id DESC LIMIT ?",
        (limit,),
    )
    return [_run(r) for r in rows]


async def latest_finished(manifest: Manifest) -> dict[str, JobRun]:
    """Each job's most recent run that has ended, however it ended."""
    rows = await manifest.rows(
        f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE id IN "
        "(SELECT max(id) FROM job_runs WHERE ended_at IS NOT NULL GROUP BY job)"
    )
    return {run.job: run for run in map(_run, rows)}


async def run_counts(manifest: Manifest) -> dict[tuple[str, str], int]:
    """(job, status) -> how many ended runs the audit still holds: pruning lowers it."""
    rows = await manifest.rows(
        "SELECT job, status, count(*) FROM job_runs WHERE ended_at IS NOT NULL GROUP BY job, status"
    )
    return {(str(r[0]), str(r[1])): int(r[2]) for r in rows}
