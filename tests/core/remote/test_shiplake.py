"""The fleet's lake on a folder remote (``[lake] enabled``): a ship writes each
event month it snapshots as one Parquet file, a month that changed gets a new
file and its old one goes, a site that turns the lake on later fills it at
its next ship, expiry deletes a month's files with it, and a manifest rebuilt
from the bucket still knows them."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import duckdb
import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configlake import LakeSettings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.configretention import RetentionSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.events.query import parse_range
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.remote.lakelayout import RAW, parse

DAY_MS = 86_400_000


class Clock:
    """The archiver's clock, moved by the test; it starts at the host's, which
    is a folder bucket's too (a statement from its future is not trusted)."""

    def __init__(self) -> None:
        self.now = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return write_demo(tmp_path / "demo", seed=5, scale=0.02).config


def archiver_for(
    config: Path, clock: Clock, *, lake: bool = True, events_days: float | None = None
) -> Archiver:
    settings = load_settings(config)
    remote = RemoteSettings((config.parent / "remote").as_uri(), site="web-1", keep_local_days=-1)
    settings = replace(
        settings,
        remote=remote,
        lake=LakeSettings(enabled=lake),
        retention=RetentionSettings(events_days=events_days),
    )
    return Archiver(settings, stream=EventStream(), clock=clock, serve_events=False)


async def shipped(site: Path, events_days: float | None = None) -> tuple[Clock, Archiver]:
    """The site after a pass and a ship with the lake on: its clock and archiver."""
    clock = Clock()
    ck = archiver_for(site, clock, events_days=events_days)
    await ck.run_pass()
    await ck.ship()
    return clock, ck


def lake_files(config: Path) -> dict[str, list[Path]]:
    """The site's Parquet files in the lake, by month."""
    root = config.parent / "remote"
    by_month: dict[str, list[Path]] = {}
    for p in sorted((root / "lake").rglob("*.parquet")):
        if p.is_file():
            name = parse(p.relative_to(root).as_posix())
            assert name is not None and name.site == "web-1", p
            by_month.setdefault(name.month, []).append(p)
    return by_month


def months(config: Path) -> dict[str, Path]:
    return {p.stem: p for p in (config.parent / "archive" / "events").glob("*.db")}


def count(db: Path) -> int:
    with sqlite3.connect(db) as con:
        (n,) = con.execute("SELECT count(*) FROM events").fetchone()
        return int(n)


def parquet_rows(path: Path) -> int:
    (n,) = duckdb.sql(f"SELECT count(*) FROM '{path}' WHERE {RAW} IS NULL").fetchone() or (0,)
    return int(n)


def lake_rows(config: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(config.parent / "archive" / "coldkeep.db") as db:
        return db.execute(
            "SELECT key, month, superseded_at IS NULL FROM lake_objects ORDER BY key"
        ).fetchall()


def grow(db: Path, n: int) -> None:
    with sqlite3.connect(db) as con:
        con.execute(
            "INSERT INTO events (ts, kind, unit, payload) "
            f"SELECT ts, kind, unit, payload FROM events ORDER BY id DESC LIMIT {n}"
        )


async def test_each_month_is_one_file_and_a_grown_month_replaces_its_own(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock)
    await ck.run_pass()
    first = await ck.ship()
    local = months(site)
    assert not first.problems and first.lake == first.months == len(local) > 1, first
    files = lake_files(site)
    assert sorted(files) == sorted(local)
    for month, [path] in files.items():
        assert parquet_rows(path) == count(local[month])
    assert [(m, cur) for _, m, cur in lake_rows(site)] == [(m, 1) for m in sorted(local)]
    remote = (await ck.status()).remote
    assert remote is not None and remote.lake is not None
    kept = sum(p.stat().st_size for [p] in files.values())
    assert (remote.lake.months, remote.lake.bytes, remote.lake.superseded) == (len(local), kept, 0)
    # Nothing changed: nothing written.
    again = await ck.ship()
    assert (again.lake, again.lake_deleted) == (0, 0) and lake_files(site) == files
    # The newest month grows: its new file replaces the old one, of a later generation.
    newest = sorted(local)[-1]
    grow(local[newest], 40)
    clock.now += 1000
    third = await ck.ship()
    assert (third.months, third.lake, third.lake_deleted) == (1, 1, 1), third
    now = lake_files(site)
    [new] = now[newest]
    [old] = files[newest]
    assert new != old and parquet_rows(new) == count(local[newest])
    gen = {p: parse(p.relative_to(site.parent / "remote").as_posix()) for p in (new, old)}
    assert gen[new].generation > gen[old].generation  # type: ignore[union-attr]
    assert {m: p for m, p in now.items() if m != newest} == {
        m: p for m, p in files.items() if m != newest
    }
    assert len(lake_rows(site)) == len(local)


async def test_a_site_that_turns_the_lake_on_later_fills_it_at_its_next_ship(site: Path) -> None:
    clock = Clock()
    await archiver_for(site, clock, lake=False).run_pass()
    plain = await archiver_for(site, clock, lake=False).ship()
    assert plain.lake == 0 and not lake_files(site)
    ck = archiver_for(site, clock)
    plan = await ck.ship_plan()
    assert (plan.months, plan.lake) == (0, plain.months)
    report = await ck.ship()
    assert (report.months, report.lake, report.uploaded) == (0, plain.months, 0), report
    assert sorted(lake_files(site)) == sorted(months(site))
    assert (await ck.ship_plan()).lake == 0


async def test_a_file_no_row_records_is_deleted_by_the_next_ship(site: Path) -> None:
    """What a kill between the upload and its record leaves, or a stranger's
    file of a lake name under this site's folder: deleted; a file of another
    name there is not coldkeep's, and stays."""
    _, ck = await shipped(site)
    files = lake_files(site)
    month = sorted(files)[0]
    [path] = files[month]
    orphan = path.with_name("g0000000000001-" + "a" * 12 + ".parquet")
    orphan.write_bytes(path.read_bytes())
    stranger = path.with_name("notes.txt")
    stranger.write_text("mine")
    report = await ck.ship()
    assert report.lake_deleted == 1 and not orphan.exists() and stranger.exists(), report
    assert lake_files(site) == files


async def test_expiry_deletes_a_months_lake_files_with_it(site: Path) -> None:
    _, ck = await shipped(site, events_days=1)
    before = lake_files(site)
    report = await ck.expire()
    gone = {Path(p).stem for p in report.expired if p.startswith("events/")}
    assert gone and not report.problems, report
    assert sorted(lake_files(site)) == sorted(m for m in before if m not in gone)
    assert {m for _, m, _ in lake_rows(site)} == set(before) - gone


async def test_a_manifest_rebuilt_from_the_bucket_knows_the_lake(site: Path) -> None:
    _, ck = await shipped(site)
    known = lake_rows(site)
    archive = site.parent / "archive"
    for lost in [archive / "coldkeep.db", *(archive / "events").iterdir()]:
        lost.unlink()
    dr = await ck.rebuild_from_remote()
    assert not dr.problems, dr
    assert lake_rows(site) == known
    # Its months came back as they were: nothing to write again.
    again = await ck.ship()
    assert (again.lake, again.lake_deleted) == (0, 0), again


async def test_lake_export_writes_the_months_shipped_before_from_here_or_the_bucket(
    site: Path,
) -> None:
    """Shipped without the lake, one month's database then lost here: the plan
    names every month, that one to be read from the bucket; the export writes
    each month, resumes where it stopped, and a range keeps to its months."""
    clock = Clock()
    await archiver_for(site, clock, lake=False).run_pass()
    await archiver_for(site, clock, lake=False).ship()
    local = months(site)
    rows = {m: count(p) for m, p in local.items()}
    lost = sorted(local)[1]
    local[lost].unlink()
    ck = archiver_for(site, clock)
    everything = parse_range(None, None)
    plan = await ck.lake_plan(everything)
    assert [(m.month, m.here) for m in plan.months] == [(m, m != lost) for m in sorted(rows)]
    assert plan.current == 0
    first = sorted(rows)[:3]
    some = await ck.lake_plan(parse_range(first[0], first[-1]))
    assert [m.month for m in some.months] == first
    done = await ck.lake_export([m.month for m in some.months])
    assert (done.lake, done.problems) == (3, []) and done.snapshot is not None, done
    assert sorted(lake_files(site)) == first
    rest = await ck.lake_plan(everything)
    assert rest.current == 3 and [m.month for m in rest.months] == sorted(rows)[3:]
    await ck.lake_export([m.month for m in rest.months])
    files = lake_files(site)
    assert {m: parquet_rows(p) for m, [p] in files.items()} == rows
    assert not (await ck.lake_plan(everything)).months


async def test_verify_remote_finds_a_lake_file_replaced_and_the_next_ship_writes_it_again(
    site: Path,
) -> None:
    """Someone who can write the bucket puts other bytes at a month's lake file:
    verify --remote says which, and the next ship deletes it and writes the
    month again from its snapshot."""
    clock, ck = await shipped(site)
    files = lake_files(site)
    month = sorted(files)[0]
    [path] = files[month]
    rows = parquet_rows(path)
    path.write_bytes(b"PAR1 not the file shipped")
    done = await ck.verify_remote()
    assert (done.lake, done.lake_ok) == (len(files), len(files) - 1), done
    [failed] = done.failed
    assert path.name in failed and f"writes {month} into the lake again" in failed
    assert (await ck.ship_plan()).lake == 1
    clock.now += 1000
    again = await ck.ship()
    assert (again.lake, again.lake_deleted, again.problems) == (1, 1, []), again
    [new] = lake_files(site)[month]
    assert new != path and not path.exists() and parquet_rows(new) == rows
    assert (await ck.verify_remote()).failed == []
