"""``coldkeep query`` as an operator runs it, on a site whose old event rows a
real pass moved into month databases: every row answered once, as text, JSON
lines or CSV; what was read on stderr with --stats; bad SQL exit 2, an
unreadable month exit 1 naming it; a reader that leaves early ends it quietly;
a month only the remote holds read there, and only as the object shipped:
another put at its key (a forgery of the same size) fails the query, in a
folder, a bucket without versions and one with Object Lock."""

from __future__ import annotations

import asyncio
import csv
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from pyrage import x25519

from coldkeep.core.events.query import ENGINES
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.store.manifest import Manifest

from helpers import ARCHIVABLE, COLDKEEP, all_event_rows, ck, ck_json, cli, make_events_db
from remotecheck import set_remote
from s3kit import S3Site
from s3kit.proxy import StripHeader


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


def _query(site: Path, *args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    run = cli("query", *args, "--config", str(site / "coldkeep.toml"))
    assert check is None or run.returncode == check, run.stderr
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


# a month read in place is the object shipped -------------------------------------------

FORGED = "SELECT id, unit FROM events WHERE unit LIKE 'FORGED%'"


def _remote_only(tmp_path: Path, remote: str | None = None) -> Path:
    """A small demo site passed and shipped (to the folder inside it, or as
    ``remote`` says), then its month databases gone from here: each month only
    the remote holds."""
    site = write_demo(tmp_path / "site", scale=0.02).root
    if remote is not None:
        set_remote(site, remote)
    ck(site, "pass")
    ck(site, "ship")
    for db in (site / "archive" / "events").glob("*.db*"):
        db.unlink()
    return site


def _newest_month(site: Path) -> tuple[str, str]:
    """The month with the most rows shipped, and its object's key under the site."""
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        [(month, path)] = db.execute(
            "SELECT month, path FROM remote_objects WHERE month IS NOT NULL "
            "ORDER BY row_count DESC, month LIMIT 1"
        ).fetchall()
    return str(month), str(path)


def _forged(shipped: bytes, tmp_path: Path) -> bytes:
    """The month database ``shipped`` with other rows, of the same size: every
    unit renamed ``FORGED-…``."""
    db = tmp_path / "forged.db"
    db.write_bytes(shipped)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE events SET unit = 'FORGED-' || substr(unit, 8)")
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    forged = db.read_bytes()
    assert len(forged) == len(shipped) and forged != shipped
    return forged


def _forged_object(shipped: bytes, tmp_path: Path) -> bytes:
    """The packed month ``shipped`` (a gzip of its database) holding other rows,
    of the same size: the forged database gzipped, then a gzip member of
    nothing but a comment to make up the size (gunzip reads it as nothing)."""
    gz = gzip.compress(_forged(gzip.decompress(shipped), tmp_path), compresslevel=9, mtime=0)
    pad = len(shipped) - len(gz)
    assert pad >= 21, "the forgery packs smaller than what shipped"
    header = bytes([0x1F, 0x8B, 8, 0x10, 0, 0, 0, 0, 0, 3])  # FCOMMENT, no time
    filler = header + b"x" * (pad - 21) + b"\0" + b"\x03\x00" + bytes(8)
    forged = gz + filler
    assert len(forged) == len(shipped) and gzip.decompress(forged) != gzip.decompress(shipped)
    return forged


def _refused_not_forged(site: Path, month: str) -> None:
    """The SQLite engine's answer over the month: exit 1 and one line naming
    its object as replaced, never a forged row; --partial answers without it."""
    run = _query(site, "--engine", "sqlite", "--json", FORGED, check=1)
    assert run.stdout == "", "a forged row was answered"
    [line] = run.stderr.splitlines()
    assert line.startswith(f"coldkeep: {month} (on the remote, events/{month}.")
    assert "no longer the object shipped (replaced since; run coldkeep verify --remote)" in line
    run = _query(site, "--engine", "sqlite", "--json", "--partial", FORGED)
    assert run.stdout == "" and f"left out {month}: " in run.stderr


def test_a_month_replaced_in_the_remote_folder_is_refused_never_read(tmp_path: Path) -> None:
    site = _remote_only(tmp_path)
    month, path = _newest_month(site)
    obj = site / "remote" / "demo" / path
    answered = _query(site, "--engine", "sqlite", "--json", "SELECT count(*) AS n FROM events")
    assert json.loads(answered.stdout)["n"] > 0

    forged = tmp_path / "forged"
    forged.write_bytes(_forged_object(obj.read_bytes(), tmp_path))
    os.replace(forged, obj)  # a new file at the key
    _refused_not_forged(site, month)


def test_a_month_written_over_in_the_remote_folder_is_refused_never_read(
    tmp_path: Path,
) -> None:
    """The same file written over in place, its inode kept."""
    site = _remote_only(tmp_path)
    month, path = _newest_month(site)
    obj = site / "remote" / "demo" / path
    obj.write_bytes(_forged_object(obj.read_bytes(), tmp_path))
    _refused_not_forged(site, month)


@pytest.mark.parametrize("bucket", ["plain", "object-lock"])
def test_a_month_replaced_in_the_bucket_is_refused_never_read(
    tmp_path: Path, s3: S3Site, bucket: str
) -> None:
    """A bucket without versions (its reads pinned by the ETag, If-Match), and
    one created with Object Lock, whose lock keeps the version shipped but lets
    another be put over it (pinned by the VersionId)."""
    remote = (
        f'url = "s3://{s3.bucket}/p"\nendpoint_url = "{s3.endpoint}"\n'
        'region = "us-east-1"\nsite = "t"\n'
    )
    if bucket == "object-lock":
        s3.server.client.create_bucket(Bucket="worm", ObjectLockEnabledForBucket=True)
        remote = remote.replace(s3.bucket, "worm") + 'object_lock = "governance"\n'
        remote += "[retention]\nfiles_days = 3650\nevents_days = 3650\n"
    site = _remote_only(tmp_path, remote)
    month, path = _newest_month(site)
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        [(version,)] = db.execute("SELECT version FROM remote_objects WHERE path = ?", [path])
    assert version.startswith('"') == (bucket == "plain")  # an ETag, else a VersionId
    name = "worm" if bucket == "object-lock" else s3.bucket
    shipped = s3.server.get_raw(name, f"p/t/{path}")
    assert shipped is not None
    s3.server.put_raw(name, f"p/t/{path}", _forged_object(shipped, tmp_path))
    _refused_not_forged(site, month)


def _month_rows(data: bytes, tmp_path: Path) -> int:
    db = tmp_path / "month.db"
    db.write_bytes(data)
    with sqlite3.connect(db) as con:
        [(n,)] = con.execute("SELECT count(*) FROM events")
    db.unlink()
    return int(n)


def test_packed_months_and_months_shipped_as_databases_are_read_and_fetched_back(
    tmp_path: Path,
) -> None:
    """A month ships as a gzip of its database (gunzip gives it back byte for
    byte), under a third of its size; one an older coldkeep shipped as the
    database itself is still read in place and fetched back."""
    site = _remote_only(tmp_path)
    bucket, manifest = site / "remote" / "demo", site / "archive" / "coldkeep.db"
    with sqlite3.connect(manifest) as db:
        shipped = db.execute(
            "SELECT month, path, bytes, plain_bytes, plain_sha256 FROM remote_objects "
            "WHERE month IS NOT NULL ORDER BY month"
        ).fetchall()
    assert len(shipped) >= 2
    plain = {}
    for month, path, _, size, sha in shipped:
        assert path.startswith(f"events/{month}.") and path.endswith(".db.gz")
        plain[month] = gzip.decompress((bucket / path).read_bytes())
        assert (len(plain[month]), hashlib.sha256(plain[month]).hexdigest()) == (size, sha)
    assert sum(r[2] for r in shipped) * 3 < sum(r[3] for r in shipped)
    every = "SELECT * FROM events ORDER BY id"
    answer = _query(site, "--engine", "sqlite", "--json", every).stdout
    assert answer

    old, packed = shipped[0][0], shipped[-1][0]
    gz = bucket / shipped[0][1]
    raw = gz.with_name(gz.name.removesuffix(".gz"))
    raw.write_bytes(plain[old])
    gz.unlink()
    with sqlite3.connect(manifest) as db:
        db.execute(
            "UPDATE remote_objects SET path = ?, bytes = ?, sha256 = ?, plain_bytes = NULL, "
            "plain_sha256 = NULL, seek_points = NULL WHERE path = ?",
            [f"events/{raw.name}", len(plain[old]), hashlib.sha256(plain[old]).hexdigest(),
             shipped[0][1]],
        )  # fmt: skip
    assert _query(site, "--engine", "sqlite", "--json", every).stdout == answer
    for month in (old, packed):
        result = ck_json(site, "restore-events", "--month", month)["result"]
        assert result["restored"] == _month_rows(plain[month], tmp_path) > 0, result


def test_a_month_shipped_before_versions_is_read_once_tied_to_what_shipped(
    tmp_path: Path, s3: S3Site
) -> None:
    """Rows shipped before versions were recorded: a bucket that keeps no
    sha256 leaves nothing to tie the object to the snapshot, so the month is
    refused until verify --remote has read it whole and recorded its version;
    then it is read, pinned to that version."""
    s3.proxy.fail(StripHeader("x-amz-sdk-checksum-algorithm"), method="PUT")  # none kept
    site = _remote_only(
        tmp_path,
        f'url = "s3://{s3.bucket}/p"\nendpoint_url = "{s3.endpoint}"\n'
        'region = "us-east-1"\nsite = "t"\n',
    )
    month, path = _newest_month(site)
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        shipped = dict(db.execute("SELECT path, version FROM remote_objects"))
        db.execute("UPDATE remote_objects SET version = NULL")
    assert shipped[path] and shipped[path].startswith('"')  # a bucket without versions: ETags
    count = "SELECT count(*) AS n FROM events"
    run = _query(site, "--engine", "sqlite", "--json", count, check=1)
    assert "shipped before coldkeep recorded object versions" in run.stderr
    assert "coldkeep verify --remote checks it whole and records its version" in run.stderr

    assert ck_json(site, "verify", "--remote")["result"]["failed"] == []
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        assert dict(db.execute("SELECT path, version FROM remote_objects")) == shipped
    assert json.loads(_query(site, "--engine", "sqlite", "--json", count).stdout)["n"] > 0

    forged = s3.server.get_raw(s3.bucket, f"p/t/{path}")
    assert forged is not None
    s3.server.put_raw(s3.bucket, f"p/t/{path}", _forged_object(forged, tmp_path))
    _refused_not_forged(site, month)


# an answer is never silently wrong ------------------------------------------------------


def test_a_query_while_a_pass_moves_rows_counts_each_row_once_or_says_it_raced(
    tmp_path: Path,
) -> None:
    """A real pass moves ~270,000 rows in small batches while queries run one
    after another, on both engines: each answers the exact count, or exits 1
    saying a pass overtook it; never another number."""
    site = tmp_path / "site"
    (site / "live").mkdir(parents=True)
    make_events_db(site / "state.db", 600_000, now_ms=int(time.time() * 1000), days=120)
    (site / "coldkeep.toml").write_text(
        'live_root = "live"\narchive_root = "archive"\nstate_db = "state.db"\nmode = "on"\n'
        f"[events]\nkinds = {json.dumps(list(ARCHIVABLE))}\nmin_age_days = 30\nbatch_rows = 500\n"
    )
    with sqlite3.connect(site / "state.db") as db:
        [(total,)] = db.execute("SELECT count(*) FROM events").fetchall()
    (site / "archive").mkdir()
    asyncio.run(_manifest_made(site / "archive" / "coldkeep.db"))  # no query reads one half made
    events = site / "archive" / "events"
    count = ["--json", "SELECT count(*) AS n FROM events"]
    answers: list[tuple[bool, subprocess.CompletedProcess[str]]] = []
    cmd = [*COLDKEEP, "pass", "--config", str(site / "coldkeep.toml")]
    with subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as passing:
        while passing.poll() is None:
            moving = any(events.glob("*.db"))
            engine = ["--engine", "sqlite"] if len(answers) % 2 else []
            run = _query(site, *engine, *count, check=None)
            answers.append((moving and passing.poll() is None, run))
        assert passing.wait() == 0, passing.stderr.read() if passing.stderr else ""
    assert sum(during for during, _ in answers) >= 2, "the pass ended before queries overlapped it"
    for _, run in answers:
        if run.returncode == 0:
            assert json.loads(run.stdout)["n"] == total, run.stdout
        else:
            assert run.returncode == 1, run.stderr
            assert (
                run.stderr.startswith("coldkeep: event rows moved")
                and "run the query again" in run.stderr
            )
    assert json.loads(_query(site, *count).stdout)["n"] == total


async def _manifest_made(path: Path) -> None:
    await (await Manifest.open(path)).close()


def test_a_month_gone_from_events_is_named_not_silently_missing(site: Path, tmp_path: Path) -> None:
    """A month a pass archived, its database gone and never shipped: the
    query refuses, naming it (exit 1); with --partial it answers without it
    and says so."""
    copy = tmp_path / "site"
    subprocess.run(["cp", "-a", str(site), str(copy)], check=True)
    month = sorted((copy / "archive" / "events").glob("*.db"))[0]
    with sqlite3.connect(month) as db:
        [(lost,)] = db.execute("SELECT count(*) FROM events").fetchall()
    whole = json.loads(_query(copy, "--json", "SELECT count(*) AS n FROM events").stdout)["n"]
    for p in month.parent.glob(month.name + "*"):
        p.unlink()
    for engine in ENGINES:
        run = _query(copy, "--engine", engine, "SELECT count(*) FROM events", check=1)
        [line] = run.stderr.splitlines()
        assert line.startswith(f"coldkeep: {month.stem}: archived, but gone from ")
        assert line.endswith("--partial answers without it")
        run = _query(
            copy, "--engine", engine, "--partial", "--json", "SELECT count(*) AS n FROM events"
        )
        assert json.loads(run.stdout)["n"] == whole - lost
        why = "archived, but its database is gone and none was shipped"
        assert run.stderr == f"coldkeep: query: left out {month.stem}: {why}\n"


def test_a_sealed_month_only_the_remote_holds_is_opened_with_the_identity(
    tmp_path: Path,
) -> None:
    """Shipped sealed, then its database gone from here: without --identity
    one line says that it opens it; with it, either engine answers as before,
    and the folder it was opened into is gone after."""
    site = write_demo(tmp_path / "site", scale=0.02).root
    key = x25519.Identity.generate()
    identity = tmp_path / "key.txt"
    identity.write_text(f"{key}\n")
    cache = tmp_path / "cache"
    config = site / "coldkeep.toml"
    config.write_text(
        config.read_text().rstrip("\n")
        + f'\nencrypt_to = ["{key.to_public()}"]\n[mount]\ncache_dir = "{cache}"\n'
    )
    ck(site, "pass")
    ck(site, "ship")
    sql = ["--json", "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind"]
    before = _query(site, *sql).stdout
    for db in (site / "archive" / "events").glob("*.db*"):
        db.unlink()
    month, _ = _newest_month(site)
    run = _query(site, "--from", month, "--to", month, *sql, check=1)
    [line] = run.stderr.splitlines()
    assert f"month {month} is sealed to " in line
    assert (
        "--identity FILE opens it for this query (into the read cache's folder, removed after)"
        in line
    )
    for engine in ENGINES:
        run = _query(site, "--engine", engine, "--identity", str(identity), "--stats", *sql)
        assert run.stdout == before
        assert "read on the remote tier" in run.stderr
        assert not [p for p in cache.rglob("*") if p.is_file() or p.name.startswith("rcache")]
