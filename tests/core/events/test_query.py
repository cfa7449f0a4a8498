"""SQL over the live events table and every archived month as one table: the
answer is the same SQL's on one merged copy (months with holes, a range in
months or days, restored rows counted once); nothing is written, the live
database and its WAL untouched with the application's writer connected; a month
that cannot be read is named and refuses the query unless the caller takes an
answer without it; SQL that is not one SELECT is refused."""

from __future__ import annotations

import asyncio
import calendar
import re
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.config import Settings, parse_settings
from coldkeep.core.base.errors import UsageError
from coldkeep.core.events.eventschema import MONTH_SCHEMA
from coldkeep.core.events.query import ENGINES, Engine, EventsQuery, TimeRange, parse_range
from coldkeep.core.events.queryterms import BadQuery, QueryError
from coldkeep.core.store.manifest import Manifest

from helpers import Roots

CREATE = "CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER, kind TEXT NOT NULL, note TEXT)"
KINDS = ["login", "payment_failed", "view"]
Row = tuple[int, int, str, str | None]


def _month_start(year: int, month: int) -> int:
    return calendar.timegm((year, month, 1, 0, 0, 0)) * 1000


def _month_of(ts_ms: int) -> str:
    return time.strftime("%Y-%m", time.gmtime(ts_ms // 1000))


def _config(roots: Roots, **events: str) -> Settings:
    return parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "state_db": str(roots.base / "state.db"),
            "events": events,
        },
        roots.base / "coldkeep.toml",
    )


def _db(path: Path, rows: list[Row], *, month: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(CREATE)
    if month:
        db.execute(f"PRAGMA user_version = {MONTH_SCHEMA}")
    db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
    db.commit()
    db.close()


def _site(roots: Roots, live: list[Row], archived: list[Row]) -> None:
    """The live table, and each archived row in its month's database."""
    _db(roots.base / "state.db", live, month=False)
    by_month: dict[str, list[Row]] = {}
    for row in archived:
        by_month.setdefault(_month_of(row[1]), []).append(row)
    for old in roots.layout.events.glob("*.db*"):
        old.unlink()
    for month, rows in by_month.items():
        _db(roots.layout.events / f"{month}.db", rows, month=True)


@contextmanager
def _engine(
    roots: Roots,
    span: TimeRange | None = None,
    *,
    partial: bool = False,
    as_text: bool = False,
    engine_: Engine = "duckdb",
) -> Iterator[EventsQuery]:
    engine = EventsQuery(
        _config(roots), span or TimeRange(), partial=partial, as_text=as_text, engine=engine_
    )
    try:
        engine.open()
        yield engine
    finally:
        engine.close()


def _all(engine: EventsQuery, sql: str) -> list[tuple[Any, ...]]:
    rows = engine.run(sql)
    return [r for batch in rows.batches(size=7) for r in batch]


# Rows over four months of 2025 (April left empty: a hole), ids unique.
ts_2025 = st.sampled_from([(1, 31), (2, 28), (3, 31), (5, 31)]).flatmap(
    lambda m: st.integers(0, m[1] * 86_400_000 - 1).map(lambda off: _month_start(2025, m[0]) + off)
)
row_parts = st.tuples(ts_2025, st.sampled_from(KINDS), st.one_of(st.none(), st.text(max_size=5)))
days = st.sampled_from(["2025-01", "2025-02-14", "2025-03", "2025-04", "2025-05-31", None])


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(row_parts, min_size=0, max_size=40),
    where=st.lists(st.booleans(), min_size=40, max_size=40),
    start=days,
    end=days,
    kinds=st.sets(st.sampled_from(KINDS), min_size=1),
    engine=st.sampled_from(ENGINES),
)
def test_the_answer_is_the_same_sql_on_one_merged_copy(
    roots: Roots,
    engine: Engine,
    parts: list[tuple[int, str, str | None]],
    where: list[bool],
    start: str | None,
    end: str | None,
    kinds: set[str],
) -> None:
    rows = [(i + 1, ts, kind, note) for i, (ts, kind, note) in enumerate(parts)]
    # Each row archived or live; every third archived one restored too (in both).
    archived = [r for r, old in zip(rows, where, strict=False) if old]
    live = [r for r, old in zip(rows, where, strict=False) if not old]
    live += [(i, ts, kind, "restored") for i, ts, kind, _ in archived[::3]]
    _site(roots, live, archived)
    try:
        span = parse_range(start, end)
    except Exception:  # noqa: BLE001 - --from after --to: nothing to compare
        return
    merged = {r[0]: r for r in archived} | {r[0]: r for r in live}  # the live copy counts
    lo = -(2**62) if span.start is None else span.start * 1000
    hi = 2**62 if span.end is None else span.end * 1000
    want = sorted(r for r in merged.values() if lo <= r[1] < hi and r[2] in kinds)
    in_kinds = ", ".join(f"'{k}'" for k in sorted(kinds))
    with _engine(roots, span, engine_=engine) as run:
        got = _all(run, f"SELECT * FROM events WHERE kind IN ({in_kinds}) ORDER BY id")
        counts = _all(run, "SELECT kind, count(*) FROM events GROUP BY kind ORDER BY kind")
        if want:  # a lookup by id finds the one row (pushed into each month in SQLite)
            assert _all(run, f"SELECT * FROM events WHERE id = {want[-1][0]}") == [want[-1]]
    assert got == want
    expect: dict[str, int] = {}
    for r in merged.values():
        if lo <= r[1] < hi:
            expect[r[2]] = expect.get(r[2], 0) + 1
    assert counts == sorted(expect.items())


def test_months_outside_the_range_are_never_opened(roots: Roots) -> None:
    jan, mar = _month_start(2025, 1), _month_start(2025, 3)
    _site(roots, [], [(1, jan, "view", None), (2, mar, "view", None)])
    (roots.layout.events / "2025-01.db").write_bytes(b"not a database at all" * 100)
    with _engine(roots, parse_range("2025-02", "2025-03")) as engine:
        assert engine.plan.months == ["2025-03"] and engine.plan.pruned == 1
        assert _all(engine, "SELECT id FROM events") == [(2,)]


def test_an_unreadable_month_refuses_the_query_unless_a_partial_answer_is_asked(
    roots: Roots,
) -> None:
    jan, feb = _month_start(2025, 1), _month_start(2025, 2)
    _site(roots, [(3, feb + 5, "view", None)], [(1, jan, "view", None), (2, feb, "view", None)])
    bad = roots.layout.events / "2025-01.db"
    bad.write_bytes(b"\0" * 4096)
    with (
        pytest.raises(QueryError, match=r"2025-01\.db: cannot be read .*--partial"),
        _engine(roots),
    ):
        pass
    with _engine(roots, partial=True) as engine:
        assert list(engine.plan.left_out) == ["2025-01"]
        assert _all(engine, "SELECT id FROM events ORDER BY id") == [(2,), (3,)]


def test_a_month_from_a_newer_coldkeep_is_named_not_read(roots: Roots) -> None:
    _site(roots, [], [(1, _month_start(2025, 1), "view", None)])
    path = roots.layout.events / "2025-01.db"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {MONTH_SCHEMA + 1}")
    with pytest.raises(QueryError, match="upgrade coldkeep"), _engine(roots):
        pass


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("DELETE FROM events", "only SELECT is run (DELETE given)"),
        ("INSERT INTO events VALUES (9, 1, 'x', NULL)", "only SELECT is run (INSERT given)"),
        ("CREATE TABLE t AS SELECT 1", "only SELECT is run (CREATE given)"),
        ("COPY (SELECT 1) TO 'out.csv'", "only SELECT is run (COPY given)"),
        ("ATTACH 'other.db' AS o", "only SELECT is run (ATTACH given)"),
        ("SET enable_external_access = true", "only SELECT is run (SET given)"),
        ("SELECT 1; SELECT 2", "one statement at a time (2 given)"),
        ("SELEC 1", "the SQL does not parse"),
    ],
)
def test_sql_that_is_not_one_select_is_refused(roots: Roots, sql: str, said: str) -> None:
    _site(roots, [(1, _month_start(2025, 1), "view", None)], [])
    with _engine(roots) as engine, pytest.raises(BadQuery, match="^" + re.escape(said)):
        engine.run(sql)


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("DELETE FROM events", "only SELECT is run (DELETE given)"),
        ("ATTACH 'other.db' AS o", "only SELECT is run (ATTACH given)"),
        ("DETACH live", "only SELECT is run (DETACH given)"),
        ("PRAGMA query_only = 0", "only SELECT is run (PRAGMA given)"),
        ("WITH x AS (SELECT 1) DELETE FROM live.events", "only reading is allowed"),
        ("SELECT * FROM pragma_table_info('events')", "only reading is allowed"),
        ("SELECT 1; SELECT 2", "one statement at a time (2 given)"),
        ("SELECT 1; DROP TABLE live.events", "only reading is allowed"),
        ("SELECT FROM WHERE", "the SQL does not parse"),
    ],
)
def test_the_sqlite_engine_runs_one_read_and_nothing_else(
    roots: Roots, sql: str, said: str
) -> None:
    _site(roots, [(1, _month_start(2025, 1), "view", None)], [])
    with _engine(roots, engine_="sqlite") as engine:
        with pytest.raises(BadQuery, match="^" + re.escape(said)):
            engine.run(sql)
        assert _all(engine, "SELECT id FROM events") == [(1,)]  # still open, still whole


def test_the_sqlite_engine_says_to_narrow_a_range_of_too_many_months(roots: Roots) -> None:
    _site(
        roots, [], [(i, _month_start(2015 + i // 12, i % 12 + 1), "view", None) for i in range(130)]
    )
    with (
        pytest.raises(
            UsageError,
            match=r"^130 months in the range: .* narrow --from/--to, or use --engine duckdb",
        ) as got,
        _engine(roots, engine_="sqlite"),
    ):
        pass
    assert got.value.exit_code == 2
    with _engine(roots, parse_range("2020-01", None), engine_="sqlite") as engine:
        assert _all(engine, "SELECT count(*) FROM events") == [(70,)]


def test_the_sqlite_engine_finds_an_id_by_each_month_s_key_not_a_scan(roots: Roots) -> None:
    months = [_month_start(2025, m) for m in (1, 2, 3)]
    _site(
        roots,
        [(9, months[2] + 5, "view", None)],
        [(i, t, "view", None) for i, t in enumerate(months)],
    )
    with _engine(roots, engine_="sqlite") as engine:
        plan = [
            str(r[3]) for r in _all(engine, "EXPLAIN QUERY PLAN SELECT * FROM events WHERE id = 1")
        ]
        assert _all(engine, "SELECT id FROM events WHERE id = 1") == [(1,)]
    reads = [line for line in plan if line.startswith(("SEARCH ", "SCAN "))]
    # The live table and three months, and each month's row looked up in live.
    assert len(reads) == 7, plan
    assert all(line.startswith("SEARCH ") and "PRIMARY KEY" in line for line in reads), plan


@pytest.mark.parametrize("engine_", ENGINES)
def test_the_live_database_and_its_wal_are_untouched_with_the_writer_connected(
    roots: Roots, engine_: Engine
) -> None:
    feb = _month_start(2025, 2)
    _site(roots, [(5, feb, "view", None)], [(1, _month_start(2025, 1), "view", None)])
    state = roots.base / "state.db"
    app = sqlite3.connect(state)  # the application, its WAL open and written
    app.execute("PRAGMA wal_autocheckpoint = 0")
    app.execute("INSERT INTO events VALUES (6, ?, 'login', 'new')", [feb + 1])
    app.commit()
    before = {p.name: p.read_bytes() for p in roots.base.glob("state.db*")}
    try:
        with _engine(roots, engine_=engine_) as engine:
            assert _all(engine, "SELECT id FROM events ORDER BY id") == [(1,), (5,), (6,)]
        after = {p.name: p.read_bytes() for p in roots.base.glob("state.db*")}
        assert sorted(after) == sorted(before) == ["state.db", "state.db-shm", "state.db-wal"]
        assert after["state.db"] == before["state.db"]
        assert after["state.db-wal"] == before["state.db-wal"]
        app.execute("INSERT INTO events VALUES (7, ?, 'login', 'after')", [feb + 2])
        app.commit()  # the writer goes on
    finally:
        app.close()


def test_a_value_of_another_type_than_its_column_says_to_read_as_text(roots: Roots) -> None:
    _site(roots, [(1, _month_start(2025, 1), "view", None)], [])
    with sqlite3.connect(roots.base / "state.db") as db:
        db.execute("INSERT INTO events VALUES (2, '2025-01-02T00:00:00Z', 'view', NULL)")
    with _engine(roots) as engine, pytest.raises(QueryError, match="--as-text"):
        _all(engine, "SELECT ts FROM events")
    with _engine(roots, as_text=True) as engine:
        got = _all(engine, "SELECT id, ts FROM events ORDER BY id")
    assert got == [("1", str(_month_start(2025, 1))), ("2", "2025-01-02T00:00:00Z")]


@pytest.mark.parametrize(
    ("start", "end", "span"),
    [
        ("2025-03", None, TimeRange(calendar.timegm((2025, 3, 1, 0, 0, 0)), None)),
        (None, "2025-03", TimeRange(None, calendar.timegm((2025, 4, 1, 0, 0, 0)))),
        (None, "2025-12", TimeRange(None, calendar.timegm((2026, 1, 1, 0, 0, 0)))),
        ("2025-03-14", "2025-03-14", TimeRange(1741910400, 1741910400 + 86_400)),
    ],
)
def test_from_and_to_take_months_and_days_both_included(
    start: str | None, end: str | None, span: TimeRange
) -> None:
    assert parse_range(start, end) == span


@pytest.mark.parametrize(
    ("start", "end", "said"),
    [
        ("2025-13", None, "--from '2025-13': month must be in 1..12"),
        ("March", None, "--from 'March': give a month (2025-03) or a day (2025-03-14), UTC"),
        ("2025-05", "2025-04", "--from 2025-05 is after --to 2025-04: nothing lies between"),
        # Only ASCII digits are a date; a range ends within the year 9999.
        (
            "\u0662\u0660\u0662\u0666-\u0660\u0661",
            None,
            "--from '\u0662\u0660\u0662\u0666-\u0660\u0661': give a month (2025-03)",
        ),
        (None, "9999-12", "--to '9999-12': give a year from 1970 to 9998"),
        ("1969-12", None, "--from '1969-12': give a year from 1970 to 9998"),
    ],
)
def test_a_bad_range_is_one_line(start: str | None, end: str | None, said: str) -> None:
    with pytest.raises(Exception, match="^" + re.escape(said)) as got:
        parse_range(start, end)
    assert got.value.exit_code == 2  # type: ignore[attr-defined]


def test_a_month_only_the_remote_tier_holds_is_named_not_silently_missing(roots: Roots) -> None:
    async def make() -> None:
        await (await Manifest.open(roots.layout.manifest)).close()

    asyncio.run(make())
    with sqlite3.connect(roots.layout.manifest) as db:
        for month in ("2025-02", "2025-06"):
            db.execute(
                "INSERT INTO remote_objects (path, bytes, sha256, shipped_at, month) "
                "VALUES (?, 1, 'x', 1, ?)",
                [f"events/{month}.abc.db", month],
            )
    _site(roots, [], [(1, _month_start(2025, 1), "view", None)])
    refused = pytest.raises(QueryError, match=r"^2025-02, 2025-06: only in the remote tier")
    with refused, _engine(roots):
        pass
    with _engine(roots, parse_range("2025-01", "2025-05"), partial=True) as engine:
        assert engine.plan.left_out == {"2025-02": "only in the remote tier"}
        assert _all(engine, "SELECT id FROM events") == [(1,)]


def test_times_made_from_time_stamps_are_utc(roots: Roots) -> None:
    _site(roots, [(1, _month_start(2025, 3) + 1500, "view", None)], [])
    with _engine(roots) as engine:
        [(at,)] = _all(engine, "SELECT to_timestamp(ts / 1000) FROM events")
    assert at.isoformat() == "2025-03-01T00:00:01.500000+00:00"


@pytest.mark.parametrize("engine_", ENGINES)
def test_an_iso_time_stamp_is_placed_by_its_offset(roots: Roots, engine_: Engine) -> None:
    state = roots.base / "state.db"
    _db(state, [], month=False)
    with sqlite3.connect(state) as db:
        db.executemany(
            "INSERT INTO events VALUES (?, ?, 'view', NULL)",
            [(1, "2025-03-01T01:00:00+02:00"), (2, "2025-03-01T01:00:00Z"), (3, "junk")],
        )
    iso = _config(roots, ts_format="iso")
    engine = EventsQuery(iso, parse_range("2025-03", None), as_text=True, engine=engine_)
    try:
        engine.open()
        # 01:00+02:00 is February's last hour in UTC; junk has no time at all.
        assert _all(engine, "SELECT id FROM events ORDER BY id") == [("2",)]
    finally:
        engine.close()


# what the SQL may reach: the live table and the months, nothing else ----------------


def _attacks(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """Another SQLite file and a secret beside the site, and SQL that would
    read or change them (or the live database) through DuckDB."""
    other, secret = tmp_path / "other.db", tmp_path / "secret.txt"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES ('other')")
    secret.write_text("secret\n")
    return (
        other,
        secret,
        [
            f"SELECT * FROM sqlite_scan('{other}', 't')",
            f"SELECT * FROM sqlite_attach('{other}')",
            "SELECT * FROM sqlite_query('live', 'PRAGMA journal_mode = DELETE')",
            f"SELECT * FROM read_csv('{secret}')",
            f"SELECT * FROM read_text('{secret}')",
            "SELECT * FROM glob('/*')",
            "SELECT * FROM query('SELECT 1')",
            f"SELECT * FROM '{secret}'",
            f"SELECT (SELECT content FROM read_text('{secret}')) AS c",
            f"WITH s AS (SELECT * FROM sqlite_scan('{other}', 't')) SELECT * FROM s",
            f"SELECT * FROM events WHERE kind IN (SELECT x FROM sqlite_scan('{other}', 't'))",
            f"EXPLAIN SELECT * FROM sqlite_scan('{other}', 't')",
            "SELECT * FROM duckdb_settings()",
            "SELECT * FROM information_schema.tables",
            f"ATTACH '{other}' AS o",
            f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
            "INSTALL sqlite",
            "LOAD sqlite",
            "SET enable_external_access = true",
            "PRAGMA version",
        ],
    )


def test_duckdb_sql_reaches_nothing_but_the_live_table_and_the_months(
    roots: Roots, tmp_path: Path
) -> None:
    _, _, attacks = _attacks(tmp_path)
    _site(
        roots,
        [(2, _month_start(2025, 2), "view", None)],
        [(1, _month_start(2025, 1), "view", None)],
    )
    with _engine(roots) as engine:
        for sql in attacks:
            with pytest.raises(BadQuery):
                engine.run(sql)
        assert not (tmp_path / "out.csv").exists()
        assert _all(engine, "SELECT count(*) FROM events") == [(2,)]
        assert _all(engine, "SELECT count(*) FROM live.events") == [(1,)]
        assert _all(engine, "WITH e AS (SELECT * FROM events) SELECT count(*) FROM e") == [(2,)]
        assert _all(engine, "SELECT sum(range) FROM range(4)") == [(6,)]
    with sqlite3.connect(roots.base / "state.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_every_duckdb_table_function_but_the_allowed_is_refused(roots: Roots) -> None:
    """The whole list of DuckDB's table functions and table macros, with the
    SQLite reader loaded: a DuckDB that brings a new one cannot widen what a
    query reaches unseen."""
    from coldkeep.core.events.duckquery import TABLE_FUNCTIONS

    _site(roots, [(1, _month_start(2025, 1), "view", None)], [])
    with _engine(roots) as engine:
        assert engine.con is not None
        names = {
            str(r[0])
            for r in engine.con.execute(
                "SELECT DISTINCT function_name FROM duckdb_functions() "
                "WHERE function_type IN ('table', 'table_macro')"
            ).fetchall()
        }
        assert {"sqlite_scan", "sqlite_attach", "sqlite_query", "read_csv"} <= names
        assert names >= TABLE_FUNCTIONS  # each one allowed is one DuckDB has
        for name in sorted(names - TABLE_FUNCTIONS):
            with pytest.raises(BadQuery, match=re.escape(f"the SQL reads {name.lower()}()")):
                engine.run(f'SELECT * FROM "{name}"()')


def test_sqlite_sql_reaches_nothing_but_the_live_table_and_the_months(
    roots: Roots, tmp_path: Path
) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    _site(
        roots,
        [(2, _month_start(2025, 2), "view", None)],
        [(1, _month_start(2025, 1), "view", None)],
    )
    attacks = [
        f"ATTACH '{other}' AS o",
        "PRAGMA journal_mode = DELETE",
        "SELECT load_extension('/tmp/x.so')",
        "SELECT fts3_tokenizer('simple')",
        "SELECT * FROM pragma_database_list",
        "SELECT * FROM sqlite_dbpage('live')",
        f"VACUUM INTO '{tmp_path / 'copy.db'}'",
        "SELECT 1; VACUUM",
        "CREATE VIRTUAL TABLE temp.f USING fts5(a)",
        "SELECT * FROM sqlite_master",
    ]
    with _engine(roots, engine_="sqlite") as engine:
        # Every virtual table module of this SQLite but the two allowed.
        modules = [str(r[0]) for r in apsw.Connection(":memory:").execute("PRAGMA module_list")]
        assert "dbstat" in modules
        allowed = {"json_each", "json_tree"}
        for sql in [*attacks, *(f'SELECT * FROM "{m}"' for m in modules if m not in allowed)]:
            with pytest.raises(BadQuery):
                engine.run(sql)
        assert not (tmp_path / "copy.db").exists()
        assert _all(engine, "SELECT count(*) FROM events") == [(2,)]
        assert _all(engine, "SELECT count(*) FROM live.events") == [(1,)]
        assert _all(engine, "SELECT count(*) FROM json_each('[1, 2]')") == [(2,)]
    with sqlite3.connect(roots.base / "state.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


# an engine kept open: each read is of its own moment ---------------------------------


def _restore(roots: Roots, rows: list[Row]) -> None:
    """``rows`` (archived) put back into live, as restore-events puts them:
    the same ids and content, their month copies kept."""
    with sqlite3.connect(roots.base / "state.db") as db:
        db.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)


def _move(roots: Roots, ids: list[int]) -> None:
    """The live rows ``ids`` moved as a pass moves them: copied into their
    month's database (made if missing), then deleted from live."""
    with sqlite3.connect(roots.base / "state.db") as live:
        rows = live.execute(
            f"SELECT * FROM events WHERE id IN ({','.join('?' * len(ids))})", ids
        ).fetchall()
        for row in rows:
            path = roots.layout.events / f"{_month_of(row[1])}.db"
            if not path.exists():
                _db(path, [], month=True)
            with sqlite3.connect(path) as month:
                month.execute("INSERT INTO events VALUES (?, ?, ?, ?)", row)
        live.execute(f"DELETE FROM events WHERE id IN ({','.join('?' * len(ids))})", ids)


@pytest.mark.parametrize("engine_", ENGINES)
def test_an_engine_kept_open_counts_restored_and_moved_rows_once(
    roots: Roots, engine_: Engine
) -> None:
    """The console's Events screen keeps its engine open across its own
    restores and the scheduler's passes: each read counts every row once, as
    it stands then (a restored row live, a moved one archived, a new month
    read)."""
    from coldkeep.core.events.overview import overview

    jan, feb, mar = (_month_start(2025, m) for m in (1, 2, 3))
    archived: list[Row] = [(i, jan + i, "view", None) for i in range(1, 11)]
    _site(roots, [(i, feb + i, "login", None) for i in range(11, 21)], archived)
    with _engine(roots, engine_=engine_) as engine:
        assert _all(engine, "SELECT count(*) FROM events") == [(20,)]
        _restore(roots, archived[:4])
        assert _all(engine, "SELECT count(*) FROM events") == [(20,)]
        if engine_ == "duckdb":
            counts = overview(engine)
            assert (counts.total, counts.archived_rows) == (20, 6)
        _move(roots, [11, 12, 13])  # February's first month database
        assert _all(engine, "SELECT count(*), count(DISTINCT id) FROM events") == [(20, 20)]
        assert "2025-02" in engine.plan.months
        with sqlite3.connect(roots.base / "state.db") as db:
            db.execute("INSERT INTO events VALUES (21, ?, 'login', NULL)", [mar])
        assert _all(engine, "SELECT max(id), count(*) FROM events") == [(21, 21)]


def test_a_sqlite_read_is_one_snapshot_while_a_pass_moves_rows(roots: Roots) -> None:
    """Rows moved between a read's first batch and its last are each read
    once: the read holds live's snapshot, and the months' after it."""
    jan = _month_start(2025, 1)
    _site(roots, [(i, jan + i, "view", None) for i in range(1, 31)], [])
    _db(roots.layout.events / "2025-01.db", [], month=True)
    with _engine(roots, engine_="sqlite") as engine:
        rows = engine.run("SELECT id FROM events ORDER BY id")
        batches = rows.batches(size=5)
        got = [r[0] for r in next(batches)]
        _move(roots, list(range(1, 31)))
        got += [r[0] for batch in batches for r in batch]
        assert got == list(range(1, 31))
        assert _all(engine, "SELECT count(*) FROM events") == [(30,)]
