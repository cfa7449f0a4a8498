"""The application keeps writing while rows move: it never sees an error, and every
write it made is still there afterwards (live or archived), exactly once."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
from pathlib import Path

from coldkeep.core.base.config import parse_settings
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.events.dbmove import move_events

from helpers import ARCHIVABLE, Roots, all_event_rows, make_events_db

WRITER = Path(__file__).parents[2] / "appwriter.py"


async def test_a_busy_writer_never_fails_and_loses_nothing(roots: Roots) -> None:
    import time

    db = roots.base / "state.db"
    make_events_db(db, 20_000, now_ms=time.time_ns() // 1_000_000)
    original = {r[0]: r for r in all_event_rows(db, roots.layout.events)}
    cfg = parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "state_db": str(db),
            "events": {"kinds": list(ARCHIVABLE), "batch_rows": 500, "checkpoint_every": 2},
        },
        roots.base / "coldkeep.toml",
    )
    writer = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WRITER),
        str(db),
        "400",
        str(len(original)),
        "3",
        "tick",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert writer.stdin is not None and writer.stdout is not None
    assert await writer.stdout.readline() == b"started\n"

    stdout = writer.stdout

    async def let_it_write(name: StepName, info: StepInfo) -> None:
        # Between a batch's copy and its delete (the window that matters), the
        # application commits at least four writes: whatever the machine's speed.
        if name == "batch_archived":
            for _ in range(4):
                assert await stdout.readline() == b"w\n"

    report = await move_events(cfg, roots.layout.events, step=let_it_write)
    # A second pass picks up what the writer made archivable meanwhile.
    report2 = await move_events(cfg, roots.layout.events, step=let_it_write)

    writer.stdin.close()
    while (line := await writer.stdout.readline()) == b"w\n":
        pass
    said = json.loads(line)
    assert await writer.wait() == 0
    assert said["errors"] == [], "the application never sees an error"
    assert report.moved > 5000 and not report.conflicts and not report2.conflicts
    updates = [w for w in said["writes"] if w[0] == "upd"]
    inserts = [w for w in said["writes"] if w[0] == "ins"]
    assert len(updates) >= 10 and len(inserts) >= 40, "the writer really wrote meanwhile"

    expected = dict(original)
    for w in said["writes"]:
        if w[0] == "ins":
            expected[w[1]] = tuple(w[1:])
        else:
            row = expected[w[1]]
            expected[w[1]] = (row[0], row[1], row[2], w[2], row[4])
    union = all_event_rows(db, roots.layout.events)
    ids = [r[0] for r in union]
    assert len(ids) == len(set(ids)), "no row in two places"
    assert {r[0]: r for r in union} == expected, "every write is there, with its content"
    with sqlite3.connect(db) as live:
        assert live.execute("PRAGMA integrity_check").fetchone() == ("ok",)
