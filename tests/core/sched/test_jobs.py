"""The job runner on a manual clock: days pass in milliseconds, nothing sleeps."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.configjobs import JobSettings
from coldkeep.core.base.process import this_process
from coldkeep.core.sched.clock import ManualClock
from coldkeep.core.sched.jobs import (
    JobBusy,
    JobEvent,
    JobHandler,
    JobRunner,
    Outcome,
)
from coldkeep.core.store.jobruns import job_history
from coldkeep.core.store.manifest import Manifest

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC).timestamp()  # a Monday, 10:00 UTC


@pytest.fixture
async def manifest(tmp_path: Path) -> AsyncIterator[Manifest]:
    m = await Manifest.open(tmp_path / "coldkeep.db")
    yield m
    await m.close()


class Calls:
    """A handler that counts its runs; ``called`` is set by each."""

    def __init__(self, outcome: Outcome | None = None) -> None:
        self.n = 0
        self.outcome = outcome or Outcome(ok=True)
        self.called = asyncio.Event()

    async def __call__(self, token: CancelToken) -> Outcome:
        self.n += 1
        self.called.set()
        return self.outcome

    async def next_call(self) -> None:
        await asyncio.wait_for(self.called.wait(), 10)
        self.called.clear()


def runner(
    manifest: Manifest,
    clock: ManualClock,
    jobs: dict[str, JobSettings],
    handlers: dict[str, JobHandler],
    **kw: object,
) -> tuple[JobRunner, list[JobEvent]]:
    events: list[JobEvent] = []
    r = JobRunner(
        manifest,
        jobs,
        handlers,
        clock=clock,
        timezone="UTC",
        on_event=events.append,
        **kw,  # type: ignore[arg-type]
    )
    return r, events


async def statuses(manifest: Manifest) -> list[tuple[str, str, str]]:
    return [(r.job, r.trigger, r.status) for r in reversed(await job_history(manifest))]


async def test_a_run_missed_while_down_fires_on_boot(manifest: Manifest) -> None:
    clock = ManualClock(T0)
    two_days_ago_3am = datetime(2026, 11, 28, 3, 0, tzinfo=UTC).timestamp()
    await manifest.run(
        "INSERT INTO job_state (job, last_run_at) VALUES ('pass', ?)",
        (int(two_days_ago_3am * 1000),),
    )
    calls = Calls()
    r, events = runner(
        manifest, clock, {"pass": JobSettings("pass", cron="0 3 * * *")}, {"pass": calls}
    )
    await r.start()
    await clock.advance(1)
    await calls.next_call()
    await r.drain()
    assert calls.n == 1, "yesterday's 03:00 run was missed: it runs at once"
    assert await statuses(manifest) == [("pass", "boot", "ok")]
    assert any("catching up" in e.detail for e in events)
    assert await r.last_ok("pass") == int(T0 * 1000)
    # The next one is tomorrow at 03:00, not sooner.
    await clock.advance(16 * 3600)
    assert calls.n == 1
    await clock.advance(2 * 3600)
    await calls.next_call()
    assert calls.n == 2
    await r.stop()


async def test_a_first_start_waits_for_the_schedule(manifest: Manifest) -> None:
    clock = ManualClock(T0)
    calls = Calls()
    r, _ = runner(manifest, clock, {"pass": JobSettings("pass", cron="0 3 * * *")}, {"pass": calls})
    await r.start()
    await clock.advance(3600)
    assert calls.n == 0
    await clock.advance(16 * 3600)
    await calls.next_call()
    await r.drain()
    assert calls.n == 1 and await statuses(manifest) == [("pass", "schedule", "ok")]
    await r.stop()


async def test_runs_never_overlap(manifest: Manifest) -> None:
    clock = ManualClock(T0)
    release = asyncio.Event()
    began = asyncio.Event()
    started = 0

    async def slow(token: CancelToken) -> Outcome:
        nonlocal started
        started += 1
        began.set()
        await release.wait()
        return Outcome(ok=True)

    r, events = runner(
        manifest,
        clock,
        {"stats": JobSettings("stats", interval_s=60, run_on_boot=True)},
        {"stats": slow},
    )
    await r.start()
    await clock.advance(1)
    await asyncio.wait_for(began.wait(), 10)
    began.clear()
    assert started == 1
    await clock.advance(60 * 5)  # five ticks come and go while it runs
    assert started == 1
    assert sum(1 for e in events if e.kind == "skipped") >= 4
    with pytest.raises(JobBusy):
        await r.run_now("stats")
    release.set()
    await r.drain()
    await clock.advance(60)
    await asyncio.wait_for(began.wait(), 10)
    assert started == 2
    await r.stop()
    assert [s for _, _, s in await statuses(manifest)] == ["ok", "ok"]


async def test_a_timeout_is_recorded_as_a_timeout_even_when_the_job_ends_that_instant(
    manifest: Manifest,
) -> None:
    clock = ManualClock(T0)

    began = asyncio.Event()

    async def ten_seconds(token: CancelToken) -> Outcome:
        began.set()
        await clock.sleep(10)  # finishes exactly when the 10 s timeout fires
        return Outcome(ok=True)

    jobs = {"verify": JobSettings("verify", cron="0 4 * * *", timeout_s=10)}
    r, _ = runner(manifest, clock, jobs, {"verify": ten_seconds})
    run_task = asyncio.ensure_future(r.run_now("verify"))
    await asyncio.wait_for(began.wait(), 10)
    await clock.advance(10)
    run = await run_task
    assert run.status == "timeout" and "10 s" in (run.error or "")
    assert await r.last_ok("verify") is None


async def test_a_timed_out_job_is_told_to_stop(manifest: Manifest) -> None:
    clock = ManualClock(T0)
    seen: list[str] = []
    began = asyncio.Event()

    async def stubborn(token: CancelToken) -> Outcome:
        began.set()
        while not token.cancelled:
            await clock.sleep(1)
        seen.append(token.reason)
        raise Cancelled(token.reason)

    jobs = {"pass": JobSettings("pass", cron="0 3 * * *", timeout_s=30)}
    r, _ = runner(manifest, clock, jobs, {"pass": stubborn})
    run_task = asyncio.ensure_future(r.run_now("pass"))
    await asyncio.wait_for(began.wait(), 10)
    await clock.advance(31)
    run = await run_task
    assert run.status == "timeout" and seen == ["job pass timed out"]


async def test_a_failing_job_does_not_advance_last_run_at(manifest: Manifest) -> None:
    clock = ManualClock(T0)

    async def boom(token: CancelToken) -> Outcome:
        raise OSError("disk full")

    jobs = {
        "pass": JobSettings("pass", cron="0 3 * * *"),
        "stats": JobSettings("stats", interval_s=60),
    }
    r, _ = runner(
        manifest, clock, jobs, {"pass": boom, "stats": Calls(Outcome(ok=False, error="nope"))}
    )
    assert (await r.run_now("pass")).status == "error"
    assert (await r.run_now("stats")).status == "error"
    assert await r.last_ok("pass") is None and await r.last_ok("stats") is None
    runs = await job_history(manifest)
    assert {r.error for r in runs} == {"OSError: disk full", "nope"}


async def test_an_interval_job_whose_last_run_failed_is_retried_at_start(
    manifest: Manifest,
) -> None:
    clock = ManualClock(T0)
    jobs = {"verify": JobSettings("verify", interval_s=3600)}
    first, _ = runner(manifest, clock, jobs, {"verify": Calls()})
    assert (await first.run_now("verify")).status == "ok"
    await clock.advance(60)
    failing, _ = runner(manifest, clock, jobs, {"verify": Calls(Outcome(ok=False, error="x"))})
    assert (await failing.run_now("verify")).status == "error"

    calls = Calls()
    r, events = runner(manifest, clock, jobs, {"verify": calls})
    await r.start()
    await clock.advance(1)
    await calls.next_call()  # not an hour after the last success: now
    await r.drain()
    assert any(e.detail.startswith("last run error, retrying") for e in events)
    await r.stop()


async def test_stop_cancels_the_run_in_flight_and_records_it(manifest: Manifest) -> None:
    clock = ManualClock(T0)
    stopped_with: list[str] = []

    async def long(token: CancelToken) -> Outcome:
        while not token.cancelled:
            await asyncio.sleep(0)
        stopped_with.append(token.reason)
        return Outcome(ok=True)  # it even claims success: it is still not one

    jobs = {"pass": JobSettings("pass", cron="0 3 * * *", run_on_boot=True)}
    r, _ = runner(manifest, clock, jobs, {"pass": long})
    await r.start()
    await clock.advance(1)
    assert r.running
    await asyncio.wait_for(asyncio.shield(_until(lambda: bool(stopped_with) or r.tokens)), 10)
    await r.stop()
    assert stopped_with == ["the scheduler is stopping"]
    assert await statuses(manifest) == [("pass", "boot", "cancelled")]
    assert await r.last_ok("pass") is None
    assert not r.running and r._loop_task is None


async def _until(condition: object) -> None:
    """Yield to the loop until ``condition()`` holds (bounded by the caller)."""
    while not condition():  # type: ignore[operator]
        await asyncio.sleep(0)


async def test_retention_prunes_by_age_and_by_rows(manifest: Manifest) -> None:
    clock = ManualClock(T0)
    old = int((T0 - 100 * 86400) * 1000)
    recent = int((T0 - 86400) * 1000)
    rows = [("pass", "schedule", old, "ok")] * 3 + [("stats", "schedule", recent, "ok")] * 10
    await manifest.run_many(
        "INSERT INTO job_runs (job, trigger, started_at, status) VALUES (?, ?, ?, ?)", rows
    )
    r, _ = runner(
        manifest,
        clock,
        {"stats": JobSettings("stats", interval_s=60)},
        {"stats": Calls()},
        retention_days=90,
        retention_rows=4,
    )
    await r.run_now("stats")  # the first run after start prunes
    left = await job_history(manifest, 100)
    assert [x.job for x in left] == ["stats"] * 4
    assert left[0].trigger == "manual"


class Gate:
    """A handler that holds its run open until ``release``; ``began`` is set by it."""

    def __init__(self) -> None:
        self.began = asyncio.Event()
        self.release = asyncio.Event()
        self.n = 0

    async def __call__(self, token: CancelToken) -> Outcome:
        self.n += 1
        self.began.set()
        done = asyncio.ensure_future(self.release.wait())
        stop = asyncio.ensure_future(token.wait())
        await asyncio.wait({done, stop}, return_when=asyncio.FIRST_COMPLETED)
        done.cancel()
        stop.cancel()
        token.check()
        return Outcome(ok=True)


def pass_and_verify_due_at_boot(
    manifest: Manifest, clock: ManualClock
) -> tuple[JobRunner, list[JobEvent], Gate, Gate]:
    """Two lock-taking jobs, both due at start, each held open by its gate."""
    first, second = Gate(), Gate()
    jobs = {
        "pass": JobSettings("pass", interval_s=3600, run_on_boot=True),
        "verify": JobSettings("verify", interval_s=3600, run_on_boot=True),
    }
    r, events = runner(
        manifest, clock, jobs, {"pass": first, "verify": second}, exclusive={"pass", "verify"}
    )
    return r, events, first, second


async def test_exclusive_jobs_due_together_run_one_after_the_other(manifest: Manifest) -> None:
    """Pass and verify both take the archive lock: the later one waits its turn,
    visibly, instead of failing against its own scheduler's lock."""
    clock = ManualClock(T0)
    r, events, first, second = pass_and_verify_due_at_boot(manifest, clock)
    await r.start()
    # Both are due at boot: no step of the clock before verify waits, or its
    # wait would begin before or after that step as the loop happened to run.
    await asyncio.wait_for(first.began.wait(), 10)
    await asyncio.wait_for(_until(lambda: any(e.kind == "waiting" for e in events)), 10)
    assert second.n == 0, "verify must not start while pass holds the turn"
    waiting = [x for x in await job_history(manifest) if x.job == "verify"]
    assert [x.status for x in waiting] == ["waiting"]
    assert waiting[0].describe() == "waiting for pass"
    assert [e.detail for e in events if e.kind == "waiting"] == [
        "behind pass, which holds the archive lock"
    ]

    await clock.advance(30)
    first.release.set()
    await asyncio.wait_for(second.began.wait(), 10)
    second.release.set()
    await r.drain()
    await r.stop()
    runs = {x.job: x for x in await job_history(manifest)}
    assert runs["pass"].status == "ok" and runs["verify"].status == "ok"
    assert runs["verify"].summary["waited_for"] == "pass"
    assert runs["verify"].describe() == "ok (waited 30 s for pass)"


async def test_a_job_waiting_its_turn_is_cancelled_by_stop_without_running(
    manifest: Manifest,
) -> None:
    clock = ManualClock(T0)
    r, _, first, second = pass_and_verify_due_at_boot(manifest, clock)
    await r.start()
    await clock.advance(1)
    await asyncio.wait_for(first.began.wait(), 10)
    await r.stop()
    assert second.n == 0
    assert sorted((x.job, x.status) for x in await job_history(manifest)) == [
        ("pass", "cancelled"),
        ("verify", "cancelled"),
    ]


async def test_jobs_not_marked_exclusive_still_run_side_by_side(manifest: Manifest) -> None:
    clock = ManualClock(T0)
    first, second = Gate(), Gate()
    jobs = {
        "pass": JobSettings("pass", interval_s=3600, run_on_boot=True),
        "stats": JobSettings("stats", interval_s=3600, run_on_boot=True),
    }
    r, _ = runner(manifest, clock, jobs, {"pass": first, "stats": second}, exclusive={"pass"})
    await r.start()
    await clock.advance(1)
    await asyncio.wait_for(first.began.wait(), 10)
    await asyncio.wait_for(second.began.wait(), 10)
    await r.stop()


async def test_a_stop_before_the_deadline_is_a_cancel_even_if_winding_down_passes_it(
    manifest: Manifest,
) -> None:
    """SIGTERM at 1.5 s, a 2 s timeout, a run that needs 1 s to reach a safe
    point: the owner's stop came first, so the run is cancelled, not timed out."""
    clock = ManualClock(T0)
    began = asyncio.Event()

    async def slow_to_stop(token: CancelToken) -> Outcome:
        began.set()
        await token.wait()
        await clock.sleep(1)  # winding down to its next safe point
        raise Cancelled(token.reason)

    jobs = {"pass": JobSettings("pass", interval_s=3600, timeout_s=2, run_on_boot=True)}
    r, _ = runner(manifest, clock, jobs, {"pass": slow_to_stop})
    await r.start()
    await clock.advance(0.5)
    await asyncio.wait_for(began.wait(), 10)
    await clock.advance(1)
    stopping = asyncio.ensure_future(r.stop())
    await clock.advance(2)
    await stopping
    assert await statuses(manifest) == [("pass", "boot", "cancelled")]


async def test_a_deadline_before_the_stop_is_a_timeout(manifest: Manifest) -> None:
    clock = ManualClock(T0)
    began = asyncio.Event()

    async def slow_to_stop(token: CancelToken) -> Outcome:
        began.set()
        await token.wait()
        await clock.sleep(1)
        raise Cancelled(token.reason)

    jobs = {"pass": JobSettings("pass", interval_s=3600, timeout_s=2, run_on_boot=True)}
    r, _ = runner(manifest, clock, jobs, {"pass": slow_to_stop})
    await r.start()
    await clock.advance(0.5)
    await asyncio.wait_for(began.wait(), 10)
    await clock.advance(2)  # past the deadline: the timeout tells it to stop
    stopping = asyncio.ensure_future(r.stop())  # and SIGTERM comes while it winds down
    await clock.advance(2)
    await stopping
    assert await statuses(manifest) == [("pass", "boot", "timeout")]


async def test_a_run_whose_process_ended_is_settled_killed_at_the_next_start(
    manifest: Manifest, tmp_path: Path
) -> None:
    # Runs left "running" or "waiting": by a process SIGKILLed (really: a child
    # that recorded itself and was killed), by this very process (alive), by
    # another host (cannot be looked at), and from before owners were recorded.
    killed = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from coldkeep.core.base.process import this_process as p; "
            "print(p(), flush=True); import time; time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert killed.stdout is not None
    dead_owner = killed.stdout.readline().strip()
    killed.kill()
    killed.wait()
    owners = {
        "pass": dead_owner,
        "verify": this_process(),
        "ship": "another-host " + " ".join(this_process().split(" ")[1:]),
        "stats": None,
    }
    for job, owner in owners.items():
        await manifest.run(
            "INSERT INTO job_runs (job, trigger, started_at, status, owner) VALUES (?, ?, ?, ?, ?)",
            (
                job,
                "schedule",
                int(T0 * 1000) - 60_000,
                "waiting" if job == "ship" else "running",
                owner,
            ),
        )
    clock = ManualClock(T0)
    jobs = {name: JobSettings(name, cron="0 0 1 1 *") for name in owners}
    r, events = runner(manifest, clock, jobs, {name: Calls() for name in owners})
    await r.start()
    await r.stop()
    settled = {e.job: e.run for e in events if e.kind == "run_finished"}
    assert set(settled) == {"pass", "stats"}
    history = {run.job: run for run in await job_history(manifest)}
    for job in ("pass", "stats"):
        run = history[job]
        assert (run.status, run.ended_at) == ("killed", int(T0 * 1000)), run
        assert run.error is not None and "killed" in run.error
    assert history["verify"].status == "running" and history["ship"].status == "waiting"
    # settled runs end like any other: the next start leaves them alone
    r, events = runner(manifest, clock, jobs, {name: Calls() for name in owners})
    await r.start()
    await r.stop()
    assert not [e for e in events if e.kind == "run_finished"]
