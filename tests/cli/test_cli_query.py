"""``coldkeep query`` as an operator runs it, on a site whose old event rows a
real pass moved into month databases: every row answered once, as text, JSON
lines or CSV; what was read on stderr with --stats; bad SQL exit 2, an
unreadable month exit 1 naming it; a reader that leaves early ends it quietly."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from helpers import ARCHIVABLE, COLDKEEP, all_event_rows, ck, make_events_db
from s3kit import S3Site


def _passed(site: Path, rows: int, days: int, more: str = "") -> Path:
    """A site of ``rows`` events over ``days`` days, a pass run: those older than
    30 days in month databases."""
    (site / "live").mkdir(parents=True)
    make_events_db(site / "state.db", rows, now_ms=int(time.time() * 1000), days=days)
    (site / "coldkeep.toml").write_text(
        'live_root = "live"\narchive_root = "archive"\nstate_db = "state.db"\nmode = "on"\n'
        f"[events]\nkinds = {json.dumps(list(ARCHIVABLE))}\nmin_age_days = 30\n{more}"
    )
    ck(site, "pass")
    assert len(list((site / "archive" / "events").glob("*.db"))) >= 2
    return site


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _passed(tmp_path_factory.mktemp("query") / "site", 3000, 120)


def _query(site: Path, *args: str, check: int = 0) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        [*COLDKEEP, "query", *args, "--config", str(site / "coldkeep.toml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == check, run.stderr
    return run


def test_every_row_is_answered_once_in_each_format(site: Path) -> None:
    rows = all_event_rows(site / "state.db", site / "archive" / "events")
    want = sorted((r[0], r[2]) for r in rows)
    sql = "SELECT id, kind FROM events ORDER BY id"
    as_json = [json.loads(line) for line in _query(site, "--json", sql).stdout.splitlines()]
    assert [(r["id"], r["kind"]) for r in as_json] == want
    as_csv = list(csv.reader(io.StringIO(_query(site, "--csv", sql).stdout)))
    assert as_csv[0] == ["id", "kind"]
    assert [(int(i), k) for i, k in as_csv[1:]] == want
    text = _query(site, sql).stdout.splitlines()
    assert text[0].split() == ["id", "kind"] and set(text[1]) == {"-", " "}
    assert [tuple(line.split()) for line in text[2:]] == [(str(i), k) for i, k in want]


def test_the_sqlite_engine_answers_as_duckdb_does(site: Path) -> None:
    rows = all_event_rows(site / "state.db", site / "archive" / "events")
    some = sorted(rows)[len(rows) // 3][0]
    for sql in (
        "SELECT id, kind FROM events ORDER BY id",
        "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind",
        f"SELECT * FROM events WHERE id = {some}",
    ):
        duck = _query(site, "--json", sql).stdout
        assert _query(site, "--json", "--engine", "sqlite", sql).stdout == duck
    run = _query(site, "--engine", "mysql", "SELECT 1", check=2)
    assert "'mysql' is not one of 'duckdb', 'sqlite'" in run.stderr


def test_stats_say_what_was_read(site: Path) -> None:
    months = sorted(p.stem for p in (site / "archive" / "events").glob("*.db"))
    run = _query(site, "--stats", "--from", months[-1], "SELECT count(*) FROM events")
    assert run.stderr.strip().startswith("coldkeep: query: 1 row in ")
    assert run.stderr.strip().endswith(
        f"from the live table and 1 month, {len(months) - 1} pruned by the range"
    )


def test_bad_sql_is_exit_2_and_an_unreadable_month_exit_1_naming_it(
    site: Path, tmp_path: Path
) -> None:
    run = _query(site, "DROP TABLE events", check=2)
    assert run.stderr == "coldkeep: only SELECT is run (DROP given): a query reads, never writes\n"
    run = _query(site, "--json", "--csv", "SELECT 1", check=2)
    assert run.stderr == "coldkeep: --json or --csv, not both\n"
    copy = tmp_path / "site"
    subprocess.run(["cp", "-a", str(site), str(copy)], check=True)
    month = sorted((copy / "archive" / "events").glob("*.db"))[0]
    month.write_bytes(b"garbage" * 1000)
    run = _query(copy, "SELECT count(*) FROM events", check=1)
    assert run.stderr.startswith(f"coldkeep: {month}: cannot be read (")
    run = _query(copy, "--partial", "SELECT 1 AS one")
    assert run.stderr.startswith(f"coldkeep: query: left out {month.stem}: ")
    assert run.stdout.split() == ["one", "---", "1"]


def test_a_reader_that_leaves_early_ends_it_quietly(site: Path) -> None:
    cmd = [*COLDKEEP, "query", "SELECT * FROM events", "--config", str(site / "coldkeep.toml")]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 0
    assert err == b""


def test_a_month_only_the_remote_holds_is_read_there_a_few_pages_at_a_time(
    tmp_path_factory: pytest.TempPathFactory, s3: S3Site
) -> None:
    """Shipped, then its database gone from here: the sqlite engine answers
    from the remote snapshot as from the database, a lookup fetching a few
    pages of it; DuckDB refuses, naming the month and the engine that reads it."""
    remote = (
        f'[remote]\nurl = "s3://{s3.bucket}/p"\nendpoint_url = "{s3.endpoint}"\n'
        'region = "us-east-1"\nsite = "t"\n'
    )
    site = _passed(tmp_path_factory.mktemp("remote") / "site", 40_000, 100, remote)
    ck(site, "ship")
    month_db = max((site / "archive" / "events").glob("*.db"), key=lambda p: p.stat().st_size)
    month, size = month_db.stem, month_db.stat().st_size
    with sqlite3.connect(month_db) as db:
        ids = [r[0] for r in db.execute("SELECT id FROM events ORDER BY id")]
        want = db.execute("SELECT * FROM events WHERE id = ?", [ids[len(ids) // 2]]).fetchall()
    everything = _query(site, "--json", "SELECT * FROM events ORDER BY id").stdout
    gone = site / "gone"
    gone.mkdir()
    for p in month_db.parent.glob(month_db.name + "*"):
        shutil.move(p, gone / p.name)

    run = _query(site, "--from", month, "--to", month, "SELECT 1", check=1)
    assert run.stderr.startswith(f"coldkeep: {month}: only in the remote tier")
    assert "coldkeep query --engine sqlite reads them there" in run.stderr

    s3.proxy.reset_counts()
    lookup = f"SELECT * FROM events WHERE id = {ids[len(ids) // 2]}"
    sql = ["--engine", "sqlite", "--json", "--stats", "--from", month, "--to", month, lookup]
    run = _query(site, *sql)
    got = [tuple(json.loads(line).values()) for line in run.stdout.splitlines()]
    assert got == want
    fetched = int(re.search(r"\((?:[\d.]+ \w+) fetched, (\d+) bytes\)", run.stderr)[1])  # type: ignore[index]
    gets = [x for x in s3.proxy.exchanges if x.method == "GET" and f"events/{month}." in x.path]
    assert sum(x.body_sent for x in gets) == fetched
    assert fetched <= 8 * 4096 and fetched * 10 < size, (fetched, size)  # a few of its pages

    whole = _query(site, "--engine", "sqlite", "--json", "SELECT * FROM events ORDER BY id")
    assert whole.stdout == everything
