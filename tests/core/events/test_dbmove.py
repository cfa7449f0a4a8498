"""The event mover on real SQLite databases: nothing lost, nothing doubled, and bad
input refused with a clear error and nothing changed."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import settings as examples
from hypothesis import strategies as st

from coldkeep.core.base.config import Settings, parse_settings
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.base.stream import BatchMoved
from coldkeep.core.events.checkpoint import LiveCheckpointer
from coldkeep.core.events.dbmove import move_events
from coldkeep.core.events.eventschema import EventsError
from coldkeep.core.events.movepace import BUSY_RETRIES_MS, writer_gap_s
from coldkeep.core.events.moverun import MoveReport
from coldkeep.core.events.restore import restore_events
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.restoredrows import keep_restored_rows

from helpers import ARCHIVABLE, DAY_MS, Roots, all_event_rows, make_events_db

NOW = 1_790_000_000_000


def settings(roots: Roots, **events: object) -> Settings:
    return parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "state_db": str(roots.base / "state.db"),
            "events": {"kinds": list(ARCHIVABLE), "batch_rows": 100, **events},
        },
        roots.base / "coldkeep.toml",
    )


def live_rows(roots: Roots, where: str = "1") -> list[tuple[object, ...]]:
    with sqlite3.connect(roots.base / "state.db") as db:
        return db.execute(f"SELECT id, ts, kind FROM events WHERE {where} ORDER BY id").fetchall()


async def move(roots: Roots, cfg: Settings | None = None, **kw: object) -> MoveReport:
    return await move_events(
        cfg or settings(roots),
        roots.layout.events,
        now_ms=NOW,
        **kw,  # type: ignore[arg-type]
    )


# The rows a move takes: the archivable kinds, past the 30 days of min_age_days.
ELIGIBLE = f"kind IN ({', '.join(repr(k) for k in ARCHIVABLE)}) AND ts < {NOW - 30 * DAY_MS}"


@pytest.fixture
def db(roots: Roots) -> Path:
    make_events_db(roots.base / "state.db", 3000, now_ms=NOW)
    return roots.base / "state.db"


async def test_moves_old_rows_of_archivable_kinds_into_month_dbs(roots: Roots, db: Path) -> None:
    before = all_event_rows(db, roots.layout.events)
    eligible = live_rows(roots, ELIGIBLE)

    batches: list[BatchMoved] = []
    report = await move(roots, on_batch=batches.append)

    assert report.moved == len(eligible) > 0
    # Ids in time order: a batch holds one month's rows, batch_rows at most, and
    # ends with its month, so that each month's turn adds a batch at most.
    assert all(len(b.months) == 1 and b.moved <= 100 for b in batches)
    turns = len(report.months) - 1
    assert -(-len(eligible) // 100) <= report.batches <= -(-len(eligible) // 100) + turns
    assert live_rows(roots, ELIGIBLE) == []
    assert all_event_rows(db, roots.layout.events) == before, "every row exactly once"
    months = sorted(p.stem for p in roots.layout.events.glob("*.db"))
    assert months == sorted(report.months) and len(months) >= 3
    with sqlite3.connect(roots.layout.events / f"{months[0]}.db") as m:
        ddl = m.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()[0]
        assert ddl.startswith("CREATE TABLE events (id INTEGER PRIMARY KEY")
        for (ts,) in m.execute("SELECT ts FROM events"):
            assert time.strftime("%Y-%m", time.gmtime(ts / 1000)) == months[0]
    assert report.checkpointer == "on" and report.wal_peak > 0
    # A second run has nothing to do.
    again = await move(roots)
    assert (again.moved, again.batches) == (0, 0)


async def test_months_interleaved_by_id_move_in_batches_of_at_most_batch_rows(
    roots: Roots, db: Path
) -> None:
    """A batch's range normally holds one month (its copy stops at batch_rows, or
    before the next month's first row, and ends the batch); with the time
    stamps shuffled across the ids every range mixes months, and each is still
    copied into its own month, batch_rows at most a batch."""
    with sqlite3.connect(db) as live:
        stamps = [ts for (ts,) in live.execute("SELECT ts FROM events ORDER BY id")]
        half = len(stamps) // 2
        # Neighbours months apart: ids take turns from the older half and the newer.
        stamps = [ts for pair in zip(stamps[:half], stamps[half:], strict=True) for ts in pair]
        live.executemany(
            "UPDATE events SET ts = ? WHERE id = ?", [(ts, i + 1) for i, ts in enumerate(stamps)]
        )
    before = all_event_rows(db, roots.layout.events)
    eligible = live_rows(roots, ELIGIBLE)
    batches: list[BatchMoved] = []

    report = await move(roots, on_batch=batches.append)

    assert report.moved == len(eligible) > 0
    assert max(b.moved + b.already for b in batches) <= 100
    assert any(len(b.months) > 1 for b in batches)
    assert live_rows(roots, ELIGIBLE) == []
    assert all_event_rows(db, roots.layout.events) == before, "every row exactly once"
    for month_db in roots.layout.events.glob("*.db"):
        with sqlite3.connect(month_db) as m:
            for (ts,) in m.execute("SELECT ts FROM events"):
                assert time.strftime("%Y-%m", time.gmtime(ts / 1000)) == month_db.stem


async def test_a_month_prepared_ahead_and_never_used_is_not_left_behind(
    roots: Roots, db: Path
) -> None:
    """Each month's next is prepared while the mover works on it; a month with
    no eligible rows (here the second, emptied) gets no file."""
    months = "strftime('%Y-%m', ts / 1000, 'unixepoch')"
    with sqlite3.connect(db) as live:
        found = [m for (m,) in live.execute(f"SELECT DISTINCT {months} FROM events ORDER BY 1")]
        live.execute(f"DELETE FROM events WHERE {months} = ?", (found[1],))
    before = all_event_rows(db, roots.layout.events)

    report = await move(roots)

    made = sorted(p.stem for p in roots.layout.events.glob("*.db*"))
    assert found[1] not in report.months and found[2] in report.months
    assert made == sorted(report.months), "no month DB, WAL or wal-index for the empty month"
    assert all_event_rows(db, roots.layout.events) == before


def put_back(roots: Roots, db: Path, n: int) -> list[Any]:
    """The first ``n`` rows of the second month DB inserted into live again (they
    stay archived too); the rows."""
    month_db = sorted(roots.layout.events.glob("*.db"))[1]
    with sqlite3.connect(month_db) as m:
        back = m.execute(f"SELECT * FROM events ORDER BY id LIMIT {int(n)}").fetchall()
    with sqlite3.connect(db) as live:
        live.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)", back)
    return back


async def test_rows_left_in_both_places_are_only_deleted_from_live(roots: Roots, db: Path) -> None:
    before = all_event_rows(db, roots.layout.events)
    await move(roots)
    # Some archived rows back in live, as a crash after step 2 would leave them.
    put_back(roots, db, 50)

    report = await move(roots)

    assert (report.moved, report.already_archived) == (0, 50)
    assert all_event_rows(db, roots.layout.events) == before


async def test_rows_in_both_places_that_are_no_longer_eligible_stay_live(
    roots: Roots, db: Path
) -> None:
    """Step 3 deletes the month DB's ids of the range: one archived earlier (a
    crashed pass under another config) whose live row is identical but no longer
    eligible must not go with them."""
    await move(roots)
    back = put_back(roots, db, 100)
    dropped = ARCHIVABLE[0]
    kept = [r for r in back if r[2] == dropped]
    assert kept and len(kept) < len(back)
    narrower = [k for k in ARCHIVABLE if k != dropped]

    report = await move(roots, settings(roots, kinds=narrower))

    assert (report.moved, report.already_archived) == (0, len(back) - len(kept))
    ids = ", ".join(str(r[0]) for r in back)
    with sqlite3.connect(db) as live:
        still = live.execute(f"SELECT * FROM events WHERE id IN ({ids}) ORDER BY id").fetchall()
    assert still == kept, "only the rows of the kind no longer archived stay live"


@pytest.mark.parametrize("wal", [True, False], ids=["wal", "rollback-journal"])
async def test_a_row_updated_between_copy_and_delete_stays_live_as_updated(
    roots: Roots, wal: bool
) -> None:
    db = roots.base / "state.db"
    make_events_db(db, 1000, now_ms=NOW, wal=wal)
    before = {r[0]: r for r in all_event_rows(db, roots.layout.events)}
    updated: list[int] = []

    async def app_updates_a_copied_row(name: StepName, info: StepInfo) -> None:
        if name == "batch_archived" and info["batch"] == 2:
            row_id = int(str(info["first_id"]))
            with sqlite3.connect(db) as live:
                live.execute("UPDATE events SET payload = 'changed' WHERE id = ?", (row_id,))
            updated.append(row_id)

    report = await move(roots, step=app_updates_a_copied_row)

    [row_id] = updated
    assert report.kept_changed == 1 and not report.conflicts
    assert live_rows(roots, f"id = {row_id}") == [before[row_id][:3]], "still live"
    after = {r[0]: r for r in all_event_rows(db, roots.layout.events)}
    assert after.pop(row_id)[3] == "changed", "the update is kept, the stale copy gone"
    del before[row_id]
    assert after == before, "every other row exactly once"
    # The next pass archives the row as it is now.
    again = await move(roots)
    assert again.moved == 1 and live_rows(roots, f"id = {row_id}") == []


async def test_same_id_other_content_is_refused_and_both_kept(roots: Roots, db: Path) -> None:
    await move(roots)
    month_db = sorted(roots.layout.events.glob("*.db"))[0]
    with sqlite3.connect(month_db) as m:
        row = m.execute("SELECT * FROM events ORDER BY id LIMIT 1").fetchone()
    changed = (row[0], row[1], row[2], "edited by hand", row[4])
    with sqlite3.connect(db) as live:
        live.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", changed)

    report = await move(roots)

    assert [c.row_id for c in report.conflicts] == [row[0]]
    assert "both copies are kept" in report.conflicts[0].detail
    assert live_rows(roots, f"id = {row[0]}") == [changed[:3]]
    with sqlite3.connect(month_db) as m:
        assert m.execute("SELECT * FROM events WHERE id = ?", (row[0],)).fetchone() == row


async def test_held_rows_stay_live(roots: Roots, db: Path) -> None:
    first = live_rows(roots, f"kind = '{ARCHIVABLE[0]}'")[:3]
    async with await Manifest.open(roots.layout.manifest) as m:
        await keep_restored_rows(m, [int(str(r[0])) for r in first], until=NOW + DAY_MS)
        report = await move(roots, manifest=m)
    assert report.held == 3
    assert [r for r in live_rows(roots) if r in first] == first


async def test_unparsable_time_stamps_are_counted_and_never_moved(roots: Roots, db: Path) -> None:
    with sqlite3.connect(db) as live:
        live.execute(
            f"UPDATE events SET ts = 'yesterday' WHERE id IN (1, 2) AND kind = '{ARCHIVABLE[0]}'"
        )
        live.execute("UPDATE events SET ts = NULL WHERE id = 3")
        bad = live.execute(
            "SELECT id FROM events WHERE typeof(ts) != 'integer' ORDER BY id"
        ).fetchall()
    report = await move(roots)
    assert report.unparsable == len(bad) >= 2
    assert [r[0] for r in live_rows(roots, "typeof(ts) != 'integer'")] == [b[0] for b in bad]


async def test_iso_and_seconds_time_stamps(roots: Roots) -> None:
    for fmt, value in (("iso", "2020-03-04T05:06:07Z"), ("s", 1_583_298_367)):
        path = roots.base / "state.db"
        path.unlink(missing_ok=True)
        with sqlite3.connect(path) as live:
            live.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts, kind TEXT)")
            live.execute("INSERT INTO events (ts, kind) VALUES (?, 'webhook_event')", (value,))
            live.execute("INSERT INTO events (ts, kind) VALUES (?, 'webhook_event')", ("later",))
        report = await move(roots, settings(roots, ts_format=fmt))
        assert (report.moved, report.unparsable) == (1, 1), fmt
        assert (roots.layout.events / "2020-03.db").exists()
        for p in roots.layout.events.glob("*.db"):
            p.unlink()


async def test_a_live_db_not_in_wal_mode_still_moves(roots: Roots) -> None:
    make_events_db(roots.base / "state.db", 500, now_ms=NOW, wal=False)
    before = all_event_rows(roots.base / "state.db", roots.layout.events)
    report = await move(roots)
    assert report.moved > 0
    assert report.checkpointer.startswith("not applicable") and "delete mode" in report.checkpointer
    assert all_event_rows(roots.base / "state.db", roots.layout.events) == before


async def test_a_corrupt_month_is_refused_and_the_others_go_on(roots: Roots, db: Path) -> None:
    before = all_event_rows(db, roots.layout.events)
    roots.layout.events.mkdir(parents=True)
    month = time.strftime("%Y-%m", time.gmtime((NOW - 100 * DAY_MS) / 1000))
    bad = roots.layout.events / f"{month}.db"
    bad.write_bytes(b"this is not a database" * 100)

    report = await move(roots)

    assert list(report.months_refused) == [month]
    assert "its rows stay live" in report.months_refused[month]
    assert report.moved > 0 and month not in report.months
    assert bad.read_bytes() == b"this is not a database" * 100
    bad.unlink()
    assert all_event_rows(db, roots.layout.events) == before


async def test_a_month_from_a_newer_coldkeep_is_refused_untouched_and_not_restored_from(
    roots: Roots, db: Path
) -> None:
    roots.layout.events.mkdir(parents=True)
    month = time.strftime("%Y-%m", time.gmtime((NOW - 100 * DAY_MS) / 1000))
    newer = roots.layout.events / f"{month}.db"
    with sqlite3.connect(newer) as m:
        m.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts, kind, payload, n)")
        m.execute("INSERT INTO events VALUES (1, 0, 'webhook_event', 'from the future', 0)")
        m.execute("PRAGMA user_version = 2")
    before = newer.read_bytes()

    report = await move(roots)

    assert "month schema version 2" in report.months_refused[month]
    assert "upgrade coldkeep" in report.months_refused[month]
    assert report.moved > 0 and month not in report.months
    assert newer.read_bytes() == before, "never written"
    async with await Manifest.open(roots.layout.manifest) as m:
        back = await restore_events(
            settings(roots), roots.layout.events, m, kinds=None, months=None, grace_days=1
        )
    assert month in back.refused and "upgrade coldkeep" in back.refused[month]
    assert back.restored > 0, "the other months came back"
    with sqlite3.connect(db) as live:
        assert not live.execute("SELECT 1 FROM events WHERE payload = 'from the future'").fetchall()


LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT INTO events (ts, kind) VALUES (0, 'pr_closed')")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


async def test_a_live_db_locked_past_the_busy_timeout_is_retried_next_time(
    roots: Roots, db: Path
) -> None:
    before = all_event_rows(db, roots.layout.events)
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert locker.stdout is not None and locker.stdin is not None
    assert locker.stdout.readline() == "locked\n"
    try:
        report = await move(roots, settings(roots, busy_timeout_ms=50))
    finally:
        locker.stdin.write("\n")
        locker.stdin.close()
        locker.wait()
    assert report.moved == 0 and report.locked_rows > 0
    # Three batches locked in a row, and the one read ahead meanwhile.
    assert report.batches == 4, "stops reading once live stays locked"

    again = await move(roots)
    assert again.already_archived == report.locked_rows and again.moved > 0
    after = all_event_rows(db, roots.layout.events)
    assert len(after) == len(before) + 1  # the locker's own row
    assert next(r for r in after if r not in before)[2] == "pr_closed"


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda p: p.unlink(), "does not exist"),
        (lambda p: p.write_bytes(b"garbage" * 600), "cannot be opened as SQLite"),
        (lambda p: _sql(p, "DROP TABLE events"), "no table 'events'"),
        (
            lambda p: _sql(p, "DROP TABLE events; CREATE TABLE events (id TEXT, ts, kind)"),
            "no INTEGER PRIMARY KEY",
        ),
        (
            lambda p: _sql(p, "ALTER TABLE events RENAME COLUMN kind TO type"),
            "no column 'kind' (set events.kind_column",
        ),
        (
            lambda p: _sql(p, "ALTER TABLE events RENAME COLUMN ts TO at"),
            "no column 'ts' (set events.ts_column",
        ),
    ],
)
async def test_bad_input_is_refused_and_changes_nothing(
    roots: Roots, db: Path, make: object, says: str
) -> None:
    assert callable(make)
    cfg = settings(roots)  # the config was good when it was loaded
    make(db)
    snapshot = _dump(db)
    with pytest.raises(EventsError, match=says.replace("(", r"\(")):
        await move(roots, cfg)
    assert _dump(db) == snapshot
    assert not roots.layout.events.exists()


def _dump(path: Path) -> list[str] | bytes | None:
    """The database's logical content (or its bytes when it is not one)."""
    if not path.exists():
        return None
    try:
        with sqlite3.connect(path) as c:
            return list(c.iterdump())
    except sqlite3.DatabaseError:
        return path.read_bytes()


def _sql(path: Path, script: str) -> None:
    with sqlite3.connect(path) as c:
        c.executescript(script)


async def test_steps_are_announced_per_batch(roots: Roots, db: Path) -> None:
    seen: list[StepName] = []

    async def hook(name: StepName, info: StepInfo) -> None:
        seen.append(name)

    report = await move(roots, step=hook)
    assert seen == ["batch_archived", "batch_deleted"] * report.batches


async def test_cancel_stops_between_batches(roots: Roots, db: Path) -> None:
    from coldkeep.core.base.cancel import CancelToken

    token = CancelToken()

    async def hook(name: StepName, info: StepInfo) -> None:
        if name == "batch_deleted":
            token.cancel("operator asked")

    before = all_event_rows(db, roots.layout.events)
    batches: list[BatchMoved] = []
    report = await move(roots, step=hook, cancel=token, on_batch=batches.append)
    # The batch read and copied ahead while the first was deleted is finished.
    assert report.cancelled and report.batches == len(batches) == 2
    assert report.moved == sum(b.moved for b in batches) > 100
    assert all_event_rows(db, roots.layout.events) == before
    await asyncio.sleep(0)


async def test_the_newest_row_never_moves_so_its_id_is_never_reused(roots: Roots) -> None:
    make_events_db(roots.base / "state.db", 10, now_ms=NOW, days=400)  # all 40+ days old
    with sqlite3.connect(roots.base / "state.db") as live:
        live.execute("UPDATE events SET kind = 'webhook_event'")
    report = await move(roots)
    assert report.moved == 9 and [r[0] for r in live_rows(roots)] == [10]
    with sqlite3.connect(roots.base / "state.db") as live:
        cur = live.execute("INSERT INTO events (ts, kind) VALUES (0, 'pr_closed')")
        assert cur.lastrowid == 11
    assert (await move(roots)).moved == 1
    assert [r[0] for r in live_rows(roots)] == [11]


@given(st.floats(0.01, 400), st.floats(0, 1))
def test_every_writer_refused_during_a_delete_gets_in_at_its_next_retry(
    held_ms: float, refused_at: float
) -> None:
    """SQLite's default busy handler retries at fixed delays: whenever in a hold the
    application was refused, one of its retries falls in the gap after it."""
    x = refused_at * held_ms
    retries = [*BUSY_RETRIES_MS, *range(328, 2000, 100)]
    first_free = next(x + d for d in retries if x + d >= held_ms)
    assert first_free < held_ms + writer_gap_s(held_ms / 1000) * 1000


async def test_the_size_trigger_counts_frames_not_yet_checkpointed(roots: Roots) -> None:
    """The WAL file keeps its size after a PASSIVE checkpoint. Judged by that size,
    every batch after the file first passed the threshold asked for a checkpoint;
    judged by the frames still to copy, one comes every few batches."""
    make_events_db(roots.base / "state.db", 20_000, now_ms=NOW)
    ran: list[object] = []
    cfg = settings(roots, batch_rows=200, checkpoint_every=10_000, checkpoint_wal_bytes=256 * 1024)
    report = await move(roots, cfg, on_checkpoint=ran.append)
    # Each batch writes ~64 KiB of WAL: about one checkpoint every four batches.
    assert report.batches >= 40 and report.wal_peak > 256 * 1024
    assert 2 <= len(ran) <= report.batches // 3, (len(ran), report.batches)


async def test_the_wal_starts_over_once_it_reaches_wal_restart_bytes(
    roots: Roots, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints asked for by neither trigger, each slow to start (a busy
    disk): without the catch-up nothing is checkpointed and the WAL takes every
    batch's frames; with it the mover waits at the limit for a checkpoint that
    copies all of them, and its next delete starts the log over. Deleting on
    meanwhile, the deletes would stay ahead of every checkpoint."""
    slow = LiveCheckpointer._checkpoint

    def checkpoint(cp: LiveCheckpointer, conn: sqlite3.Connection) -> object:
        time.sleep(0.05)
        return slow(cp, conn)

    monkeypatch.setattr(LiveCheckpointer, "_checkpoint", checkpoint)
    peaks = []
    for restart in (0, 256 * 1024):
        make_events_db(roots.base / "state.db", 20_000, now_ms=NOW)
        cfg = settings(
            roots,
            batch_rows=200,
            checkpoint_every=10_000,
            checkpoint_wal_bytes=1 << 30,
            wal_restart_bytes=restart,
        )
        report = await move(roots, cfg)
        assert report.batches >= 40
        peaks.append(report.wal_peak)
        for p in [*roots.layout.events.iterdir(), *roots.base.glob("state.db*")]:
            p.unlink()
    # Each batch writes ~64 KiB of WAL.
    assert peaks[0] > 2 << 20 and peaks[1] < 256 * 1024 + 3 * 64 * 1024, peaks


async def test_a_reader_holding_an_old_snapshot_does_not_stop_the_move(
    roots: Roots, db: Path
) -> None:
    """No checkpoint can pass the reader's snapshot, so no catch-up finishes: each
    gives up, and the rows move all the same."""
    eligible = live_rows(roots, ELIGIBLE)
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM events").fetchone()
        cfg = settings(roots, batch_rows=50, wal_restart_bytes=64 * 1024)
        report = await move(roots, cfg)
    finally:
        reader.close()
    assert report.moved == len(eligible) and report.wal_peak > 4 * 64 * 1024


def _counts(db: Path, *tables: str) -> list[int]:
    with sqlite3.connect(db) as live:
        return [live.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables]


def _with_a_cleanup_trigger(db: Path) -> None:
    """An application's table of rows that belong to events, and the trigger that
    cleans it when the application deletes an event."""
    with sqlite3.connect(db) as live:
        live.execute("CREATE TABLE deliveries (id INTEGER PRIMARY KEY, event_id INTEGER)")
        live.execute("INSERT INTO deliveries (event_id) SELECT id FROM events")
        live.execute(
            "CREATE TRIGGER events_cleanup AFTER DELETE ON events "
            "BEGIN DELETE FROM deliveries WHERE event_id = old.id; END"
        )


async def test_a_trigger_on_the_events_table_refuses_the_move_unless_told_to_fire(
    roots: Roots, db: Path
) -> None:
    _with_a_cleanup_trigger(db)
    before = _counts(db, "events", "deliveries")
    with pytest.raises(EventsError) as refused:
        await move(roots)
    line = str(refused.value)
    assert "\n" not in line and "events_cleanup (AFTER DELETE)" in line, line
    assert 'events.triggers = "fire"' in line, line
    assert _counts(db, "events", "deliveries") == before, "nothing deleted anywhere"
    assert not list(roots.layout.events.glob("*.db")), "nothing copied"

    report = await move(roots, settings(roots, triggers="fire"))
    assert report.moved > 0
    events, deliveries = _counts(db, "events", "deliveries")
    assert events == deliveries == before[0] - report.moved, "the operator's triggers ran"


@pytest.mark.parametrize("action", ["CASCADE", "SET NULL", "NO ACTION"])
async def test_a_foreign_key_to_the_events_table_refuses_the_move_unless_told(
    roots: Roots, db: Path, action: str
) -> None:
    with sqlite3.connect(db) as live:
        live.execute(
            "CREATE TABLE replies (id INTEGER PRIMARY KEY, event_id INTEGER "
            f"REFERENCES events (id) ON DELETE {action})"
        )
        live.execute("INSERT INTO replies (event_id) SELECT id FROM events")
    before = _counts(db, "events", "replies")
    with pytest.raises(EventsError) as refused:
        await move(roots)
    line = str(refused.value)
    assert f"replies.event_id (ON DELETE {action})" in line, line
    assert _counts(db, "events", "replies") == before
    assert not list(roots.layout.events.glob("*.db"))

    # Ignored: enforcement stays off, the referencing rows keep their values.
    report = await move(roots, settings(roots, foreign_keys="ignore"))
    assert report.moved > 0
    assert _counts(db, "events", "replies") == [before[0] - report.moved, before[1]]
    with sqlite3.connect(db) as live:
        assert live.execute("SELECT count(*) FROM replies WHERE event_id IS NULL").fetchone() == (
            0,
        )


async def test_foreign_keys_told_to_fire_run_their_on_delete_actions(
    roots: Roots, db: Path
) -> None:
    with sqlite3.connect(db) as live:
        live.execute(
            "CREATE TABLE replies (id INTEGER PRIMARY KEY, event_id INTEGER "
            "REFERENCES events (id) ON DELETE CASCADE)"
        )
        live.execute("INSERT INTO replies (event_id) SELECT id FROM events")
    before = _counts(db, "events", "replies")
    report = await move(roots, settings(roots, foreign_keys="fire"))
    assert report.moved > 0
    assert _counts(db, "events", "replies") == [before[0] - report.moved] * 2


async def test_an_insert_trigger_refuses_a_restore_of_rows_unless_told_to_fire(
    roots: Roots, db: Path
) -> None:
    moved = (await move(roots)).moved
    with sqlite3.connect(db) as live:
        live.execute("CREATE TABLE outbox (event_id INTEGER)")
        live.execute(
            "CREATE TRIGGER notify AFTER INSERT ON events "
            "BEGIN INSERT INTO outbox VALUES (new.id); END"
        )
    before = _counts(db, "events", "outbox")
    async with await Manifest.open(roots.layout.manifest) as m:
        with pytest.raises(EventsError, match=r"trigger notify \(AFTER INSERT\)"):
            await restore_events(
                settings(roots), roots.layout.events, m, kinds=None, months=None, grace_days=1
            )
        assert _counts(db, "events", "outbox") == before, "nothing inserted, nothing sent"
        back = await restore_events(
            settings(roots, triggers="fire"),
            roots.layout.events,
            m,
            kinds=None,
            months=None,
            grace_days=1,
        )
    assert back.restored == moved
    assert _counts(db, "events", "outbox") == [before[0] + moved, moved]


def rows_by_id(*dbs: Path) -> dict[int, tuple[object, ...]]:
    rows: dict[int, tuple[object, ...]] = {}
    for path in dbs:
        with closing(sqlite3.connect(path)) as db:
            rows.update(
                (r[0], r) for r in db.execute("SELECT id, ts, kind, payload, n FROM events")
            )
    return rows


@examples(max_examples=25)
# Conflicts at two late rows of two months: the first one's batch may not end
# before the second (the first month's late rows after it are archived).
@example([(8, "other"), (5, "other")], 0, [35, 65] * 5)
@given(
    st.lists(
        st.tuples(st.integers(0, 400), st.sampled_from(["other", "same", "late"])), max_size=40
    ),
    st.integers(0, 60),
    st.lists(st.integers(31, 119), max_size=30),
)
def test_reused_ids_and_late_rows_never_cost_an_archived_row(
    writes: list[tuple[int, str]], new_rows: int, late_days: list[int]
) -> None:
    """After a first pass (late rows among its own: months interleaved by id) the
    application writes back archived ids (with other content: conflicts; or the
    same: already archived), late rows of old months, and new rows. The next
    pass keeps every archived row as it was, keeps each conflict live, and
    leaves every other row once, live or archived; batches of 20 rows put many
    of each inside one batch's window of ids."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        roots = Roots(base, base / "live", base / "archive")
        roots.live.mkdir()
        roots.archive.mkdir()
        db = base / "state.db"
        make_events_db(db, 600, now_ms=NOW)
        with sqlite3.connect(db) as live:  # late rows: months interleaved in the archive
            live.executemany(
                "INSERT INTO events (ts, kind, payload, n) VALUES (?, ?, ?, ?)",
                [(NOW - d * DAY_MS, ARCHIVABLE[0], f"late{d}", d) for d in late_days],
            )
        cfg = settings(roots, batch_rows=20)
        asyncio.run(move_events(cfg, roots.layout.events, now_ms=NOW))
        archived = rows_by_id(*roots.layout.events.glob("*.db"))
        ids = sorted(archived)
        conflicts: set[int] = set()
        with sqlite3.connect(db) as live:
            top = live.execute("SELECT max(id) FROM events").fetchone()[0]
            for pick, how in writes:
                rid = ids[-1 - pick % len(ids)]  # from the newest: the late rows among them
                row = archived[rid]
                if how == "late":  # a new id, an old month's time
                    top += 1
                    live.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (top, *row[1:]))
                    continue
                payload = "other content" if how == "other" else row[3]
                done = live.execute(
                    "INSERT OR IGNORE INTO events VALUES (?, ?, ?, ?, ?)",
                    (*row[:3], payload, row[4]),
                )
                if done.rowcount and how == "other":
                    conflicts.add(rid)
            for i in range(new_rows):
                live.execute(
                    "INSERT INTO events (ts, kind, payload, n) VALUES (?, ?, ?, ?)",
                    (NOW - (40 + i % 50) * DAY_MS, ARCHIVABLE[i % len(ARCHIVABLE)], f"new{i}", i),
                )
        live_before = rows_by_id(db)

        report = asyncio.run(move_events(cfg, roots.layout.events, now_ms=NOW))

        after = rows_by_id(*roots.layout.events.glob("*.db"))
        assert all(after.get(i) == r for i, r in archived.items()), "an archived row changed"
        live_after = rows_by_id(db)
        assert conflicts <= set(live_after) and report.conflicts_total == len(conflicts)
        for i, row in live_before.items():
            if i in conflicts:
                continue
            assert live_after.get(i, after.get(i)) == row, f"row {i} lost or changed"
            if i in live_after and i in after:
                assert i in archived and after[i] == row, f"row {i} copied twice"
