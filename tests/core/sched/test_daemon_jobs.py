"""The daemon's jobs as ``coldkeep run`` has them, on a manual clock."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.sched.clock import ManualClock
from coldkeep.core.sched.daemon import Scheduler, job_names
from coldkeep.core.sched.jobs import JobEvent
from coldkeep.core.store.checkpointlog import recent_checkpoints
from coldkeep.core.store.jobruns import JobRun, job_history
from coldkeep.core.store.manifest import Manifest

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC).timestamp()
# Every other job far off (the first of January) or off: only the checkpoint runs.
ONLY_CHECKPOINT = """
[jobs.checkpoint]
interval = 60
[jobs.stats]
enabled = false
[jobs.alerts]
enabled = false
[jobs.pass]
cron = "0 0 1 1 *"
[jobs.verify]
cron = "0 0 1 1 *"
[jobs.ship]
cron = "0 0 1 1 *"
"""


async def test_the_checkpoint_job_runs_on_its_schedule_and_empties_the_live_wal(
    tmp_path: Path,
) -> None:
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02).config
    config.write_text(config.read_text() + ONLY_CHECKPOINT)
    settings = load_settings(config)
    assert settings.state_db is not None
    # The application writes and never checkpoints: its WAL only grows.
    app = sqlite3.connect(settings.state_db)
    app.execute("PRAGMA wal_autocheckpoint = 0")
    with app:
        app.execute("CREATE TABLE IF NOT EXISTS scratch (x BLOB)")
        app.executemany("INSERT INTO scratch VALUES (?)", [(b"x" * 4000,)] * 200)
    try:
        clock = ManualClock(T0)
        ended = asyncio.Event()

        def seen(e: JobEvent) -> None:
            if e.kind == "run_finished" and e.job == "checkpoint":
                ended.set()

        archiver = Archiver(settings, stream=EventStream(), serve_events=False)
        scheduler = Scheduler(archiver, clock=clock, on_event=seen)
        runner = await scheduler.open()
        await runner.start()
        await clock.advance(59)
        assert not ended.is_set(), "ran before its interval"
        await clock.advance(1)
        await asyncio.wait_for(ended.wait(), 30)
        await scheduler.close()
    finally:
        app.close()  # the last connection's close checkpoints by itself
    async with await Manifest.open(archiver.layout.manifest) as m:
        [run] = [r for r in await job_history(m) if r.job == "checkpoint"]
        [ran] = await recent_checkpoints(m)
    assert run.status == "ok", run.error
    assert run.summary["checkpointed"] == run.summary["log"] > 0
    assert (ran.log, ran.error) == (run.summary["log"], None) and ran.wal_before > 0


def test_the_checkpoint_job_is_there_only_to_write_a_live_database_coldkeep_may_change(
    tmp_path: Path,
) -> None:
    settings = load_settings(write_demo(tmp_path / "demo", seed=5, scale=0.01).config)
    assert "checkpoint" in job_names(settings)
    assert "checkpoint" not in job_names(dataclasses.replace(settings, mode="plan"))
    assert "checkpoint" not in job_names(dataclasses.replace(settings, state_db=None))


# Only the verify job runs (every minute); the remote copies all read a run.
ONLY_VERIFY = """
[jobs.verify]
interval = 60
remote_sample = 1
{extra}
[jobs.stats]
enabled = false
[jobs.alerts]
enabled = false
[jobs.checkpoint]
enabled = false
[jobs.pass]
cron = "0 0 1 1 *"
[jobs.ship]
cron = "0 0 1 1 *"
"""


async def shipped_remote_only(tmp_path: Path, extra: str) -> tuple[Archiver, Path]:
    """A demo site archived and shipped to a folder remote, every local copy
    dropped: the bucket holds the archive's only copies. Its verify job as
    ``ONLY_VERIFY`` has it, with ``extra`` keys."""
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02).config
    head = config.read_text().split("\n[remote]\n")[0]
    config.write_text(
        f'{head}\n[remote]\nurl = "file:remote"\nsite = "web-1"\nkeep_local_days = 0\n'
        + ONLY_VERIFY.format(extra=extra)
    )
    archiver = Archiver(load_settings(config), stream=EventStream(), serve_events=False)
    await archiver.run_pass()
    shipped = await archiver.ship()
    assert shipped.dropped > 0 and not shipped.problems
    return archiver, config.parent / "remote" / "web-1"


async def verify_run(archiver: Archiver) -> JobRun:
    """The verify job run once on its schedule, as ``history --jobs`` has it."""
    clock = ManualClock(T0)
    ended = asyncio.Event()

    def seen(e: JobEvent) -> None:
        if e.kind == "run_finished" and e.job == "verify":
            ended.set()

    scheduler = Scheduler(archiver, clock=clock, on_event=seen)
    runner = await scheduler.open()
    await runner.start()
    await clock.advance(60)
    await asyncio.wait_for(ended.wait(), 60)
    await scheduler.close()
    async with await Manifest.open(archiver.layout.manifest) as m:
        [run] = [r for r in await job_history(m) if r.job == "verify"]
    return run


async def test_the_scheduled_verify_finds_a_flipped_byte_in_a_remote_only_copy(
    tmp_path: Path,
) -> None:
    archiver, bucket = await shipped_remote_only(tmp_path, "")
    bad = sorted((bucket / "files").rglob("*.gz"))[0]
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0x01
    bad.write_bytes(bytes(data))
    name = bad.relative_to(bucket).as_posix()

    run = await verify_run(archiver)
    assert run.status == "error" and run.error is not None and name in run.error, run
    remote = run.summary["remote"]
    assert remote["failed"] == 1 and remote["checked"] == remote["objects"] > 1
    assert remote["left"] == 0 and run.summary["remote_only"] > 0
    assert f"remote: {remote['objects']:,} of {remote['objects']:,} objects read" in run.describe()
    async with await Manifest.open(archiver.layout.manifest) as m:
        [(error,)] = await m.rows("SELECT verify_error FROM remote_objects WHERE path = ?", [name])
    assert error and "sha256" in error, "the row carries the failure: the alert job raises it"


async def test_a_verify_job_that_reads_no_remote_copy_says_what_it_left_out(
    tmp_path: Path,
) -> None:
    archiver, _ = await shipped_remote_only(tmp_path, "remote = false")
    run = await verify_run(archiver)
    assert run.status == "ok" and "remote" not in run.summary
    left = run.summary["remote_only"]
    assert left > 0
    said = f"{left:,} entries only the remote holds not read (set [jobs.verify] remote = true)"
    assert said in run.describe()
