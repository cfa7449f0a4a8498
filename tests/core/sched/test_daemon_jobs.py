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
from coldkeep.core.store.jobruns import job_history
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
