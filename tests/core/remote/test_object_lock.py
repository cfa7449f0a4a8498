"""S3 Object Lock on moto's server (which enforces it: a versioned DELETE of an
object whose retention has not ended, or under a legal hold, is refused): every
shipped object locked until its expiry, expiry deleting exactly what the bucket
lets go, and the site's legal holds mirrored to the bucket's."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configlake import LakeSettings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.configretention import RetentionSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.base.times import DAY_MS, now_ms
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.ops.fleet import Fleet
from coldkeep.core.remote.objectstore import RemoteFatal

from helpers import ck, ck_json
from remotecheck import set_remote
from s3kit import WORM, S3Site
from s3kit.proxy import INTERNAL_ERROR, ResetRequest, Truncate

PREFIX = "fleet"
SITE = "web-1"
TOP = f"{PREFIX}/{SITE}/"
MINUTE_MS = 60_000


class Clock:
    """The archiver's clock, moved by the test (moto's is the real one)."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def archive_files(config: Path) -> list[Path]:
    """The archive's files, but SQLite's ``-wal`` and ``-shm``: they come and go
    as connections to the manifest open and close."""
    found = (config.parent / "archive").rglob("*")
    return sorted(p for p in found if p.is_file() and not p.name.endswith(("-wal", "-shm")))


@pytest.fixture
def no_retries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A refused request is answered at once, not after botocore's backoff."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    yield


def archiver_for(
    config: Path,
    clock: Clock,
    s3: S3Site,
    files_days: float,
    events_days: float,
    *,
    lake: bool = False,
) -> Archiver:
    settings = load_settings(config)
    remote = RemoteSettings(
        f"s3://{s3.bucket}/{PREFIX}",
        endpoint_url=s3.endpoint,
        region="us-east-1",
        site=SITE,
        keep_local_days=-1,
        object_lock="compliance",
    )
    retention = RetentionSettings(files_days, events_days)
    settings = replace(settings, remote=remote, retention=retention, lake=LakeSettings(lake))
    return Archiver(settings, stream=EventStream(), clock=clock, serve_events=False)


def lake_heads(s3: S3Site) -> dict[str, dict[str, Any]]:
    """The site's files in the fleet's lake, as their HEADs say them."""
    client = s3.server.client
    keys = s3.server.list_keys(s3.bucket, f"{PREFIX}/lake/events/site={SITE}/")
    return {key: client.head_object(Bucket=s3.bucket, Key=key) for key in keys}


def heads(s3: S3Site) -> dict[str, dict[str, Any]]:
    """Every object of the site but its heartbeats (never locked: a ship prunes
    them), as its HEAD says it."""
    client = s3.server.client
    return {
        key: client.head_object(Bucket=s3.bucket, Key=key)
        for key in s3.server.list_keys(s3.bucket, TOP)
        if "/heartbeat/" not in key
    }


def versions(s3: S3Site) -> dict[str, int]:
    """How many versions each key of the site has in the bucket."""
    found: dict[str, int] = {}
    pages = s3.server.client.get_paginator("list_object_versions").paginate(
        Bucket=s3.bucket, Prefix=TOP
    )
    for page in pages:
        for v in page.get("Versions", []):
            if "/heartbeat/" not in v["Key"]:  # heartbeats: above
                found[v["Key"]] = found.get(v["Key"], 0) + 1
    return found


def until_ms(head: dict[str, Any]) -> int:
    return int(head["ObjectLockRetainUntilDate"].timestamp() * 1000)


def newest_ms(config: Path) -> dict[str, int]:
    """Each archive file's newest entry mtime (ms), read from the manifest."""
    with sqlite3.connect(config.parent / "archive" / "coldkeep.db") as db:
        rows = db.execute(
            "SELECT gz_path, max(mtime_ns) FROM entries WHERE status != 'expired' GROUP BY gz_path"
        ).fetchall()
    return {str(path): int(ns) // 1_000_000 for path, ns in rows}


def legal_holds(s3: S3Site) -> set[str]:
    """The site's objects whose S3 legal hold is on (relative to the site), as
    GetObjectLegalHold says it (and the HEAD agrees)."""
    client = s3.server.client
    held = set()
    for key, head in heads(s3).items():
        try:
            answer = client.get_object_legal_hold(Bucket=s3.bucket, Key=key)
            status = answer["LegalHold"].get("Status", "OFF")  # moto: {} for never held
        except ClientError as err:  # S3, for never held: no such configuration
            assert err.response["Error"]["Code"] == "NoSuchObjectLockConfiguration", err
            status = "OFF"
        assert (head.get("ObjectLockLegalHoldStatus") == "ON") == (status == "ON"), key
        if status == "ON":
            held.add(key.removeprefix(TOP))
    return held


async def test_every_object_is_locked_until_its_expiry_and_no_delete_gets_through(
    tmp_path: Path, worm: S3Site
) -> None:
    clock = Clock(now_ms())
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=clock.now).config
    ck = archiver_for(config, clock, worm, files_days=400, events_days=400, lake=True)
    await ck.run_pass()
    # One file is there already, unlocked (a ship cut short before object_lock
    # was set): its retention is set when it is found, like every other one's.
    early = sorted(newest_ms(config))[0]
    data = (config.parent / "archive" / early).read_bytes()
    worm.server.put_raw(worm.bucket, f"{TOP}{early}", data)
    # Uploads and read-backs meet faults: retried, and every object still locked.
    worm.proxy.fail(ResetRequest(after_bytes=500), method="PUT", path=r"/files/", times=1)
    worm.proxy.fail(INTERNAL_ERROR, method="HEAD", path=r"/files/", times=1)
    shipped = await ck.ship()
    assert not shipped.problems and shipped.uploaded > 1, shipped
    assert shipped.already == 1
    assert shipped.locked == shipped.uploaded + 1  # every file and month snapshot
    remote = (await ck.status()).remote
    assert remote is not None and remote.object_lock == "compliance"
    assert (remote.locked, remote.legal_held) == (shipped.locked, 0)

    # Each object's expiry as expire computes it, ten years on.
    clock.now += 3650 * DAY_MS
    plan = await ck.expire_plan()
    clock.now -= 3650 * DAY_MS
    expiry = {f"{TOP}{i.path}": i.past_since for i in plan.items if i.month is None}
    for i in plan.items:
        if i.month is not None:
            expiry.update({k: i.past_since for k in heads(worm) if f"/events/{i.month}." in k})
    # The site's claim holds no data and is never deleted: no lock asked.
    objects = {k: h for k, h in heads(worm).items() if "/site/" not in k}
    snapshot, statement = sorted(k for k in objects if "/manifest/" in k)
    assert statement == f"{snapshot}.sig"
    expiry[snapshot] = expiry[statement] = clock.now + 400 * DAY_MS
    assert set(expiry) == set(objects)
    # An independent reading for the files: their newest mtime plus files_days.
    for path, newest in newest_ms(config).items():
        assert expiry[f"{TOP}{path}"] == newest + 400 * DAY_MS
    for key, head in objects.items():
        assert head["ObjectLockMode"] == "COMPLIANCE", key
        assert until_ms(head) >= expiry[key], key
    # Each month's Parquet in the fleet's lake: locked as its month's snapshots.
    lake = lake_heads(worm)
    month_until = {i.month: i.past_since for i in plan.items if i.month is not None}
    assert len(lake) == shipped.lake == len(month_until) > 0
    for key, head in lake.items():
        month = key.split("/month=")[1][:7]
        assert head["ObjectLockMode"] == "COMPLIANCE", key
        assert until_ms(head) >= month_until[month], key
    objects.update(lake)

    client = worm.server.client
    for key, head in objects.items():
        with pytest.raises(ClientError) as refused:
            client.delete_object(Bucket=worm.bucket, Key=key, VersionId=head["VersionId"])
        assert refused.value.response["Error"]["Code"] == "AccessDenied", key

    # The host's clock says everything is past its retention; the bucket's does
    # not: nothing shipped is expired, anywhere (the local copies stay too), and
    # the expiry fails, saying by how much the clocks are apart.
    before = versions(worm)
    local = archive_files(config)
    clock.now += 800 * DAY_MS
    done = await ck.expire()
    assert done.failed and not done.problems and done.expired == []
    assert len(done.not_due) == len(plan.items)
    assert all("800 days ahead of the bucket's" in line for line in done.not_due)
    assert versions(worm) == before
    assert archive_files(config) == local


async def test_expire_deletes_exactly_what_the_bucket_lets_go(tmp_path: Path, worm: S3Site) -> None:
    """Files 200 days old, with files_days set so that half of them are past
    their retention when shipped (no lock asked: nothing to keep them for) and
    the rest locked: expire deletes the first half, every version; a clock
    ahead of the bucket's deletes nothing of the rest."""
    real = now_ms()
    clock = Clock(real - 200 * DAY_MS)
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=clock.now).config
    await archiver_for(config, clock, worm, 10_000, 10_000).run_pass()
    newest = newest_ms(config)
    middle = sorted(newest.values())[len(newest) // 2]
    files_ms = real - middle - 30 * MINUTE_MS
    assert all(abs(n + files_ms - real) > MINUTE_MS for n in newest.values())
    clock.now = real  # locks are decided by the bucket's clock: the ship's must agree
    ck = archiver_for(config, clock, worm, files_ms / DAY_MS, 10_000)
    shipped = await ck.ship()
    assert not shipped.problems
    due = {f"{TOP}{p}" for p, n in newest.items() if n + files_ms <= real}
    rest = {f"{TOP}{p}" for p in newest} - due
    assert due and rest

    clock.now = now_ms()
    # A listing of versions cut short, and a DELETE answered 500: read and asked again.
    cut = worm.proxy.fail(Truncate(keep_bytes=100), method="GET", query=r"versions", times=1)
    failed = worm.proxy.fail(INTERNAL_ERROR, method="DELETE", times=1)
    done = await ck.expire()
    assert (cut.hits, failed.hits) == (1, 1)
    assert {f"{TOP}{p}" for p in done.expired} == due
    assert (done.locked, done.problems) == ([], [])
    left = versions(worm)
    assert not due & set(left), "every version of what expired is gone"
    assert rest <= set(left)

    clock.now += 400 * DAY_MS  # ahead of the bucket's clock: nothing more goes
    later = await ck.expire()
    assert later.expired == [] and len(later.not_due) == len(rest) and not later.problems
    assert versions(worm) == left


async def test_holds_are_the_bucket_s_legal_holds_on_what_they_cover(
    tmp_path: Path, worm: S3Site
) -> None:
    clock = Clock(now_ms())
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=clock.now).config
    ck = archiver_for(config, clock, worm, files_days=400, events_days=400, lake=True)
    await ck.run_pass()
    with sqlite3.connect(config.parent / "archive" / "coldkeep.db") as db:
        units = dict(db.execute("SELECT gz_path, unit FROM entries GROUP BY gz_path"))
    unit = sorted(units.values())[0]
    covered = {p for p, u in units.items() if u == unit}
    early = (await ck.place_hold("unit", unit, "case 114")).hold

    worm.proxy.reset_counts()
    shipped = await ck.ship()
    assert not shipped.problems and shipped.holds_placed == 0
    assert not [x for x in worm.proxy.exchanges if "legal-hold" in x.query], "set at upload"
    assert legal_holds(worm) == covered
    # The fleet view says it from the snapshot that ship left (read once its
    # table is full: Fleet.counted).
    assert ck.settings.remote is not None
    fleet = Fleet(ck.settings.remote, tmp_path / "fleet-cache")
    try:
        await fleet.load()
        [site] = await fleet.counted()
    finally:
        await fleet.close()
    assert (site.locked, site.legal_held) == (shipped.locked, len(covered))

    months = {k.removeprefix(TOP) for k in heads(worm) if "/events/" in k}
    lake = lake_heads(worm)
    assert lake and not any(h.get("ObjectLockLegalHoldStatus") == "ON" for h in lake.values())
    tax = await ck.place_hold("unit", "events", "tax year")
    # The months' Parquet in the fleet's lake is held with them.
    assert (tax.placed, tax.problems) == (len(months) + len(lake), [])
    assert legal_holds(worm) == covered | months
    assert all(h["ObjectLockLegalHoldStatus"] == "ON" for h in lake_heads(worm).values())

    remote = (await ck.status()).remote
    assert remote is not None and remote.legal_held == len(covered | months)
    released = await ck.release_hold(early.id)
    assert (released.placed, released.lifted) == (0, len(covered))
    assert legal_holds(worm) == months
    # A held object is kept by the bucket whatever its retention.
    [key] = [k for k in heads(worm) if k.removeprefix(TOP) in months][:1]
    version = worm.server.client.head_object(Bucket=worm.bucket, Key=key)["VersionId"]
    with pytest.raises(ClientError):
        worm.server.client.delete_object(Bucket=worm.bucket, Key=key, VersionId=version)


async def test_a_bucket_that_cannot_be_told_keeps_the_hold_and_the_next_ship_tells_it(
    tmp_path: Path, worm: S3Site, no_retries: None
) -> None:
    clock = Clock(now_ms())
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=clock.now).config
    ck = archiver_for(config, clock, worm, files_days=400, events_days=400)
    await ck.run_pass()
    assert not (await ck.ship()).problems
    # "**" covers every file and every event month: all but the manifest snapshot
    # and the site's claim.
    data = {k.removeprefix(TOP) for k in heads(worm) if "/manifest/" not in k and "/site/" not in k}

    refused = worm.proxy.fail(INTERNAL_ERROR, method="PUT", query=r"legal-hold")
    change = await ck.place_hold("path", "**", "litigation")
    assert refused.hits and change.placed == 0 and len(change.problems) == refused.hits
    assert [h.id for h in await ck.holds()] == [change.hold.id], "the hold stands"
    assert legal_holds(worm) == set()

    worm.proxy.clear()
    clock.now += MINUTE_MS
    shipped = await ck.ship()
    assert shipped.holds_placed == len(data) and not shipped.problems
    assert legal_holds(worm) == data
    assert (await ck.ship()).holds_placed == 0, "told once"


def test_hold_says_what_the_bucket_was_not_told_and_exits_1(tmp_path: Path, worm: S3Site) -> None:
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=now_ms()).config
    site = config.parent
    set_remote(
        site,
        f'url = "s3://{WORM}/{PREFIX}"\nendpoint_url = "{worm.endpoint}"\nregion = "us-east-1"\n'
        f'site = "{SITE}"\nkeep_local_days = -1\nobject_lock = "compliance"\n'
        "\n[retention]\nfiles_days = 400\nevents_days = 400\n",
    )
    ck(site, "pass")
    ck(site, "ship")
    worm.proxy.fail(INTERNAL_ERROR, method="PUT", query=r"legal-hold")
    quick = {"AWS_MAX_ATTEMPTS": "1"}
    placed = ck(site, "hold", "add", "--unit", "events", "--reason", "tax", check=1, env=quick)
    assert placed.stdout.startswith("placed 1 ") and "PROBLEM: " in placed.stdout, placed.stdout
    assert "the next ship tells the bucket" in placed.stdout
    doc = ck_json(site, "hold", "list")["result"]
    assert [h["id"] for h in doc] == [1], "the hold stands"
    worm.proxy.clear()
    assert ck_json(site, "ship")["result"]["holds_placed"] > 0
    worm.proxy.fail(INTERNAL_ERROR, method="PUT", query=r"legal-hold")
    released = ck(site, "hold", "release", "1", check=1, env=quick)
    assert released.stdout.startswith("released 1 ") and "PROBLEM: " in released.stdout
    worm.proxy.clear()
    assert ck_json(site, "ship")["result"]["holds_lifted"] > 0
    assert legal_holds(worm) == set()


async def test_object_lock_on_a_bucket_without_it_stops_the_ship_in_one_line(
    tmp_path: Path, s3: S3Site
) -> None:
    clock = Clock(now_ms())
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=clock.now).config
    ck = archiver_for(config, clock, s3, files_days=400, events_days=400)
    await ck.run_pass()
    with pytest.raises(RemoteFatal, match="has no Object Lock") as stopped:
        await ck.ship()
    assert "\n" not in str(stopped.value) and 'object_lock = "off"' in str(stopped.value)
    with sqlite3.connect(config.parent / "archive" / "coldkeep.db") as db:
        assert db.execute("SELECT count(*) FROM remote_objects").fetchone() == (0,)


def grow_newest_month(config: Path) -> str:
    """More rows in the newest event month, as a pass adds them: its name."""
    newest = sorted((config.parent / "archive" / "events").glob("*.db"))[-1]
    with sqlite3.connect(newest) as db:
        db.execute(
            "INSERT INTO events (ts, kind, unit, payload) "
            "SELECT ts, kind, unit, payload FROM events ORDER BY id DESC LIMIT 20"
        )
    return newest.stem


async def test_a_superseded_month_snapshot_waits_for_its_lock_then_goes(
    tmp_path: Path, worm: S3Site
) -> None:
    """The third ship of a month that changed at each one lets its first
    snapshot go: the bucket's lock keeps it, so it is tracked, not asked to
    be deleted; once the lock has ended, the next ship deletes every version
    of it."""
    clock = Clock(now_ms())
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=clock.now).config
    ck = archiver_for(config, clock, worm, 10_000, 40)
    await ck.run_pass()
    first = await ck.ship()
    assert not first.problems
    month = grow_newest_month(config)
    [old] = [k for k in versions(worm) if k.startswith(f"{TOP}events/{month}.")]
    assert until_ms(heads(worm)[old]) > clock.now + DAY_MS, "the month's copy is locked"
    clock.now += 1000
    assert not (await ck.ship()).superseded, "two manifest snapshots name its two copies"
    grow_newest_month(config)
    clock.now += 1000
    shipped = await ck.ship()
    assert (shipped.superseded, shipped.loose_kept, shipped.problems) == (1, 1, [])
    assert old in versions(worm), "the lock keeps it"
    copies = [k for k in versions(worm) if k.startswith(f"{TOP}events/{month}.")]
    assert len(copies) == 3

    ahead = until_ms(heads(worm)[old]) - clock.now + MINUTE_MS
    worm.server.advance_clock(ahead / 1000)
    clock.now += ahead
    later = await ck.ship()
    assert (later.loose_deleted, later.loose_kept) == (1, 0), later
    assert old not in versions(worm), "every version of it is gone"
    assert len([k for k in versions(worm) if k.startswith(f"{TOP}events/{month}.")]) == 2
