"""Unattended mode: coldkeep's jobs wired to the job runner.

    pass     a pass as the config's mode says (never scheduled in mode "off"), then
             the index of paths brought up to date (find and the console read it)
    verify   verify, at most ``max_duration`` a night, resuming where it stopped;
             a rotating share of the remote copies too (verifyjob.py)
    ship     the archive to the remote tier (only with a [remote] configured)
    expire   archived data past its retention deleted (only with a [retention])
    stats    one row of archive and backlog totals into ``stats`` (for trends)
    alerts   the fire queue: collect alerts, deliver them (alerts.py)
    thaws    each waiting ``restore --thaw`` restored once S3 has thawed its
             objects (with a [remote]); a thaw lost or ended first asked again
    heartbeat  the site's signed beat put in the bucket (with a [remote]; the
             ship sends one too): no lock, so a long pass does not silence it
    checkpoint  one checkpoint of the live database's WAL (a state_db, mode "on"),
             in the checkpoint log: between passes nothing else of coldkeep's
             checkpoints it. No archive lock: SQLite orders checkpoints itself,
             and a verify holding the lock for hours must not hold the WAL back

``Scheduler`` owns one manifest connection for the runner's own tables; each job
works through the same ``Archiver`` the console and the CLI use, so the lock,
the audit, the event stream and attached consoles behave the same whoever
started the work. Pass, verify, ship and expire take the archive lock: the runner runs
them one at a time (the later one waits), so they never refuse each other.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..archiver import Archiver
from ..base.cancel import CancelToken
from ..base.config import Settings
from ..base.lock import LockHeld
from ..events.checkpoint import checkpoint_recorded
from ..files.pathindex import PathIndex, Unusable
from ..ops import beat
from ..ops import restore as restoring
from ..ops.session import open_manifest
from ..remote.connect import connected
from ..store import stats
from ..store.manifest import Manifest
from . import alerts, heap
from .clock import Clock, SystemClock
from .jobs import JobEvent, JobHandler, JobRunner, Outcome
from .verifyjob import run_verify


def handlers(archiver: Archiver, manifest: Manifest, clock: Clock) -> dict[str, JobHandler]:
    settings = archiver.settings

    async def run_pass(token: CancelToken) -> Outcome:
        summary = await archiver.run_pass(token)
        problems = "; ".join(summary.problems) or None
        if summary.files.archived:
            await keep_path_index(archiver, manifest)
        return Outcome(
            summary.status == "ok", summary.to_dict(), problems, summary.status == "cancelled"
        )

    async def verify(token: CancelToken) -> Outcome:
        return await run_verify(archiver, settings.jobs.jobs["verify"], token)

    async def ship(token: CancelToken) -> Outcome:
        report = await archiver.ship(token)
        problems = "; ".join(report.problems[:20]) or None
        return Outcome(not report.failed, report.to_dict(), problems)

    async def expire(token: CancelToken) -> Outcome:
        report = await archiver.expire(token)
        problems = "; ".join(report.problems[:20]) or None
        return Outcome(not report.failed, report.to_dict(), problems)

    async def stats(token: CancelToken) -> Outcome:
        return Outcome(True, await record_stats(archiver, manifest, clock))

    async def deliver(token: CancelToken) -> Outcome:
        now = int(clock.now() * 1000)
        report = await alerts.poll(manifest, settings.alerts, now)
        summary = {"raised": report.raised, "sent": report.sent, "failed": report.failed}
        return Outcome(report.failed == 0, summary, "; ".join(report.errors or []) or None)

    async def checkpoint(token: CancelToken) -> Outcome:
        db = archiver.sessions.state_db("there is no live WAL to checkpoint")
        ran = await checkpoint_recorded(db, settings.events, manifest, archiver.stream)
        return Outcome(ran.error is None, ran.to_dict(), ran.error)

    async def finish_thawed(token: CancelToken) -> Outcome:
        workers = archiver.restore_workers
        report = await restoring.finish_thawed(archiver.sessions, manifest, token, workers)
        failed = ", ".join(f"#{n}" for n in report.failed)
        problem = f"restore --thaw {failed} failed (coldkeep history)" if failed else None
        return Outcome(not report.failed, report.to_dict(), problem)

    table: dict[str, JobHandler] = {
        "pass": locked_out(run_pass),
        "verify": locked_out(verify),
        "ship": locked_out(ship),
        "expire": locked_out(expire),
        "stats": stats,
        "alerts": deliver,
        "checkpoint": checkpoint,
        "thaws": locked_out(finish_thawed),
        "heartbeat": functools.partial(send_beat, archiver, manifest, clock),
    }
    names = job_names(settings)
    return {name: heap.trimmed(handler) for name, handler in table.items() if name in names}


def job_names(settings: Settings) -> frozenset[str]:
    """The jobs this config has: pass unless mode is "off", ship with a [remote]
    (and thaws with one in a bucket: a folder has no cold classes), expire with
    a [retention], checkpoint with a state_db in mode "on" (a
    checkpoint writes the application's database; "plan" only counts). Whether
    [jobs] enables them is the runner's call."""
    names = {"verify", "stats", "alerts"}
    if settings.mode == "on" and settings.state_db is not None:
        names.add("checkpoint")
    if settings.mode != "off":
        names.add("pass")
    if settings.remote is not None:
        names |= {"ship", "heartbeat"}
        if settings.remote.url.startswith("s3:"):
            names.add("thaws")  # only a bucket has cold classes
    if settings.retention.configured:
        names.add("expire")
    return frozenset(names)


# The jobs that take the archive lock: the runner gives them one turn at a time.
LOCK_TAKING = frozenset({"pass", "verify", "ship", "expire", "thaws"})


def locked_out(handler: JobHandler) -> JobHandler:
    """A lock-taking job that finds the archive locked by another process fails
    with the holder in its summary: the alert for it is raised once per holder,
    not once per tick while that holder works."""

    async def run(token: CancelToken) -> Outcome:
        try:
            return await handler(token)
        except LockHeld as err:
            holder = asdict(err.holder) if err.holder else None
            return Outcome(False, {"locked_by": holder}, f"LockHeld: {err}")

    return run


async def keep_path_index(archiver: Archiver, manifest: Manifest) -> None:
    """The index of paths brought up to date after a pass that archived files
    (built the first time: seconds at 10,000,000 entries, in a thread, under no
    lock). ``find`` and the console's filter read it; without the scheduler's, a
    site whose console never opened would never have one (find at 10,000,000
    entries: ~1 s instead of ~0.3 s). A cache: when it cannot be kept, a
    notice says why and nothing else changes."""
    try:
        await asyncio.to_thread(PathIndex(manifest.path).prepare)
    except (Unusable, OSError, sqlite3.Error) as err:
        archiver.stream.notice("warning", f"the index of paths is not kept: {err}")


async def record_stats(archiver: Archiver, manifest: Manifest, clock: Clock) -> dict[str, Any]:
    counts = await manifest.status_counts()
    plan = await archiver.backlog()
    row = {
        "entries": sum(n for n, _, _ in counts.values()),
        "bytes": sum(b for _, b, _ in counts.values()),
        "gz_bytes": sum(g for _, _, g in counts.values()),
        "backlog_files": plan.files,
        "backlog_bytes": plan.bytes,
        "backlog_rows": plan.events.rows if plan.events else 0,
    }
    await stats.record(manifest, int(clock.now() * 1000), row)
    return row


async def send_beat(
    archiver: Archiver, manifest: Manifest, clock: Clock, token: CancelToken
) -> Outcome:
    """The heartbeat job: one beat, or why none was sent (a failed run)."""
    settings = archiver.settings
    assert settings.remote is not None
    async with connected(settings.remote) as store:
        sent = await beat.send(
            settings, manifest, archiver.sessions.layout, store, int(clock.now() * 1000)
        )
    if not isinstance(sent, beat.NotSent):
        unindexed = {} if sent.unindexed is None else {"unindexed": sent.unindexed}
        return Outcome(True, {"heartbeat": sent.key, **unindexed})
    if sent.first_ship:  # a site that never shipped: not a failure
        return Outcome(True, {"heartbeat": None, "skipped": str(sent)})
    return Outcome(False, {"heartbeat": None}, str(sent))


class Scheduler:
    """The runner, its manifest connection and its jobs, for ``coldkeep run`` and
    for the console's "run now"."""

    def __init__(
        self,
        archiver: Archiver,
        *,
        clock: Clock | None = None,
        on_event: Callable[[JobEvent], None] = lambda _e: None,
    ) -> None:
        self.archiver = archiver
        self.clock = clock or SystemClock()
        self.on_event = on_event
        self.manifest: Manifest | None = None
        self.runner: JobRunner | None = None

    async def open(self) -> JobRunner:
        settings = self.archiver.settings
        self.manifest = await open_manifest(self.archiver.layout, settings.live_root)
        self.runner = JobRunner(
            self.manifest,
            settings.jobs.jobs,
            handlers(self.archiver, self.manifest, self.clock),
            clock=self.clock,
            timezone=settings.jobs.timezone,
            retention_days=settings.jobs.retention_days,
            retention_rows=settings.jobs.retention_rows,
            on_event=self.on_event,
            exclusive=LOCK_TAKING,
        )
        return self.runner

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.stop()
        if self.manifest is not None:
            await self.manifest.close()

    async def run_until(self, stop: asyncio.Event) -> None:
        """Start ticking, run until ``stop`` is set, then stop every job at its next
        safe point."""
        runner = self.runner or await self.open()
        await runner.start()
        try:
            await stop.wait()
        finally:
            await self.close()
