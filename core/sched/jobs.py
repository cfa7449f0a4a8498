"""The job runner (a runner, one polling job per schedule, a timeout per run):
coldkeep's jobs on cron schedules or intervals, audited in coldkeep.db (its rows:
store/jobruns.py).

Every run writes a ``job_runs`` row, ``running`` first, then ``ok``, ``error``,
``timeout`` or ``cancelled`` with the error text. Hardening, each for a reason:

- ``job_state.last_run_at`` moves only on success, and it is what start-up
  compares with the schedule: a run that was due while the process was down (or
  that failed) fires on boot. An interval job with ``run_on_boot`` fires at once.
- Runs of one job never overlap: a tick that comes while the job still runs is
  skipped and logged, not queued.
- A timeout is decided before the run is told to stop, and a run that finishes in
  the same instant its timeout fires is still recorded as a timeout: otherwise
  the stop could let the run complete first and be recorded ``ok``. Whichever
  comes first decides: a run its owner told to stop (SIGTERM, the console's stop)
  before its deadline is ``cancelled`` even if winding down takes it past the
  deadline; a run past its deadline is a ``timeout`` even if a stop follows.
- Jobs that take the archive lock (``exclusive``) run one at a time: one that comes
  due while another runs is recorded ``waiting`` until it gets its turn (the wait
  is in its summary), never refused by its own scheduler's lock.
- A run whose process was killed (SIGKILL, the power) cannot record its end:
  the next runner to start records it ``killed``, ended then, and it counts, is
  shown and is pruned like any run that ended. Its job is due again (it did not
  succeed).
- ``stop()`` cancels each in-flight run at its next safe point, waits for it, and
  records it ``cancelled`` without touching ``last_run_at``: a job whose owner
  pulled the plug did not finish on its own terms, so it is due again at the
  next start.
- The audit is bounded: runs older than ``retention_days`` and beyond
  ``retention_rows`` per job are pruned, lazily, at most once an hour, and a
  failed prune never disturbs the run that triggered it.
- Nothing here keeps the process alive: the runner is asyncio tasks only, and
  ``stop()`` ends them.

Time comes from a ``Clock``, so tests step through days without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from ..base.cancel import Cancelled, CancelToken
from ..base.configjobs import JobSettings, schedule
from ..base.errors import ColdkeepError
from ..base.times import DAY_S
from ..store import jobruns
from ..store.jobruns import JobRun
from ..store.manifest import Manifest
from .clock import Clock, SystemClock

RunStatus = Literal["waiting", "running", "ok", "error", "timeout", "cancelled", "killed"]
Trigger = Literal["schedule", "boot", "manual"]
PRUNE_EVERY_S = 3600.0
RECHECK_S = 60.0  # the scheduler looks again at least this often


@dataclass(frozen=True)
class Outcome:
    """What a job's handler says about its run."""

    ok: bool
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    cancelled: bool = False


JobHandler = Callable[[CancelToken], Awaitable[Outcome]]


class JobBusy(ColdkeepError):
    """The job is running already; runs of one job never overlap."""


@dataclass(frozen=True)
class JobEvent:
    """What the runner tells its listeners: a run began or ended, a tick was skipped."""

    kind: Literal["run_started", "run_finished", "skipped", "scheduled", "waiting"]
    job: str
    detail: str = ""
    run: JobRun | None = None


@dataclass(frozen=True)
class JobInfo:
    name: str
    schedule: str  # "cron 17 3 * * *" or "every 60 s"
    next_fire: float | None  # seconds since the epoch
    running: bool
    last_ok: int | None  # ms: the last successful run's start


class JobRunner:
    def __init__(
        self,
        manifest: Manifest,
        jobs: Mapping[str, JobSettings],
        handlers: Mapping[str, JobHandler],
        *,
        clock: Clock | None = None,
        timezone: str | None = None,
        retention_days: float = 90.0,
        retention_rows: int = 500,
        on_event: Callable[[JobEvent], None] = lambda _e: None,
        exclusive: Collection[str] = (),
    ) -> None:
        self.manifest = manifest
        self.jobs = {n: j for n, j in jobs.items() if j.enabled and n in handlers}
        self.handlers = handlers
        self.clock = clock or SystemClock()
        self.tz = ZoneInfo(timezone) if timezone else None
        self.retention_days = retention_days
        self.retention_rows = retention_rows
        self.on_event = on_event
        self.next_due: dict[str, float] = {}
        self.running: dict[str, asyncio.Task[JobRun]] = {}
        self.tokens: dict[str, CancelToken] = {}
        self._stopping = False
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._last_prune = float("-inf")
        # Jobs that take the archive lock run one at a time: the lock is per open
        # file, so two of this process's own jobs would refuse each other.
        self.exclusive = set(exclusive)
        self._turn = asyncio.Lock()
        self._turn_holder: str | None = None

    # the schedule ----------------------------------------------------------------

    def next_fire_after(self, name: str, t: float) -> float:
        return next_fire_after(self.jobs[name], self.tz, t)

    def prev_fire(self, name: str, t: float) -> float | None:
        return prev_fire(self.jobs[name], self.tz, t)

    async def last_ok(self, name: str) -> int | None:
        return (await jobruns.last_runs(self.manifest)).get(name)

    async def info(self) -> list[JobInfo]:
        return await job_infos(
            self.manifest,
            self.jobs,
            self.tz,
            self.clock.now(),
            next_due=self.next_due,
            running=set(self.running),
        )

    async def _boot_schedule(self) -> None:
        now = self.clock.now()
        latest = await jobruns.latest_statuses(self.manifest)
        for name, job in self.jobs.items():
            last = await self.last_ok(name)
            prev = self.prev_fire(name, now)
            if job.run_on_boot:
                self.next_due[name] = now
                why = "run on boot"
            elif job.interval_s and last is not None and latest.get(name, "ok") != "ok":
                # Its last run failed, timed out, was stopped or died with the
                # process: retried now, as a cron job's missed run would be.
                self.next_due[name] = now
                why = f"last run {latest[name]}, retrying"
            elif prev is not None and (last is None or last / 1000 < prev):
                # Due while the process was down (or it failed): catch up now.
                self.next_due[name] = now if last is not None else self.next_fire_after(name, now)
                why = "missed, catching up" if last is not None else "first run on schedule"
            elif job.interval_s and last is not None:
                self.next_due[name] = max(now, last / 1000 + job.interval_s)
                why = "on interval"
            else:
                self.next_due[name] = self.next_fire_after(name, now)
                why = "on schedule"
            when = _dt(self.next_due[name], self.tz).isoformat(timespec="seconds")
            detail = f"{why}: next {when}"
            self.on_event(JobEvent("scheduled", name, detail))

    # running ---------------------------------------------------------------------

    async def start(self) -> None:
        """Settle the runs a killed process left ``running``, compute what is due
        (catching up on what was missed) and start ticking."""
        self._stopping = False
        for run in await jobruns.settle_killed(self.manifest, int(self.clock.now() * 1000)):
            self.on_event(JobEvent("run_finished", run.job, "killed", run))
        await self._boot_schedule()
        self._loop_task = asyncio.create_task(self._loop(), name="coldkeep-scheduler")

    async def _loop(self) -> None:
        first = True
        while not self._stopping:
            now = self.clock.now()
            for name in sorted(self.next_due):
                if self.next_due[name] <= now:
                    self._fire(name, "boot" if first else "schedule")
            first = False
            idle = [d for n, d in self.next_due.items() if n not in self.running]
            wait = min([*idle, now + RECHECK_S]) - now
            self._wake.clear()
            sleeper = asyncio.ensure_future(self.clock.sleep(max(wait, 0.0)))
            waker = asyncio.ensure_future(self._wake.wait())
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
            for t in (sleeper, waker):
                t.cancel()

    def _fire(self, name: str, trigger: Trigger) -> None:
        now = self.clock.now()
        self.next_due[name] = self.next_fire_after(name, now)
        if name in self.running:
            self.on_event(JobEvent("skipped", name, "still running from its last tick"))
            return
        self._track(name, asyncio.create_task(self._execute(name, trigger)))

    def _track(self, name: str, task: asyncio.Task[JobRun]) -> None:
        self.running[name] = task

        def done(_task: asyncio.Task[JobRun]) -> None:
            self._done(name)

        task.add_done_callback(done)

    def _done(self, name: str) -> None:
        self.running.pop(name, None)
        self.tokens.pop(name, None)
        self._wake.set()

    async def run_now(self, name: str, token: CancelToken | None = None) -> JobRun:
        """Run a job now, through the same path as the schedule (audited, never
        overlapping a run of the same job); ``token`` stops it."""
        if name not in self.jobs:
            raise KeyError(f"no such job: {name} (jobs: {', '.join(self.jobs)})")
        if name in self.running:
            raise JobBusy(f"job {name} is running already")
        task = asyncio.create_task(self._execute(name, "manual", token))
        self._track(name, task)
        return await task

    async def _execute(
        self, name: str, trigger: Trigger, token: CancelToken | None = None
    ) -> JobRun:
        started = int(self.clock.now() * 1000)
        run_id = await jobruns.start_run(self.manifest, name, trigger, started)
        token = self.tokens[name] = token or CancelToken()
        waited: dict[str, Any] = {}
        async with contextlib.AsyncExitStack() as turn:
            if name in self.exclusive:
                waited = await self._take_turn(name, run_id, token, turn)
            if token.cancelled or self._stopping:
                status: RunStatus = "cancelled"
                error: str | None = f"stopped while waiting: {token.reason or 'stopping'}"
                summary: dict[str, Any] = {}
            else:
                self.on_event(JobEvent("run_started", name, trigger))
                status, error, summary = await self._run_handler(name, token)
        if self._stopping and status != "timeout":
            status, error = "cancelled", "the runner stopped while this run was in flight"
        summary = {**summary, **waited}
        ended = int(self.clock.now() * 1000)
        await jobruns.end_run(
            self.manifest, run_id, at=ended, status=status, error=error, summary=summary
        )
        if status == "ok":
            await jobruns.set_last_ok(self.manifest, name, started)
        run = JobRun(run_id, name, trigger, started, ended, status, error, summary)
        self.on_event(JobEvent("run_finished", name, status, run))
        await self._maybe_prune()
        return run

    async def _take_turn(
        self, name: str, run_id: int, token: CancelToken, turn: contextlib.AsyncExitStack
    ) -> dict[str, Any]:
        """Wait until no other exclusive job of this runner runs (they all need the
        archive lock, and two of them would refuse each other), recorded as
        ``waiting``. Returns what the run's summary says about the wait."""
        if not self._turn.locked():
            await self._turn.acquire()
            turn.callback(self._release_turn)
            self._turn_holder = name
            return {}
        ahead = self._turn_holder or "another job"
        t0 = self.clock.now()
        await jobruns.set_waiting(self.manifest, run_id, ahead)
        self.on_event(JobEvent("waiting", name, f"behind {ahead}, which holds the archive lock"))
        acquire = asyncio.ensure_future(self._turn.acquire())
        stop = asyncio.ensure_future(token.wait())
        try:
            await asyncio.wait({acquire, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not acquire.done():
                acquire.cancel()
        if acquire.done() and not acquire.cancelled():
            turn.callback(self._release_turn)
            self._turn_holder = name
        await jobruns.set_running(self.manifest, run_id)
        return {"waited_for": ahead, "waited_s": round(self.clock.now() - t0, 3)}

    def _release_turn(self) -> None:
        self._turn_holder = None
        self._turn.release()

    async def _run_handler(
        self, name: str, token: CancelToken
    ) -> tuple[RunStatus, str | None, dict[str, Any]]:
        """The handler, raced against the job's timeout."""
        job = self.jobs[name]
        work = asyncio.ensure_future(self.handlers[name](token))
        timer = asyncio.ensure_future(self.clock.sleep(job.timeout_s)) if job.timeout_s else None
        try:
            done, _ = await asyncio.wait(
                {work, *([timer] if timer else [])}, return_when=asyncio.FIRST_COMPLETED
            )
            if timer is None or timer not in done or token.cancelled:
                # No timeout, or its owner had told it to stop before the deadline
                # came (it was winding down): the stop came first and decides.
                if not work.done():
                    await asyncio.wait({work})
                return self._verdict(work)
            # Decided BEFORE the run is told to stop: a run that finishes in this
            # same instant is still a timeout, never an ok.
            error = f"no result within {job.timeout_s:g} s"
            token.cancel(f"job {name} timed out")
            await asyncio.wait({work})
            # Taken here, or asyncio prints it as "never retrieved": the run's
            # Cancelled is the timeout's own doing; anything else is said.
            late = None if work.cancelled() else work.exception()
            if late is not None and not isinstance(late, Cancelled):
                error += f"; stopping it failed: {type(late).__name__}: {late}"
            return "timeout", error, {}
        finally:
            if timer is not None:
                timer.cancel()

    @staticmethod
    def _verdict(work: asyncio.Future[Outcome]) -> tuple[RunStatus, str | None, dict[str, Any]]:
        if work.cancelled():
            return "cancelled", "cancelled", {}
        exc = work.exception()
        if isinstance(exc, Cancelled):
            return "cancelled", str(exc) or "cancelled", {}
        if exc is not None:
            return "error", f"{type(exc).__name__}: {exc}", {}
        outcome = work.result()
        if outcome.cancelled:
            return "cancelled", outcome.error, outcome.summary
        return ("ok" if outcome.ok else "error"), outcome.error, outcome.summary

    async def drain(self) -> None:
        """Wait for the runs in flight to finish (on their own)."""
        while self.running:
            await asyncio.wait(list(self.running.values()))

    async def stop(self) -> None:
        """Stop ticking; cancel in-flight runs at their next safe point and wait."""
        self._stopping = True
        self._wake.set()
        for token in list(self.tokens.values()):
            token.cancel("the scheduler is stopping")
        if self._loop_task is not None:
            await self._loop_task
            self._loop_task = None
        if self.running:
            await asyncio.wait(list(self.running.values()))

    # history -----------------------------------------------------------------------

    async def _maybe_prune(self) -> None:
        now = self.clock.now()
        if now - self._last_prune < PRUNE_EVERY_S:
            return
        self._last_prune = now
        try:
            await self.prune(now)
        except sqlite3.Error as err:
            self.on_event(JobEvent("skipped", "prune", f"audit prune failed (harmless): {err}"))

    async def prune(self, now: float) -> None:
        if self.retention_days > 0:
            cutoff = int((now - self.retention_days * DAY_S) * 1000)
            await jobruns.prune_before(self.manifest, cutoff)
        if self.retention_rows > 0:
            await jobruns.prune_beyond(self.manifest, self.retention_rows)


def _dt(t: float, tz: ZoneInfo | None) -> datetime:
    return datetime.fromtimestamp(t, tz) if tz else datetime.fromtimestamp(t)


def next_fire_after(job: JobSettings, tz: ZoneInfo | None, t: float) -> float:
    if job.cron:
        return float(schedule(job.cron, _dt(t, tz)).get_next(float))
    assert job.interval_s is not None
    return t + job.interval_s


def prev_fire(job: JobSettings, tz: ZoneInfo | None, t: float) -> float | None:
    return float(schedule(job.cron, _dt(t, tz)).get_prev(float)) if job.cron else None


async def job_infos(
    manifest: Manifest,
    jobs: Mapping[str, JobSettings],
    tz: ZoneInfo | None,
    now: float,
    *,
    next_due: Mapping[str, float] | None = None,
    running: set[str] | None = None,
) -> list[JobInfo]:
    """What the schedule looks like (works on a read-only manifest)."""
    last = await jobruns.last_runs(manifest)
    out = []
    for name, job in jobs.items():
        if not job.enabled:
            continue
        schedule = f"cron {job.cron}" if job.cron else f"every {job.interval_s:g} s"
        nxt = (next_due or {}).get(name) or next_fire_after(job, tz, now)
        out.append(JobInfo(name, schedule, nxt, name in (running or set()), last.get(name)))
    return out
