"""The backlog, counted without writing anything."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from pathlib import Path

from coldkeep.core.base.config import Settings, parse_settings
from coldkeep.core.events.dbmove import move_events
from coldkeep.core.ops.doctor import diagnose
from coldkeep.core.ops.plan import make_plan
from coldkeep.core.sched.metrics import read_site
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.restoredrows import keep_restored_rows

from helpers import ARCHIVABLE, DAY_MS, Roots, make_events_db

NOW = time.time_ns() // 1_000_000  # files get real mtimes


def settings(roots: Roots) -> Settings:
    return parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "state_db": str(roots.base / "state.db"),
            "events": {"kinds": list(ARCHIVABLE), "batch_rows": 500},
        },
        roots.base / "coldkeep.toml",
    )


def digest(root: Path) -> str:
    """Every file's bytes; a read-only SQLite reader may create an empty -wal/-shm
    beside a WAL database (it always exists while the application runs)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.endswith(("-wal", "-shm")):
            h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


async def test_plan_counts_files_and_rows_and_writes_nothing(roots: Roots) -> None:
    make_events_db(roots.base / "state.db", 5000, now_ms=NOW)
    roots.write("u1/a.jsonl", b"x" * 100, age_days=20)
    roots.write("u1/b.jsonl", b"x" * 50, age_days=40)
    roots.write("u2/c.log", b"x" * 7, age_days=30)
    roots.write("u2/new.log", b"x", age_days=1)
    before = digest(roots.base)

    plan = await make_plan(settings(roots), now_ms=NOW)

    assert digest(roots.base) == before
    assert [(u.unit, u.files, u.bytes) for u in plan.units] == [("u1", 2, 150), ("u2", 1, 7)]
    assert plan.skipped["too_new"] == 1
    assert plan.events is not None and plan.events.index == "events_kind_ts"
    report = await move_events(settings(roots), roots.layout.events, now_ms=NOW)
    assert plan.events.rows == report.moved, "the plan counts what a pass moves"
    by_kind = {m.kind for m in plan.events.months}
    assert by_kind == set(ARCHIVABLE)
    assert all(m.approx_bytes > 0 for m in plan.events.months)


async def test_plan_says_when_there_is_no_index(roots: Roots) -> None:
    make_events_db(roots.base / "state.db", 1000, now_ms=NOW, index=False)
    plan = await make_plan(settings(roots), now_ms=NOW)
    assert plan.events is not None and plan.events.index is None
    assert "CREATE INDEX ON events (kind, ts)" in plan.events.note


async def test_plan_leaves_out_held_rows_and_files(roots: Roots) -> None:
    make_events_db(roots.base / "state.db", 1000, now_ms=NOW)
    with sqlite3.connect(roots.base / "state.db") as db:
        old = [
            r[0]
            for r in db.execute(
                f"SELECT id FROM events WHERE kind = ? AND ts < {NOW - 40 * DAY_MS} LIMIT 4",
                (ARCHIVABLE[0],),
            )
        ]
    async with await Manifest.open(roots.layout.manifest) as m:
        unheld = await make_plan(settings(roots), m, now_ms=NOW)
        await keep_restored_rows(m, old, until=NOW + DAY_MS)
        held = await make_plan(settings(roots), m, now_ms=NOW)
    assert unheld.events is not None and held.events is not None
    assert held.events.held == 4 and held.events.rows == unheld.events.rows - 4


async def test_a_broken_events_table_is_reported_not_raised(roots: Roots) -> None:
    with sqlite3.connect(roots.base / "state.db") as db:
        db.execute("CREATE TABLE other (x)")
    plan = await make_plan(settings(roots), now_ms=NOW)
    assert plan.events is None and plan.events_error is not None
    assert "no table 'events'" in plan.events_error


# Time stamps no month can be found for (Python's datetime ends at year 1 and
# year 9999; SQLite's date functions a little further, or not at all).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NO_MONTH_MS = (
    INT64_MIN,
    INT64_MAX,
    -62_135_596_801_000,  # one second before 0001-01-01: SQLite says 0000-12
    -210_866_760_001_000,  # before SQLite's first day: no month at all
    253_402_300_800_000,  # 10000-01-01
    float("-inf"),
    -1e300,
)


async def test_rows_whose_time_stamp_has_no_month_are_unparsable_everywhere(
    roots: Roots,
) -> None:
    db = roots.base / "state.db"
    make_events_db(db, 600, now_ms=NOW)
    ids = [10 + 7 * i for i in range(len(NO_MONTH_MS))]
    marks = ", ".join(map(str, ids))
    with sqlite3.connect(db) as live:
        live.executemany(
            "UPDATE events SET ts = ?, kind = ? WHERE id = ?",
            [(ts, ARCHIVABLE[0], i) for i, ts in zip(ids, NO_MONTH_MS, strict=True)],
        )
        odd = live.execute(f"SELECT id, ts FROM events WHERE id IN ({marks})").fetchall()
    assert len(odd) == len(NO_MONTH_MS)
    cfg = settings(roots)

    plan = await make_plan(cfg, now_ms=NOW)
    assert plan.events is not None and plan.events.unparsable == len(NO_MONTH_MS)
    assert all(m.month[:4].isdigit() for m in plan.events.months)
    # doctor and the metrics count the backlog too (on the real clock: a row
    # may have come of age since).
    config = roots.base / "coldkeep.toml"
    config.write_text(
        f'live_root = "{roots.live}"\narchive_root = "{roots.archive}"\n'
        f'state_db = "{db}"\n[events]\nkinds = {list(ARCHIVABLE)!r}\n'.replace("'", '"')
    )
    space = {f.check: f for f in await diagnose(config)}["space"]
    assert space.level == "ok" and " event rows" in space.found, space.found
    backlog = (await read_site(cfg)).backlog
    assert backlog is not None and (backlog.event_rows or 0) >= plan.events.rows
    report = await move_events(cfg, roots.layout.events, now_ms=NOW)
    assert report.unparsable == len(NO_MONTH_MS)
    assert report.moved == plan.events.rows > 0
    with sqlite3.connect(db) as live:
        still = live.execute(f"SELECT id, ts FROM events WHERE id IN ({marks})").fetchall()
    assert still == odd, "never moved"
    again = await make_plan(cfg, now_ms=NOW)
    assert again.events is not None and again.events.rows == 0


async def test_a_trigger_the_move_would_fire_is_the_plans_events_error(roots: Roots) -> None:
    db = roots.base / "state.db"
    make_events_db(db, 300, now_ms=NOW)
    with sqlite3.connect(db) as live:
        live.execute("CREATE TABLE seen (event_id INTEGER)")
        live.execute(
            "CREATE TRIGGER forget BEFORE DELETE ON events "
            "BEGIN DELETE FROM seen WHERE event_id = old.id; END"
        )
    plan = await make_plan(settings(roots), now_ms=NOW)
    assert plan.events is None and plan.events_error is not None
    assert "trigger forget (BEFORE DELETE) that its DELETE fires" in plan.events_error
