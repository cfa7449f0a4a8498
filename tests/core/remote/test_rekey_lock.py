"""``coldkeep rekey`` keeps what the bucket promised. Every copy it seals again
carries the lock its predecessor had or should have (retained until its
expiry, the legal holds in force), event months included, as the HEAD of
every one says; the rows say what those HEADs said, and ``status`` counts what
the bucket holds. The old copies' legal holds are lifted, each old copy is
deleted or, while the bucket's lock keeps it, tracked (never forgotten) until
the first ship after its lock ends; ``hold release`` leaves no legal hold on
anything. Nothing past its retention is sealed again, and an identity that
opens nothing is one line. Through the CLI, on moto's server with Object Lock
(which enforces it) and on a ``file://`` folder, where no lock applies."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from sealkit import new_identity

from coldkeep.core.base.recipients import RecipientSet
from coldkeep.core.base.times import DAY_MS
from coldkeep.tui.text.fmt import plural

from bucketcheck import (
    bucket_now,
    check_promise,
    data_keys,
    db,
    deletes,
    expiry_of,
    head,
    loose,
    month_end_ms,
)
from helpers import ck, ck_json
from remotecheck import (
    PREFIX,
    SITE,
    Tier,
    bucket_tier,
    demo_after_pass,
    folder_tier,
    remote_rows,
    set_remote,
    shipped_tier,
)
from s3kit import S3Site

LONG = "\n[retention]\nfiles_days = 400\nevents_days = 400\n"


@pytest.fixture(scope="module")
def passed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_after_pass(tmp_path_factory.mktemp("rekey-lock") / "demo")


def sealed_to(tier: Tier, keys: str, public: str) -> str:
    """``tier``'s ``[remote]`` table with ``keys`` (as shipped_tier was given
    them) now sealing to ``public``."""
    assert keys in tier.table
    return tier.table.replace(keys, f'{keys}encrypt_to = ["{public}"]\n')


def held_paths(site: Path, unit: str) -> set[str]:
    """The rows' paths a hold on ``unit`` and one on every event month cover."""
    with db(site) as c:
        files = {p for (p,) in c.execute("SELECT gz_path FROM entries WHERE unit = ?", [unit])}
    return {p for p, r in remote_rows(site).items() if r["month"] is not None or p in files}


@pytest.fixture(params=["folder", "worm"])
def remote_only(request: pytest.FixtureRequest, passed: Path) -> tuple[Path, Tier]:
    """The site shipped unsealed, every local copy dropped, with a retention of
    400 days (on the bucket: every object locked that long)."""
    return shipped_tier(request, passed, "keep_local_days = 0\n", LONG)


def test_rekey_keeps_every_lock_and_hold_and_hold_release_lifts_them_all(
    remote_only: tuple[Path, Tier], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    site, tier = remote_only
    bucket: S3Site | None = request.getfixturevalue("worm") if "object_lock" in tier.table else None
    with db(site) as c:
        unit = c.execute("SELECT unit FROM entries ORDER BY unit LIMIT 1").fetchone()[0]
    ck(site, "hold", "add", "--unit", unit, "--reason", "case 114")
    ck(site, "hold", "add", "--unit", "events", "--reason", "tax year")
    held = held_paths(site, unit)
    assert len(held) < len(remote_rows(site))

    first, first_set = new_identity(tmp_path, "first.txt")
    set_remote(site, sealed_to(tier, "keep_local_days = 0\n", first_set.keys[0]))
    done = ck_json(site, "rekey", "--yes")["result"]
    assert len(done["resealed"]) == len(remote_rows(site)) and not done["problems"]
    assert any(r["month"] for r in remote_rows(site).values()), "event months too"
    assert all(r["sealed_to"] for r in remote_rows(site).values())
    assert len(done["old_kept"]) == (len(remote_rows(site)) if bucket else 0)
    check_promise(site, bucket, held)

    # Sealed again from the remote copies just made, opened with the first key:
    # the copies the first rekey made are the old ones now.
    _, second_set = new_identity(tmp_path, "second.txt")
    set_remote(site, sealed_to(tier, "keep_local_days = 0\n", second_set.keys[0]))
    again = ck_json(site, "rekey", "--yes", "--identity", str(first))["result"]
    assert len(again["resealed"]) == len(remote_rows(site)) and not again["problems"]
    check_promise(site, bucket, held)
    if bucket is not None:
        assert len(loose(site)) == 2 * len(remote_rows(site)), "both old copies tracked"

    for hold in ck_json(site, "hold", "list")["result"]:
        ck(site, "hold", "release", str(hold["id"]))
    check_promise(site, bucket, set())
    if bucket is not None:
        everything = data_keys(site, bucket)
        assert everything and not [k for k in everything if head(bucket, k)["held"]]


# How far ahead of now the one short lock ends: two rekeys and a ship must start
# before it (a few seconds each here); the test then moves the bucket's clock past it.
SHORT_LOCK_MS = 20_000


def test_a_second_rekey_tracks_what_the_lock_keeps_and_the_ship_after_it_ends_deletes_it(
    passed: Path, worm: S3Site, tmp_path: Path
) -> None:
    """Shipped before object_lock was set; then locked with events_days such
    that the newest closed month's lock ends in seconds (the older months are
    past their retention: left alone), files_days 400."""
    site = tmp_path / "site"
    shutil.copytree(passed, site)
    keys = "keep_local_days = -1\n"
    tier = bucket_tier(worm, PREFIX, SITE, keys)
    set_remote(site, tier.table)
    ck(site, "ship")
    months = sorted({r["month"] for r in remote_rows(site).values() if r["month"]})
    ends = {m: month_end_ms(m) for m in months}
    newest = max(m for m in months if ends[m] < time.time() * 1000)
    short = time.time() * 1000 + SHORT_LOCK_MS
    events_days = (short - ends[newest]) / DAY_MS
    retention = f"\n[retention]\nfiles_days = 400\nevents_days = {events_days}\n"
    first, first_set = new_identity(tmp_path, "first.txt")
    _, second_set = new_identity(tmp_path, "second.txt")

    def sealing_to(to: RecipientSet) -> str:
        locked = f'{keys}object_lock = "compliance"\nencrypt_to = ["{to.keys[0]}"]\n'
        return bucket_tier(worm, PREFIX, SITE, locked + retention).table

    set_remote(site, sealing_to(first_set))
    done = ck_json(site, "rekey", "--yes")["result"]
    expired = {line.split(": ")[0] for line in done["expired"]}
    assert expired == {p for p, r in remote_rows(site).items() if (r["month"] or newest) < newest}
    assert not done["problems"] and not done["old_kept"], "the unlocked old copies went"
    [month_copy] = [r["stored_as"] for r in remote_rows(site).values() if r["month"] == newest]

    set_remote(site, sealing_to(second_set))
    worm.proxy.reset_counts()
    again = ck_json(site, "rekey", "--yes", "--identity", str(first))["result"]
    assert not again["problems"] and set(again["old_kept"]) == set(loose(site))
    assert month_copy in data_keys(site, worm) and month_copy in loose(site)
    until = loose(site)[month_copy][0]
    assert until is not None and bucket_now(worm) < until, "the rekey outlasted the short lock"
    assert not set(deletes(worm)) & set(loose(site)), "nothing locked is asked to go"
    check_promise(site, worm, set(), (400, events_days))

    # Before its lock ends a ship leaves it, and asks nothing of it.
    early = ck_json(site, "ship")["result"]
    assert (early["loose_deleted"], early["loose_kept"]) == (0, len(loose(site)))
    assert not set(deletes(worm)) & set(loose(site))

    # The bucket's clock, not this host's, says when the lock has ended: moved
    # past it rather than waited for.
    worm.server.advance_clock((until - bucket_now(worm)) / 1000 + 1)
    assert bucket_now(worm) >= until, "the bucket's clock did not pass the lock"
    tracked = set(loose(site))
    later = ck_json(site, "ship")["result"]
    assert (later["loose_deleted"], later["loose_kept"]) == (1, len(tracked) - 1)
    assert month_copy not in data_keys(site, worm) and month_copy not in loose(site)
    assert set(loose(site)) == tracked - {month_copy}
    check_promise(site, worm, set(), (400, events_days))


@pytest.fixture(params=["folder", "worm"])
def shipped_locally(request: pytest.FixtureRequest, passed: Path) -> tuple[Path, Tier]:
    """The site shipped unsealed, its local copies kept, with a retention of
    400 days (on the bucket: every object locked that long)."""
    return shipped_tier(request, passed, "keep_local_days = -1\n", LONG)


def past_retention(site: Path, files_days: float, events_days: float) -> set[str]:
    """The rows' paths expired here (every entry of the file a tombstone, the
    month's tombstone) or past the retention by now."""
    with db(site) as c:
        gone_months = {m for (m,) in c.execute("SELECT month FROM expired_months")}
    expiry = expiry_of(site, files_days, events_days)
    now = time.time() * 1000
    return {
        p
        for p, r in remote_rows(site).items()
        if r["month"] in gone_months or p not in expiry or expiry[p] <= now
    }


def test_rekey_leaves_what_is_past_its_retention_for_expiry(
    shipped_locally: tuple[Path, Tier], request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Expired with files_days 20 and events_days 60 (on the bucket, whose lock
    keeps every copy, their rows stay and wait on it), then the retention
    shortened to 10 and 30 days: what expiry recorded and what is past the new
    retention are left as they are, and said; the rest is sealed again."""
    site, tier = shipped_locally
    bucket: S3Site | None = request.getfixturevalue("worm") if "object_lock" in tier.table else None
    set_remote(site, tier.table.replace(LONG, "\n[retention]\nfiles_days = 20\nevents_days = 60\n"))
    ck(site, "expire", "--yes")
    public = new_identity(tmp_path)[1].keys[0]
    short = "\n[retention]\nfiles_days = 10\nevents_days = 30\n"
    set_remote(site, sealed_to(tier, "keep_local_days = -1\n", public).replace(LONG, short))
    left = past_retention(site, 10, 30)
    before = remote_rows(site)
    assert left and len(left) < len(before)
    with db(site) as c:
        waiting = {p for (p,) in c.execute("SELECT path FROM expiring")}
    assert bool(waiting) == (bucket is not None), "the bucket's lock keeps what expired"

    said = ck(site, "rekey", "--yes").stdout
    assert f"{plural(len(before) - len(left), 'object')} sealed again" in said, said
    assert f"{plural(len(left), 'object')} past their retention left for expiry" in said, said
    after = remote_rows(site)
    assert {p for p, r in after.items() if r["sealed_to"] is None} == left
    # Which manifest snapshot names a month's newest copy is the ship's to mark.
    assert all(after[p] | {"newest_in": 0} == before[p] | {"newest_in": 0} for p in left), (
        "their rows untouched"
    )
    assert not [k for k in data_keys(site, bucket) for p in left if k.startswith(f"{p}.")]
    again = ck_json(site, "rekey", "--yes")["result"]
    assert (again["resealed"], len(again["expired"]), again["problems"]) == ([], len(left), [])
    assert {line.split(": ")[0] for line in again["expired"]} == left


def test_a_wrong_identity_is_one_line_not_one_per_object(passed: Path, tmp_path: Path) -> None:
    """Shipped sealed to a first key, every local copy dropped: sealed again to
    a second, every object only the remote holds needs the first."""
    site = tmp_path / "site"
    shutil.copytree(passed, site)
    first = new_identity(tmp_path, "first.txt")[1].keys[0]
    second = new_identity(tmp_path, "second.txt")[1].keys[0]
    wrong, _ = new_identity(tmp_path, "wrong.txt")
    keys = "keep_local_days = 0\n"
    set_remote(site, folder_tier(site, SITE, f'{keys}encrypt_to = ["{first}"]\n').table)
    ck(site, "ship")
    rows = remote_rows(site)
    assert all(r["local_gone_at"] is not None or r["month"] for r in rows.values())
    [sealed_set] = {r["sealed_to"] for r in rows.values()}
    set_remote(site, folder_tier(site, SITE, f'{keys}encrypt_to = ["{second}"]\n').table)

    refused = ck(site, "rekey", "--yes", "--identity", str(wrong), check=1).stdout
    [line] = [x for x in refused.splitlines() if x.startswith("PROBLEM: ")]
    assert f"{len(rows)} objects only the remote holds, sealed to {sealed_set}" in line, line
    assert str(wrong) in line and "give --identity a file with one of that set's keys" in line
    assert refused.splitlines()[0] == "0 objects sealed again", refused
    assert remote_rows(site) == rows and not loose(site), "nothing sealed, nothing left"

    bare = ck(site, "rekey", "--yes", check=1).stdout.splitlines()
    assert bare == [
        "0 objects sealed again",
        f"{len(rows)} objects only the remote holds, sealed to {sealed_set}, not done: "
        "give --identity FILE with one of the keys they are sealed to now",
    ], bare
