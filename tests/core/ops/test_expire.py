"""Retention and legal holds: what ``expire`` deletes (to the day), what it never
deletes (anything held, a bundle with a young member), the tombstones it leaves,
the remote copies it removes, and the audit of all of it."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.configretention import RetentionSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.events.eventschema import EventsError, month_end_ms
from coldkeep.core.files.restore import Selection
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.store.legalholds import HoldError
from coldkeep.tui.operations.registry import headline

DAY_MS = 86_400_000


class Clock:
    """Real time until a test sets ``now`` (the demo's files are weeks old)."""

    def __init__(self) -> None:
        self.now: int | None = None

    def __call__(self) -> int:
        return self.now if self.now is not None else real_now()


def real_now() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return write_demo(tmp_path / "demo", seed=5, scale=0.02).config


def archiver_for(
    config: Path, clock: Clock, retention: RetentionSettings, remote: bool = False
) -> Archiver:
    settings = replace(load_settings(config), retention=retention)
    if remote:
        folder = (config.parent / "remote").as_uri()
        settings = replace(
            settings, remote=RemoteSettings(folder, site="web-1", keep_local_days=-1)
        )
    return Archiver(settings, stream=EventStream(), clock=clock, serve_events=False)


def rows(config: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with sqlite3.connect(config.parent / "archive" / "coldkeep.db") as db:
        return db.execute(sql, params).fetchall()


def singles(config: Path) -> list[tuple[str, int, str]]:
    """(gz_path, mtime in ms, sha256) of every gzip of its own."""
    found = rows(
        config,
        "SELECT gz_path, mtime_ns / 1000000, sha256 FROM entries "
        "WHERE member_offset IS NULL AND status = 'archived' ORDER BY mtime_ns",
    )
    return [(p, int(m), s) for p, m, s in found]


async def archived(
    config: Path, retention: RetentionSettings, remote: bool = False
) -> tuple[Archiver, Clock]:
    """The site after a pass, and the clock its archiver reads."""
    clock = Clock()
    ck = archiver_for(config, clock, retention, remote)
    await ck.run_pass()
    return ck, clock


async def test_a_file_expires_on_the_day_its_retention_ends_not_before(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(files_days=30))
    gz, mtime, sha = singles(site)[0]
    ends = mtime + 30 * DAY_MS
    clock.now = ends - 1
    assert gz not in [i.path for i in (await ck.expire_plan()).items]
    before = await ck.expire()
    assert gz not in before.expired and (site.parent / "archive" / gz).is_file()
    clock.now = ends
    plan = await ck.expire_plan()
    assert gz in [i.path for i in plan.items]
    report = await ck.expire()
    assert gz in report.expired and not report.problems
    assert not (site.parent / "archive" / gz).exists()
    # A tombstone: the entry kept, with its sha256 and when it went.
    [(status, expired_at, kept_sha)] = rows(
        site, "SELECT status, expired_at, sha256 FROM entries WHERE gz_path = ?", (gz,)
    )
    assert (status, expired_at, kept_sha) == ("expired", ends, sha)
    # Everything younger is still there and whole.
    for path, m, _ in singles(site):
        assert m + 30 * DAY_MS > ends
        assert (site.parent / "archive" / path).is_file()
    assert not (await ck.verify()).failed
    # Audited, one row per deletion.
    audited = rows(site, "SELECT args FROM audit WHERE action = 'expired'")
    assert len(audited) == len(before.expired) + len(report.expired)
    assert any(gz in a for (a,) in audited)


async def test_a_bundle_goes_only_when_every_member_is_past_its_retention(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(files_days=30))
    bundles = rows(
        site,
        "SELECT gz_path, min(mtime_ns) / 1000000, max(mtime_ns) / 1000000 FROM entries "
        "WHERE member_offset IS NOT NULL GROUP BY gz_path HAVING count(*) > 1 "
        "AND max(mtime_ns) - min(mtime_ns) > 86400000000000 LIMIT 1",
    )
    [(bundle, oldest, newest)] = bundles
    clock.now = oldest + 30 * DAY_MS
    await ck.expire()
    assert (site.parent / "archive" / bundle).is_file(), "one member is still young"
    assert rows(
        site, "SELECT count(*) FROM entries WHERE gz_path = ? AND status = 'expired'", (bundle,)
    ) == [(0,)]
    clock.now = newest + 30 * DAY_MS
    report = await ck.expire()
    assert bundle in report.expired and not (site.parent / "archive" / bundle).exists()
    statuses = rows(site, "SELECT DISTINCT status FROM entries WHERE gz_path = ?", (bundle,))
    assert statuses == [("expired",)]


async def test_nothing_a_hold_covers_is_expired_until_it_is_released(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(files_days=1))
    [(unit,)] = rows(site, "SELECT unit FROM entries GROUP BY unit ORDER BY count(*) DESC LIMIT 1")
    clock.now = real_now() + 400 * DAY_MS
    hold = (await ck.place_hold("unit", unit, "case 2026-114")).hold
    by_path = (await ck.place_hold("path", "bulk-0/**", "audit")).hold
    plan = await ck.expire_plan()
    held_paths = {i.path for i in plan.held}
    assert held_paths and all(i.held for i in plan.held)
    assert not {i.path for i in plan.items} & held_paths
    assert any("case 2026-114" in (i.held or "") for i in plan.held)
    report = await ck.expire()
    for path in held_paths:
        assert (site.parent / "archive" / path).is_file(), f"{path} is held"
    assert report.held == len(held_paths)
    # Released, the next expiry takes them.
    await ck.release_hold(hold.id)
    await ck.release_hold(by_path.id)
    with pytest.raises(HoldError, match="released already"):
        await ck.release_hold(hold.id)
    report = await ck.expire()
    assert set(report.expired) == held_paths
    actions = [a for (a,) in rows(site, "SELECT action FROM audit ORDER BY id")]
    assert actions.count("hold") == 2 and actions.count("hold-release") == 2


async def test_an_entry_hold_written_with_leading_zeros_holds_that_entry(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(files_days=1))
    [(entry_id, gz)] = rows(
        site, "SELECT id, gz_path FROM entries WHERE member_offset IS NULL LIMIT 1"
    )
    clock.now = real_now() + 400 * DAY_MS
    hold = (await ck.place_hold("entry", f"00{entry_id}", "case 2026-115")).hold
    assert hold.target == str(entry_id)
    assert gz in {i.path for i in (await ck.expire_plan()).held}


async def test_a_hold_with_an_end_date_ends_by_itself(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(files_days=1))
    now = real_now() + 400 * DAY_MS
    clock.now = now
    await ck.place_hold("path", "**", "until the audit closes", until=now + DAY_MS)
    assert (await ck.expire()).expired == []
    clock.now = now + DAY_MS
    assert (await ck.expire()).expired != []
    assert await ck.holds() == [] and len(await ck.holds(all_holds=True)) == 1


@pytest.mark.parametrize(
    ("scope", "target", "says"),
    [
        ("entry", "seven", "by its id"),
        ("entry", "\u0661", "by its id"),  # an Arabic-Indic 1: not an id
        ("entry", "999999", "no such entry"),
        ("path", "a/[bc", "--path"),
        ("unit", "u", "needs a reason"),
        ("unit", "nosuchunit", "no archived file is in this unit now.*--ahead"),
        ("path", "nomatch/**", "matches no archived file or event month now.*--ahead"),
    ],
)
async def test_a_bad_hold_is_refused_in_one_line(
    site: Path, scope: str, target: str, says: str
) -> None:
    ck, _ = await archived(site, RetentionSettings(files_days=1))
    reason = "" if says == "needs a reason" else "why"
    with pytest.raises(HoldError, match=says):
        await ck.place_hold(scope, target, reason)
    if "--ahead" in says:  # placed ahead, on purpose, it goes on
        assert (await ck.place_hold(scope, target, reason, ahead=True)).hold.target == target


async def test_an_event_month_expires_when_its_last_day_is_past_retention(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(events_days=10))
    months = sorted(p.stem for p in (site.parent / "archive" / "events").glob("*.db"))
    month = months[0]
    db = site.parent / "archive" / "events" / f"{month}.db"
    sha = hashlib.sha256(db.read_bytes()).hexdigest()
    ends = month_end_ms(month) + 10 * DAY_MS
    clock.now = ends - 1
    await ck.expire()
    assert db.is_file()
    clock.now = ends
    await ck.place_hold("unit", "events", "tax year")
    await ck.expire()
    assert db.is_file(), "held"
    [hold] = await ck.holds()
    await ck.release_hold(hold.id)
    report = await ck.expire()
    assert f"events/{month}.db" in report.expired and not db.exists()
    assert rows(
        site, "SELECT sha256, expired_at FROM expired_months WHERE month = ?", (month,)
    ) == [(sha, ends)]
    assert (site.parent / "archive" / "events" / f"{months[-1]}.db").is_file()
    with pytest.raises(EventsError, match=f"{month} expired on "):
        await ck.restore_events(months=[month])


async def test_expiry_deletes_the_remote_copies_too(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(files_days=1, events_days=1), remote=True)
    shipped = await ck.ship()
    assert shipped.uploaded > 0 and not shipped.problems
    remote = site.parent / "remote" / "web-1"
    clock.now = real_now() + 400 * DAY_MS
    report = await ck.expire()
    assert report.expired and not report.problems
    # The manifest snapshot, the site's claim and its heartbeats stay: none expires.
    kept = {"manifest", "site", "heartbeat"}
    left = [p for p in remote.rglob("*") if p.is_file() and not kept & set(p.parts)]
    assert left == [], left
    assert rows(site, "SELECT count(*) FROM remote_objects") == [(0,)]
    assert rows(site, "SELECT count(*) FROM expiring") == [(0,)]


async def test_a_held_copy_is_never_dropped_by_a_ship(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(), remote=True)
    assert ck.settings.remote is not None
    dropping = replace(ck.settings.remote, keep_local_days=0)
    ck = Archiver(
        replace(ck.settings, remote=dropping), stream=EventStream(), clock=clock, serve_events=False
    )
    await ck.place_hold("path", "**", "litigation")
    report = await ck.ship()
    assert report.dropped == 0 and report.held > 0
    # The ship says so, as its JSON does.
    assert f"{report.held} local copies kept by legal holds" in headline(report)
    plan = await ck.ship_plan()
    assert plan.drops == 0 and plan.held > 0


async def test_an_expired_file_is_not_restored_and_its_name_stays_taken(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(files_days=30))
    # A gzip at its first-choice name (files/<relpath>.gz), the one a new version wants.
    gz, mtime, relpath = next(
        (g, m, rel)
        for g, m, _ in singles(site)
        for (rel,) in rows(site, "SELECT relpath FROM entries WHERE gz_path = ?", (g,))
        if g == f"files/{rel}.gz"
    )
    clock.now = mtime + 30 * DAY_MS
    await ck.expire()
    out = site.parent / "out"
    restored = await ck.restore(Selection(glob=relpath), to=out)
    assert not (out / relpath).exists() and restored.counts.get("restored", 0) == 0
    # The same path written again and archived: a new name, the tombstone untouched.
    live = site.parent / "live" / relpath
    live.parent.mkdir(parents=True, exist_ok=True)
    live.write_bytes(b'{"again": 1}\n' * 100)
    os.utime(live, ns=(mtime * 1_000_000, mtime * 1_000_000))
    (live.parent / ".closed").write_text("closed\n")
    names_before = {n for (n,) in rows(site, "SELECT gz_path FROM entries")}
    await ck.run_pass()
    names = rows(
        site, "SELECT gz_path, status FROM entries WHERE relpath = ? ORDER BY id", (relpath,)
    )
    assert (gz, "expired") in names
    [new] = [n for n, _ in names if n not in names_before]
    assert new != gz


async def test_an_expiry_confirmed_for_some_paths_deletes_only_those(site: Path) -> None:
    ck, clock = await archived(site, RetentionSettings(files_days=30))
    first, second = singles(site)[:2]
    clock.now = max(first[1], second[1]) + 30 * DAY_MS
    report = await ck.expire(only=frozenset([first[0]]))
    assert report.expired == [first[0]]
    assert (site.parent / "archive" / second[0]).is_file(), "due, but not what was confirmed"
