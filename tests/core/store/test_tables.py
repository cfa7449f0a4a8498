"""The store modules that own a table family each: their rows go in and come back
as their own types, through the manifest's one connection."""

from __future__ import annotations

import os
from pathlib import Path

from coldkeep.core.base.stream import CheckpointRan
from coldkeep.core.store import audit, checkpointlog, expiry, jobruns, passlog, problems, stats
from coldkeep.core.store.entries import NewEntry, tombstone
from coldkeep.core.store.manifest import Manifest


def new_entry(n: int, archived_at: int) -> NewEntry:
    return NewEntry(
        unit="u",
        relpath=f"u/f{n}.jsonl",
        bytes=10,
        sha256=f"{n:064x}",
        gz_path=f"files/u/f{n}.jsonl.gz",
        gz_bytes=4,
        mtime_ns=1,
        dev=2,
        ino=3,
        mode=0o100644,
        archived_at=archived_at,
    )


async def test_a_checkpoint_comes_back_as_it_was_recorded(tmp_path: Path) -> None:
    ran = CheckpointRan(1000, 0, 12, 12, 1.5, 4096, 4096, "PASSIVE", None)
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        await checkpointlog.record_checkpoint(m, ran)
        assert await checkpointlog.recent_checkpoints(m) == [ran]
    # The checkpoint command's JSON is this type's fields, in this order.
    assert list(vars(ran)) == [
        "at_ms", "busy", "log", "checkpointed", "ms", "wal_before", "wal_after", "mode", "error",
    ]  # fmt: skip


async def test_an_interrupted_pass_is_summed_from_its_entries_until_the_next_action(
    tmp_path: Path,
) -> None:
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        dead = await passlog.start(m, "on", "cli", at=100)
        await m.add_entry(new_entry(1, archived_at=150))
        await audit.begin(m, at=200, origin="cli", action="recover", args={})
        await m.add_entry(new_entry(2, archived_at=250))  # the next action's
        [settled] = await passlog.interrupt(m, current=None, at=300)
        assert settled.id == dead
        [p] = await passlog.recent(m)
        assert (p.status, p.finished_at) == ("interrupted", 200)
        assert p.summary["files"] == {"archived": 1, "bytes_in": 10, "bytes_out": 4}


async def test_an_expiry_is_noted_with_its_tombstones_until_it_is_finished(
    tmp_path: Path,
) -> None:
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        e = await m.add_entry(new_entry(1, archived_at=1))
        await m.transaction(
            [
                tombstone(e.gz_path, 500),
                expiry.month_tombstone("2025-01", 8192, "ab" * 32, 500),
                expiry.begun(e.gz_path),
                expiry.begun("events/2025-01.db"),
            ]
        )
        got = await m.entry(e.id)
        assert got is not None and got.status == "expired"
        assert await expiry.interrupted(m) == ["events/2025-01.db", e.gz_path]
        await expiry.finished(m, e.gz_path)
        assert await expiry.interrupted(m) == ["events/2025-01.db"]
        assert await expiry.expired_months(m, ["2025-01", "2025-02"]) == [("2025-01", 500)]
        assert await expiry.month_count(m) == 1


async def test_job_runs_and_the_last_success(tmp_path: Path) -> None:
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        first = await jobruns.start_run(m, "pass", "schedule", 100)
        await jobruns.end_run(m, first, at=110, status="ok", error=None, summary={})
        await jobruns.set_last_ok(m, "pass", 100)
        second = await jobruns.start_run(m, "pass", "manual", 200)
        await jobruns.set_waiting(m, second, "verify")
        [waiting, _] = await jobruns.job_history(m)
        assert waiting.describe() == "waiting for verify"
        await jobruns.set_running(m, second)
        await jobruns.end_run(m, second, at=210, status="error", error="boom", summary={})
        assert await jobruns.last_runs(m) == {"pass": 100}
        assert await jobruns.latest_statuses(m) == {"pass": "error"}
        assert [r.id for r in await jobruns.failed_runs(m, 10)] == [second]
        await jobruns.prune_beyond(m, 1)
        assert [r.id for r in await jobruns.job_history(m)] == [second]


async def test_a_stats_row_takes_each_column_by_name(tmp_path: Path) -> None:
    totals = dict(zip(reversed(stats.COLUMNS), range(len(stats.COLUMNS)), strict=True))
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        await stats.record(m, 5, totals)
        [row] = await m.rows(f"SELECT at, {', '.join(stats.COLUMNS)} FROM stats")
    assert row == (5, *(totals[c] for c in stats.COLUMNS))


async def test_a_file_problem_keeps_a_name_that_is_not_utf8_and_clears_by_it(
    tmp_path: Path,
) -> None:
    odd = os.fsdecode(b"u/r\xe9sum\xe9\n.log")  # Latin-1, with a newline
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        met = problems.NewProblem(odd, "unlink_refused", "Operation not permitted")
        await problems.record(m, [met], at=1, pass_id=1)
        await problems.record(m, [met], at=2, pass_id=2)
        [kept] = await problems.listing(m)
        assert (kept.relpath, kept.kind) == (odd, "unlink_refused")
        assert os.fsencode(kept.relpath) == b"u/r\xe9sum\xe9\n.log"
        await problems.clear(m, [odd])
        assert await problems.count(m) == 0
