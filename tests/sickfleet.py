"""Five demo hosts shipping to one folder remote, four of them sick in the ways
the fleet's health tells apart: ``stale`` (its last heartbeat three days old),
``damaged`` (two archive files failed verify), ``backlog`` (400 files and
200,000 rows waiting for six days), ``jobfail`` (its ship job failed) and
``healthy`` (quiet: nothing new to ship). Used by ``fleet status``'s tests and
the fleet view's snapshots (with the clock pinned)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.ops.demo import write_demo

DAY_MS = 86_400_000
SITES = ("healthy", "stale", "damaged", "backlog", "jobfail")
SICK = SITES[1:]


def wall_ms() -> int:
    return int(time.time() * 1000)


async def ship(base: Path, remote: Path, name: str, now: int | None = None) -> None:
    """The demo site ``name`` under ``base`` shipped to ``remote`` (a pass the
    first time) at ``now`` (the wall clock if None): its ship puts a heartbeat."""
    clock = wall_ms if now is None else (lambda: now)
    config = base / name / "coldkeep.toml"
    fresh = not config.exists()
    if fresh:
        config = write_demo(base / name, seed=len(name), scale=0.02, now_ms=now).config
    settings = replace(load_settings(config), remote=RemoteSettings(remote.as_uri(), site=name))
    archiver = Archiver(settings, stream=EventStream(), serve_events=False, clock=clock)
    if fresh:
        await archiver.run_pass()
    report = await archiver.ship()
    assert report.heartbeat is not None, report.notices


def sick(base: Path, name: str, now: int | None = None) -> None:
    """What each sick host's manifest says before its next ship."""
    now = wall_ms() if now is None else now
    with sqlite3.connect(base / name / "archive" / "coldkeep.db") as db:
        if name == "damaged":
            db.execute("UPDATE entries SET verify_error = 'bit rot' WHERE id IN (1, 2)")
        if name == "backlog":
            for days in (6, 4, 1):
                db.execute(
                    "INSERT INTO stats VALUES (?, 0, 0, 0, 400, 1000000, 200000)",
                    (now - days * DAY_MS,),
                )
        if name == "jobfail":
            db.execute(
                "INSERT INTO job_runs (job, trigger, started_at, ended_at, status, error) "
                "VALUES ('ship', 'schedule', ?, ?, 'error', 'the bucket said 503')",
                (now - 60_000, now - 30_000),
            )


def make_sick(base: Path, remote: Path, now: int | None = None) -> None:
    """The sick hosts made so, and shipped again (a minute after ``now``, when
    it is given: a beat of its own); the stale host's beats dated three days
    back by the bucket's clock (and the others' at their own time, when
    ``now`` is given: a pinned clock, the files' times too)."""
    later = None if now is None else now + 60_000
    for name in SICK:
        sick(base, name, later)
        asyncio.run(ship(base, remote, name, later))
    at = (wall_ms() if later is None else later) / 1000
    for name in SITES:
        if name == "stale" or now is not None:
            when = at - 3 * 86_400 if name == "stale" else at
            for beat in (remote / name / "heartbeat").iterdir():
                os.utime(beat, (when, when))


def sick_fleet(base: Path, now: int | None = None) -> Path:
    """The five hosts shipped to ``base``/bucket, then made sick; the bucket."""
    remote = base / "bucket"
    remote.mkdir()
    for name in SITES:
        asyncio.run(ship(base, remote, name, now))
    make_sick(base, remote, now)
    return remote
