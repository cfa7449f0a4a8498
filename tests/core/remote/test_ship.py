"""The remote tier on a directory (``file://``): what a ship uploads and records,
when local copies go, and that everything still restores byte for byte."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import math
import os
import sqlite3
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.lock import LockHeld
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.base.stream import EventStream
from coldkeep.core.files.restore import Selection
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.ops.session import NoRemote
from coldkeep.core.remote import verify as remote_verify
from coldkeep.core.remote.marker import RemoteUnmounted
from coldkeep.core.remote.months import snapshot_db
from coldkeep.core.remote.rebuild import DrChoice
from coldkeep.core.sched import alerts
from coldkeep.core.store.manifest import Manifest

from helpers import live_files

DAY_MS = 86_400_000


class Clock:
    """The archiver's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000_000  # 2027-01-15

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return write_demo(tmp_path / "demo", seed=5, scale=0.02).config


def archiver_for(config: Path, clock: Clock, **remote: object) -> Archiver:
    settings = load_settings(config)
    folder = config.parent / "remote"
    remote_settings = RemoteSettings(folder.as_uri(), site="web-1", **remote)  # type: ignore[arg-type]
    settings = replace(settings, remote=remote_settings)
    return Archiver(settings, stream=EventStream(), clock=clock, serve_events=False)


def remote_files(config: Path) -> dict[str, str]:
    """The folder remote's files but the heartbeats and their entries in the
    fleet's index (each ship puts one of each)."""
    root = config.parent / "remote"
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and p.parent.name != "heartbeat" and p.parent.parent.name != ".beats"
    }


def rows(config: Path, sql: str) -> list[Any]:
    with sqlite3.connect(config.parent / "archive" / "coldkeep.db") as db:
        return db.execute(sql).fetchall()


async def test_a_ship_uploads_each_archive_file_once_and_reads_it_back(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=-1)
    await ck.run_pass()
    archive = site.parent / "archive"
    local = {
        p.relative_to(archive).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (archive / "files").rglob("*")
        if p.is_file()
    }
    report = await ck.ship()
    assert not report.problems
    shipped = remote_files(site)
    # Every archive file (a bundle once for its members) is there, byte for byte.
    assert {f"web-1/{p}": h for p, h in local.items()}.items() <= shipped.items()
    assert report.uploaded == len(local) + report.months
    assert report.months > 0 and any(k.startswith("web-1/events/") for k in shipped)
    # The manifest snapshot, and its statement signed beside it.
    snapshot = report.snapshot
    manifests = sorted(k for k in shipped if k.startswith("web-1/manifest/"))
    assert manifests == [snapshot, f"{snapshot}.sig"]
    recorded = dict(rows(site, "SELECT path, sha256 FROM remote_objects WHERE month IS NULL"))
    assert recorded == local
    # Nothing new: nothing sent, no new snapshot; local copies kept for ever.
    again = await ck.ship()
    assert (again.uploaded, again.already, again.dropped, again.snapshot) == (0, 0, 0, None)
    assert remote_files(site) == shipped
    assert all(p.exists() for p in (archive / "files").rglob("*"))
    # Each ship put a heartbeat; the ship keeps the newest three of them.
    for _ in range(3):
        assert (await ck.ship()).heartbeat is not None
    beats = sorted(p.name for p in (site.parent / "remote" / "web-1" / "heartbeat").iterdir())
    assert len(beats) == 3 and again.heartbeat is not None
    # Each named in the fleet's index, once it was in place; the older entries gone too.
    assert sorted(p.name for p in (site.parent / "remote" / ".beats" / "web-1").iterdir()) == beats


async def test_local_copies_go_after_keep_local_days_and_still_restore(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=30)
    originals = live_files(site.parent)
    await ck.run_pass()
    report = await ck.ship()
    assert report.dropped == 0, "not before keep_local_days"
    clock.now += 31 * DAY_MS
    report = await ck.ship()
    assert report.dropped > 0 and not report.problems
    archive_files = [p for p in (site.parent / "archive" / "files").rglob("*") if p.is_file()]
    assert archive_files == [], "every shipped local copy dropped"
    # Nothing is missing to recovery, nothing to verify locally.
    recovery = await ck.recover()
    assert recovery.missing == []
    assert (await ck.verify()).checked == 0
    # Every archived file comes back from the remote tier, whole.
    out = site.parent / "out"
    restored = await ck.restore(Selection(glob="**"), to=out)
    assert restored.counts.get("restored", 0) > 0 and set(restored.counts) == {"restored"}
    shas = dict(rows(site, "SELECT relpath, sha256 FROM entries ORDER BY id"))
    back = {
        p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in out.rglob("*")
        if p.is_file()
    }
    assert back == {rel: shas[rel] for rel in back} and len(back) == restored.counts["restored"]
    assert set(back) <= set(originals) | set(shas)
    assert not [p for p in (site.parent / "archive").iterdir() if p.name.startswith(".remote-")]


async def test_a_copy_deleted_remotely_before_its_drop_keeps_the_local_one(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=30)
    await ck.run_pass()
    await ck.ship()
    files = sorted(k for k in remote_files(site) if k.startswith("web-1/files/"))
    gone, changed = (site.parent / "remote" / k for k in files[:2])
    gone.unlink()  # a lifecycle rule, or a hand, in the 30 days between
    changed.write_bytes(b"other bytes")
    clock.now += 31 * DAY_MS
    report = await ck.ship()
    kept = {f.removeprefix("web-1/") for f in files[:2]}
    for path in kept:
        assert (site.parent / "archive" / path).is_file(), f"{path}: the only good copy, kept"
    assert len(report.problems) == 2 and report.dropped == len(files) - 2
    assert "no longer there" in " ".join(report.problems)
    assert "not what was shipped" in " ".join(report.problems)
    # verify --remote ships both again; the next ship drops them.
    verified = await ck.verify_remote()
    assert sorted(verified.reshipped) == sorted(kept)
    clock.now += 31 * DAY_MS
    report = await ck.ship()
    assert report.dropped == 2 and not report.problems
    restored = await ck.restore(Selection(glob="**"), to=site.parent / "out")
    assert set(restored.counts) == {"restored"}


async def test_a_new_version_never_takes_the_name_of_a_dropped_copy(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=0)
    await ck.run_pass()
    await ck.ship()
    [(gz, relpath)] = rows(
        site,
        "SELECT gz_path, relpath FROM entries WHERE member_offset IS NULL "
        "AND status = 'archived' ORDER BY id LIMIT 1",
    )
    live = site.parent / "live" / str(relpath)
    live.parent.mkdir(parents=True, exist_ok=True)
    live.write_bytes(b'{"a new version": 1}\n' * 70_000)  # above the bundle size
    old = 1_600_000_000_000_000_000
    os.utime(live, ns=(old, old))
    summary = await ck.run_pass()
    assert summary.files.archived == 1 and not summary.problems
    [(new_gz,)] = rows(
        site, f"SELECT gz_path FROM entries WHERE relpath = '{relpath}' ORDER BY id DESC LIMIT 1"
    )
    assert new_gz != gz and (site.parent / "archive" / str(new_gz)).exists()


async def test_an_object_already_there_with_other_bytes_is_reported_and_left(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=0)
    await ck.run_pass()
    [(gz,)] = rows(site, "SELECT gz_path FROM entries ORDER BY id LIMIT 1")
    planted = site.parent / "remote" / "web-1" / str(gz)
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"someone else's bytes")
    report = await ck.ship()
    [problem] = report.problems
    assert str(gz) in problem and "not recorded, nothing replaced" in problem
    assert planted.read_bytes() == b"someone else's bytes"
    assert (site.parent / "archive" / str(gz)).exists(), "its local copy is kept"
    assert rows(site, f"SELECT 1 FROM remote_objects WHERE path = '{gz}'") == []
    assert report.pending == 1


async def test_ship_without_a_remote_says_how_to_configure_one(site: Path) -> None:
    settings = replace(load_settings(site), remote=None)
    ck = Archiver(settings, stream=EventStream(), serve_events=False)
    with pytest.raises(NoRemote, match=r"no \[remote\] is configured"):
        await ck.ship()


async def test_a_changed_event_month_is_shipped_again_as_a_new_object(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=-1)
    await ck.run_pass()
    assert (await ck.ship_plan()).months > 0
    first = await ck.ship()
    assert (await ck.ship_plan()).months == 0
    months = dict(rows(site, "SELECT path, month FROM remote_objects WHERE month IS NOT NULL"))
    assert len(months) == first.months > 0
    path, month = sorted(months.items())[0]
    db = site.parent / "archive" / "events" / f"{month}.db"
    with sqlite3.connect(db) as conn:
        table = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        conn.execute(f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} LIMIT 1)")
    assert (await ck.ship_plan()).months == 1, "the plan counts it"
    clock.now += 60_000  # a later ship: its snapshot is the month's newest
    again = await ck.ship()
    assert again.months == 1 and again.uploaded == 1
    now = rows(site, f"SELECT path FROM remote_objects WHERE month = '{month}' ORDER BY shipped_at")
    assert now[0][0] == path and len(now) == 2
    assert (site.parent / "remote" / "web-1" / path).exists(), "the old snapshot is kept"


def grow(db: Path, n: int) -> None:
    """``n`` more rows in month database ``db``, as a pass that moves more of
    the month's rows adds them."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO events (ts, kind, unit, payload) "
            "SELECT ts, kind, unit, payload FROM events ORDER BY id DESC LIMIT ?",
            [n],
        )


def named_copy(snapshot: Path, month: str) -> str:
    """The copy of ``month`` manifest snapshot ``snapshot`` names as its newest
    (the one a rebuild from it fetches)."""
    with sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT path FROM remote_objects WHERE month = ? ORDER BY shipped_at, path", [month]
        ).fetchall()
    return str(rows[-1][0])


async def test_ten_ships_of_a_growing_month_leave_two_copies_of_it_in_the_bucket(
    site: Path,
) -> None:
    """Each ship sends the changed month again under a new name; the copies
    neither of the two newest manifest snapshots names are let go, so the
    bucket holds two of the month (packed: less than the database once), and
    a rebuild from either snapshot gets the rows it names."""
    clock = Clock()
    clock.now = int(time.time() * 1000)  # the rebuild takes no snapshot of the bucket's future
    ck = archiver_for(site, clock, keep_local_days=-1)
    await ck.run_pass()
    first = await ck.ship()
    archive = site.parent / "archive"
    month = sorted(p.stem for p in (archive / "events").glob("*.db"))[-1]
    db = archive / "events" / f"{month}.db"
    bucket = site.parent / "remote" / "web-1"
    others = {p.name for p in (bucket / "events").iterdir() if not p.name.startswith(month)}
    assert len(others) == first.months - 1 > 0
    let_go = 0
    for n in range(10):
        grow(db, 50)
        clock.now += 1000
        report = await ck.ship()
        assert report.months == 1 and not report.problems, report
        let_go += report.superseded
        copies = sorted(p.name for p in (bucket / "events").glob(f"{month}.*.db.gz"))
        assert len(copies) == min(n + 2, 2), copies
        assert {p.name for p in (bucket / "events").iterdir()} == others | set(copies)
    assert let_go == 9 and report.loose_deleted == 1
    # Packed, the two copies together hold less than the database once.
    kept = sum((bucket / "events" / c).stat().st_size for c in copies)
    assert kept < db.stat().st_size, (kept, db.stat().st_size)
    assert len(rows(site, f"SELECT 1 FROM remote_objects WHERE month = '{month}'")) == 2
    assert not rows(site, "SELECT 1 FROM remote_loose")
    newest, before = sorted((bucket / "manifest").glob("g*.db"))[-1:-3:-1]
    assert {named_copy(newest, month), named_copy(before, month)} == {f"events/{c}" for c in copies}
    assert month_rows(bucket / named_copy(newest, month)) == month_rows(db)
    # Lost here: a rebuild from the newest snapshot, and one from the one before
    # it (picked by hand), each get the month as that snapshot names it.
    for snapshot in (newest, before):
        want = month_rows(bucket / named_copy(snapshot, month))
        for lost in [archive / "coldkeep.db", *(archive / "events").iterdir()]:
            lost.unlink()
        choice = DrChoice(snapshot=f"web-1/manifest/{snapshot.name}")
        dr = await ck.rebuild_from_remote(choice=choice)
        assert not dr.problems and dr.months == first.months, dr
        assert month_rows(db) == want
    # One older than those two: the month's copy it names is gone, and said.
    older = sorted((bucket / "manifest").glob("g*.db"))[-3]
    for lost in [archive / "coldkeep.db", *(archive / "events").iterdir()]:
        lost.unlink()
    dr = await ck.rebuild_from_remote(choice=DrChoice(snapshot=f"web-1/manifest/{older.name}"))
    [problem] = dr.problems
    assert named_copy(older, month) in problem and "two newest snapshots" in problem, problem
    assert not db.exists() and dr.months == first.months - 1


async def test_verify_remote_ships_a_bad_copy_again_from_the_local_one(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=-1)
    await ck.run_pass()
    await ck.ship()
    shipped = remote_files(site)
    files = sorted(k for k in shipped if k.startswith("web-1/files/"))
    bad, gone = site.parent / "remote" / files[0], site.parent / "remote" / files[1]
    bad.write_bytes(b"rot" + bad.read_bytes()[3:])
    gone.unlink()
    report = await ck.verify_remote()
    assert report.failed == [] and sorted(report.reshipped) == sorted(
        k.removeprefix("web-1/") for k in files[:2]
    )
    assert report.ok == report.checked - 2
    assert remote_files(site) == shipped, "both copies are what was shipped again"
    assert rows(site, "SELECT count(*) FROM remote_objects WHERE verify_error IS NOT NULL") == [
        (0,)
    ]


async def test_verify_remote_alerts_a_bad_copy_with_no_local_one(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=0)
    await ck.run_pass()
    await ck.ship()
    [bad] = sorted((site.parent / "remote" / "web-1" / "files").rglob("*.tar"))[:1]
    bad.write_bytes(bad.read_bytes()[:-1024])
    report = await ck.verify_remote()
    [line] = report.failed
    assert bad.name in line and "not the" in line and "cannot be repaired from here" in line
    async with await Manifest.open(site.parent / "archive" / "coldkeep.db") as m:
        kinds = [c.kind for c in await alerts.conditions(m)]
    assert "remote_verify_failed" in kinds


@pytest.mark.parametrize("page", [1000, 1])
async def test_a_sampled_remote_verify_reads_every_copy_over_successive_runs(
    site: Path, page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The share is read from the manifest a page at a time (PAGE: one, here too,
    # so that every share crosses pages and one wraps round to the first).
    monkeypatch.setattr(remote_verify, "PAGE", page)
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=-1)
    await ck.run_pass()
    await ck.ship()
    total = len(rows(site, "SELECT path FROM remote_objects"))
    seen: set[str] = set()
    for _ in range(3):
        report = await ck.verify_remote(sample=0.34)
        assert report.checked == math.ceil(total * 0.34)
        checked = rows(site, "SELECT path FROM remote_objects WHERE verified_at IS NOT NULL")
        seen |= {p for (p,) in checked}
    assert len(seen) == total


async def test_a_remote_verify_out_of_time_says_what_it_left_and_the_next_goes_on(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A second passes between one look at the clock and the next.
    ticks = itertools.count()
    monkeypatch.setattr(remote_verify, "monotonic", lambda: float(next(ticks)))
    ck = archiver_for(site, Clock(), keep_local_days=-1)
    await ck.run_pass()
    await ck.ship()
    total = len(rows(site, "SELECT path FROM remote_objects"))
    cut = await ck.verify_remote(sample=1, max_duration=3.5)
    assert (cut.checked, cut.share, cut.left, cut.complete) == (3, total, total - 3, False)
    read = "SELECT path FROM remote_objects WHERE verified_at IS NOT NULL ORDER BY path"
    first = rows(site, read)
    assert first == rows(site, "SELECT path FROM remote_objects ORDER BY path LIMIT 3")
    rest = await ck.verify_remote(sample=1, max_duration=10_000)
    assert (rest.checked, rest.left, rest.complete) == (total, 0, True)
    assert len(rows(site, read)) == total


async def test_restore_events_fetches_a_lost_month_back_from_the_remote(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=-1)
    await ck.run_pass()
    await ck.ship()
    [(month,)] = rows(site, "SELECT month FROM remote_objects WHERE month IS NOT NULL LIMIT 1")
    db = site.parent / "archive" / "events" / f"{month}.db"
    with sqlite3.connect(db) as conn:
        archived = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    db.unlink()
    report = await ck.restore_events(months=[month])
    assert db.exists() and report.restored == archived > 0


def month_rows(db: Path) -> list[tuple[Any, ...]]:
    """A month database's rows; a packed month's (a gzip in the bucket) read
    after gunzip, as an operator would."""
    if db.suffix == ".gz":
        with tempfile.TemporaryDirectory() as tmp:
            plain = Path(tmp) / db.stem
            plain.write_bytes(gzip.decompress(db.read_bytes()))
            return month_rows(plain)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return sorted(conn.execute("SELECT * FROM events"))


@pytest.fixture
def pinned(tmp_path: Path) -> tuple[Path, Clock]:
    """A demo site written on the test's clock: its event rows end today, so the
    month rows are moved into this pass is still open (a pass adds to it)."""
    clock = Clock()
    return write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=clock.now).config, clock


async def test_rows_moved_into_an_open_month_are_shipped_and_counted_until_then(
    pinned: tuple[Path, Clock],
) -> None:
    site, clock = pinned
    ck = archiver_for(site, clock, keep_local_days=-1)
    await ck.run_pass()
    events = site.parent / "archive" / "events"
    local = {db.stem: month_rows(db) for db in sorted(events.glob("*.db"))}
    assert "2026-12" in local, "rows of the month a pass still adds to are archived"
    before = await ck.status()
    assert before.remote is not None
    assert before.remote.pending_events.rows == sum(map(len, local.values())) > 0
    assert before.remote.pending_events.months == {m: len(r) for m, r in local.items()}
    report = await ck.ship()
    assert not report.problems and report.months == len(local)
    latest = dict(
        rows(site, "SELECT month, path FROM remote_objects WHERE month IS NOT NULL ORDER BY month")
    )
    assert sorted(latest) == sorted(local), "every month goes, the open one too"
    remote = site.parent / "remote" / "web-1"
    assert {m: month_rows(remote / p) for m, p in latest.items()} == local
    after = await ck.status()
    assert after.remote is not None and after.remote.pending_events.rows == 0
    assert after.remote.to_dict()["pending_event_rows"] == 0
    assert after.remote.to_dict()["pending_event_months"] == 0

    # Days later, a pass adds to the open month: counted until the next ship sends it.
    clock.now += 5 * DAY_MS
    moved = await ck.run_pass()
    assert moved.events is not None and getattr(moved.events, "moved", 0) > 0
    grown = len(month_rows(events / "2026-12.db")) - len(local["2026-12"])
    assert grown > 0
    st = await ck.status()
    assert st.remote is not None and st.remote.pending_events.months == {"2026-12": grown}
    assert (await ck.ship_plan()).months == 1
    clock.now += 60_000
    again = await ck.ship()
    assert again.months == 1 and not again.problems
    snapshots = rows(
        site, "SELECT path FROM remote_objects WHERE month = '2026-12' ORDER BY shipped_at"
    )
    assert len(snapshots) == 2 and all((remote / p).exists() for (p,) in snapshots)
    assert month_rows(remote / snapshots[-1][0]) == month_rows(events / "2026-12.db")
    done = await ck.status()
    assert done.remote is not None and done.remote.pending_events.rows == 0


async def test_a_ship_waits_for_no_pass_moving_rows_into_a_month(
    pinned: tuple[Path, Clock],
) -> None:
    """The mover writes month databases only under the archive lock, and a ship
    snapshots them only under it: a ship while a pass moves rows is refused."""
    site, clock = pinned
    ck = archiver_for(site, clock, keep_local_days=-1)
    refused: list[BaseException] = []

    async def ship_mid_batch(name: StepName, info: StepInfo) -> None:
        if name == "batch_archived" and not refused:
            try:
                await ck.ship()
            except LockHeld as err:
                refused.append(err)

    ck.steps.user_step = ship_mid_batch
    summary = await ck.run_pass()
    assert summary.status == "ok" and len(refused) == 1
    assert "pass" in str(refused[0])


def test_a_month_snapshot_is_consistent_while_another_connection_writes(tmp_path: Path) -> None:
    """The snapshot (SQLite's backup API, one step) reads one transaction's state
    of the month database, whatever a writer commits meanwhile."""
    db = tmp_path / "2026-12.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, payload TEXT)")
    stop = threading.Event()

    def write() -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        n = 0
        while not stop.is_set():
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO events (id, payload) VALUES (?, ?)",
                ((n + i, "x" * 200) for i in range(100)),
            )
            conn.execute("COMMIT")
            n += 100
        conn.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        counts = []
        for i in range(20):
            out = tmp_path / f"snap-{i}.db"
            snapshot_db(db, out)
            with sqlite3.connect(out) as conn:
                assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
                counts.append(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    finally:
        stop.set()
        writer.join()
    assert all(n % 100 == 0 for n in counts), counts
    assert counts == sorted(counts)


# the remote marker: a folder whose disk is not mounted ----------------------------


@pytest.mark.parametrize("mount_point", [False, True])
async def test_a_remote_folder_whose_disk_is_gone_stops_ship_verify_and_restore(
    site: Path, mount_point: bool
) -> None:
    """The disk unmounted: the folder is gone (or, at a mount point, empty). A
    ship must not make it again on the disk below, read its own uploads back
    from there and drop the local copies."""
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=0)
    await ck.run_pass()
    first = await ck.ship()
    assert first.uploaded > 0 and not first.problems
    remote = site.parent / "remote"
    assert (remote / ".coldkeep-remote").is_file(), "the first ship marks the remote"
    remote.rename(site.parent / "remote-disk")  # unmounted: its objects are elsewhere
    if mount_point:
        remote.mkdir()  # the empty mount point left behind
    unit = sorted(p.parent for p in (site.parent / "live").glob("*/.closed"))[0]
    late = unit / "late.jsonl"
    late.write_bytes(b'{"ts":1}\n' * 5000)
    os.utime(late, (1, 1))
    assert (await ck.run_pass()).files.archived == 1
    archive_before = sorted(p for p in (site.parent / "archive" / "files").rglob("*"))
    said = f"the remote folder {remote.as_uri()} has no marker: is its disk mounted?"
    for attempt in (ck.ship(), ck.verify_remote()):
        with pytest.raises(RemoteUnmounted) as err:
            await attempt
        assert "\n" not in str(err.value) and said in str(err.value)
    # A restore gives back what is local and refuses each remote-only file alike.
    out = site.parent / "out"
    restored = await ck.restore(Selection(unit=unit.name), to=out)
    assert restored.failed and restored.counts.get("restored") == 1
    refused = [f for f in restored.files if f.result == "error"]
    assert refused and all(said in f.detail for f in refused)
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["late.jsonl"]
    assert remote.exists() == mount_point, "the folder is not made again"
    assert not mount_point or list(remote.iterdir()) == []
    assert sorted(p for p in (site.parent / "archive" / "files").rglob("*")) == archive_before
    # The disk back: the ship goes on where it stopped.
    if mount_point:
        remote.rmdir()
    (site.parent / "remote-disk").rename(remote)
    clock.now += 60_000  # a later manifest snapshot
    again = await ck.ship()
    assert again.uploaded > 0 and not again.problems


async def test_a_remote_shipped_to_before_markers_gets_one(site: Path) -> None:
    clock = Clock()
    ck = archiver_for(site, clock, keep_local_days=-1)
    await ck.run_pass()
    await ck.ship()
    marker = site.parent / "remote" / ".coldkeep-remote"
    marker.unlink()
    assert not (await ck.verify_remote()).failed
    assert not marker.exists(), "verify writes nothing"
    assert not (await ck.ship()).problems
    assert marker.is_file()


async def test_a_marker_write_cut_short_is_cleared_by_the_next_ship(site: Path) -> None:
    """A kill while the first ship wrote the marker leaves its partial at the
    top of the remote folder, outside every site's prefix: the next ship, the
    marker there, removes it (and no other site's upload under way)."""
    ck = archiver_for(site, Clock(), keep_local_days=-1)
    await ck.run_pass()
    await ck.ship()
    remote = site.parent / "remote"
    cut = remote / ".coldkeep-remote.0badc0de.partial"
    cut.write_bytes(b'{"coldkeep": "remote tier", "fi')
    other = remote / "web-2" / "files" / "x.jsonl.gz.0badc0de.partial"
    other.parent.mkdir(parents=True)
    other.write_bytes(b"another site's upload under way")
    assert not (await ck.ship()).problems
    assert not cut.exists() and other.exists()
    assert (remote / ".coldkeep-remote").is_file()
