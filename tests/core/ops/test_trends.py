"""Trends: what the console charts, read from the manifest's entries, the pass
log, the stats series, the remote tier's rows and the month databases, as a
user would sum them by hand."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.errors import UsageError
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.stream import EventStream
from coldkeep.core.base.times import DAY_MS, DAY_S
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.ops.passes import EventsMoved
from coldkeep.core.ops.trends import Trends, read_trends
from coldkeep.core.remote.months import signature
from coldkeep.core.store import passlog, stats
from coldkeep.core.store.entries import NewEntry, tombstone
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.remoteobjects import RemoteObject, RemoteObjects

# 2026-11-20 12:00 UTC: "today" in these tests.
NOW_S = 1_763_640_000 + 365 * DAY_S
TODAY_MS = NOW_S // DAY_S * DAY_MS


def entry(n: int, day: int, size: int, gz_size: int, hour: int = 1) -> NewEntry:
    """Entry ``n``, archived ``day`` days before today (0: today)."""
    return NewEntry(
        unit="u",
        relpath=f"u/f{n}.jsonl",
        bytes=size,
        sha256=f"{n:064x}",
        gz_path=f"files/u/f{n}.jsonl.gz",
        gz_bytes=gz_size,
        mtime_ns=1,
        dev=2,
        ino=3,
        mode=0o100644,
        archived_at=TODAY_MS - day * DAY_MS + hour * 3_600_000,
    )


def backlog(files: int, size: int) -> dict[str, int]:
    return {c: 0 for c in stats.COLUMNS} | {"backlog_files": files, "backlog_bytes": size}


def month_db(layout: Layout, month: str, rows: int) -> Path:
    layout.events.mkdir(parents=True, exist_ok=True)
    db = layout.events / f"{month}.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, at INTEGER)")
        conn.executemany("INSERT INTO events (at) VALUES (?)", [(k,) for k in range(rows)])
    conn.close()
    return db


async def a_site(m: Manifest, layout: Layout) -> None:
    """Entries on three days (one long ago), a bundle-free archive with one gzip
    shipped, one dropped for its remote copy, one expired; passes; stats samples;
    two month databases."""
    await m.add_entries(
        [
            entry(1, 0, 1000, 100),
            entry(2, 0, 3000, 300, hour=5),
            entry(3, 2, 500, 250),
            entry(4, 2, 700, 70),
            entry(5, 40, 9000, 900),  # before the window
        ]
    )
    objects = RemoteObjects(m)
    await objects.record(RemoteObject("files/u/f3.jsonl.gz", 250, "x", TODAY_MS))
    await objects.record(RemoteObject("files/u/f4.jsonl.gz", 70, "y", TODAY_MS))
    await objects.mark_local_gone("files/u/f4.jsonl.gz", TODAY_MS)
    await m.transaction([tombstone("files/u/f5.jsonl.gz", TODAY_MS)])
    for k, (start, seconds, status) in enumerate(
        [(10, 60, "ok"), (20, 5, "failed"), (30, 120, "ok")]
    ):
        pass_id = await passlog.start(m, "on", "cli", TODAY_MS - DAY_MS + start * 1000)
        await passlog.finish(m, pass_id, status, {}, TODAY_MS - DAY_MS + (start + seconds) * 1000)
        assert k == pass_id - 1
    await passlog.start(m, "on", "cli", TODAY_MS)  # still running: not charted
    await stats.record(m, TODAY_MS - DAY_MS + 1000, backlog(9, 9000))
    await stats.record(m, TODAY_MS - DAY_MS + 2000, backlog(4, 400))  # that day's last
    await stats.record(m, TODAY_MS + 5000, backlog(2, 20))
    month_db(layout, "2026-09", 3)
    counted = month_db(layout, "2026-10", 5)
    # The last ship counted 2026-10 as it is now: that count is taken, unread.
    await objects.count_month("2026-10", 5, signature(counted), TODAY_MS)
    await objects.count_month("2026-09", 99, "0:0", TODAY_MS)  # since changed: counted again


async def test_a_site_gives_the_sums_a_user_would_make(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        await a_site(m, layout)
        t = await read_trends(m, layout, days=4, now_s=NOW_S)
    assert t.days == ["2026-11-17", "2026-11-18", "2026-11-19", "2026-11-20"]
    assert t.bytes_in == [0, 1200, 0, 4000]
    assert t.bytes_out == [0, 320, 0, 400]
    assert t.ratio() == [None, 320 / 1200, None, 0.1]
    assert t.backlog_bytes == [None, None, 400, 20]
    assert t.backlog_files == [None, None, 4, 2]
    day_before = (TODAY_MS - DAY_MS) // 1000
    assert t.pass_started == [day_before + 10, day_before + 20, day_before + 30]
    assert t.pass_seconds == [60.0, 5.0, 120.0]
    assert t.pass_status == ["ok", "failed", "ok"]
    assert t.month_rows == [("2026-09", 3), ("2026-10", 5)]
    assert t.tiers == {"local": 400, "shipped": 250, "remote_only": 70, "expired": 900}
    as_json = t.to_dict()
    assert as_json["ratio"] == t.ratio()
    assert as_json["passes"]["seconds"] == [60.0, 5.0, 120.0]
    assert as_json["month_rows"] == [
        {"month": "2026-09", "rows": 3},
        {"month": "2026-10", "rows": 5},
    ]


async def test_only_the_last_fifty_passes_are_charted(tmp_path: Path) -> None:
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        for k in range(60):
            pass_id = await passlog.start(m, "on", "cli", k * 1000)
            await passlog.finish(m, pass_id, "ok", {}, k * 1000 + k)
        t = await read_trends(m, Layout(tmp_path), days=1, now_s=NOW_S)
    assert t.pass_started == list(range(10, 60))
    assert t.pass_seconds == [k / 1000 for k in range(10, 60)]


async def test_a_window_outside_one_to_ten_years_of_days_is_refused(tmp_path: Path) -> None:
    async with await Manifest.open(tmp_path / "coldkeep.db") as m:
        with pytest.raises(UsageError, match="days = 0"):
            await read_trends(m, Layout(tmp_path), days=0, now_s=NOW_S)


async def test_a_site_no_pass_has_run_on_gives_zeros_and_writes_nothing(
    tmp_path: Path,
) -> None:
    settings = load_settings(write_demo(tmp_path / "demo", seed=5, scale=0.02).config)
    archiver = Archiver(
        settings, stream=EventStream(), clock=lambda: NOW_S * 1000, serve_events=False
    )
    t = await archiver.trends(days=3)
    assert t == Trends(
        days=["2026-11-18", "2026-11-19", "2026-11-20"],
        bytes_in=[0, 0, 0],
        bytes_out=[0, 0, 0],
        backlog_bytes=[None, None, None],
        backlog_files=[None, None, None],
        pass_started=[],
        pass_seconds=[],
        month_rows=[],
        tiers={"local": 0, "shipped": 0, "remote_only": 0, "expired": 0},
    )
    assert not archiver.layout.manifest.exists()


async def test_a_pass_and_its_recovery_show_on_the_day_they_ran(tmp_path: Path) -> None:
    settings = load_settings(write_demo(tmp_path / "demo", seed=5, scale=0.02).config)
    archiver = Archiver(settings, stream=EventStream(), serve_events=False)
    summary = await archiver.run_pass()
    t = await archiver.trends(days=2)
    # Every entry is today's (yesterday's for a pass across midnight UTC): the
    # pass's own and those its recovery adopted (the demo leaves some).
    counts = (await archiver.status()).entries
    assert sum(t.bytes_in) == sum(b for _, b, _ in counts.values()) >= summary.files.bytes_in > 0
    assert sum(t.bytes_out) == sum(g for _, _, g in counts.values()) == t.tiers["local"]
    assert t.pass_status == ["ok"]
    assert [m for m, _ in t.month_rows] == sorted(archiver.layout.event_months())
    assert isinstance(summary.events, EventsMoved)
    assert sum(n for _, n in t.month_rows) >= summary.events.moved > 0
