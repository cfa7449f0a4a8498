"""What the bucket still holds once ``expire`` has run: the plan and its confirm
say which remote copies the bucket's lock keeps, and until when; ``cat`` and
``restore`` of an expired file say its remote copy is still kept, with the
date, and ``cat --expired`` reads it; ``restore-events`` never fetches an
expired month back; ``status`` and the metrics count what the lock keeps from
the rows the HEADs confirmed. Through the CLI, on a bucket with Object Lock
(moto's server, which enforces it) and on a ``file://`` folder, where expiry
deletes every copy."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from coldkeep.core.base.times import now_ms

from helpers import COLDKEEP, ck, ck_json, entries
from remotecheck import PREFIX, SITE, Tier, demo_after_pass, remote_rows, set_remote, shipped_tier
from s3kit import S3Site


def retention(files_days: int, events_days: int) -> str:
    return f"\n[retention]\nfiles_days = {files_days}\nevents_days = {events_days}\n"


@pytest.fixture(scope="module")
def passed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_after_pass(tmp_path_factory.mktemp("expire") / "demo")


@pytest.fixture(params=["folder", "worm"])
def expired(request: pytest.FixtureRequest, passed: Path) -> tuple[Path, Tier, str]:
    """Shipped with a retention of 400 days (every object locked that long on
    the bucket), then the retention shortened to weeks and ``expire --yes``
    run: what its plan said, as text."""
    keys = "keep_local_days = -1\n"
    site, tier = shipped_tier(request, passed, keys, retention(400, 400))
    set_remote(site, tier.table.replace(retention(400, 400), retention(20, 60)))
    plan = ck(site, "expire").stdout
    ck(site, "expire", "--yes")
    return site, tier, plan


def locked(tier: Tier) -> bool:
    return "object_lock" in tier.table


def bucket_heads(s3: S3Site) -> dict[str, dict[str, Any]]:
    """Every object of the site as its HEAD says it, by its key under the site."""
    top = f"{PREFIX}/{SITE}/"
    client = s3.server.client
    return {
        key.removeprefix(top): client.head_object(Bucket=s3.bucket, Key=key)
        for key in s3.server.list_keys(s3.bucket, top)
    }


def test_the_plan_says_which_remote_copies_the_lock_keeps(
    expired: tuple[Path, Tier, str],
) -> None:
    site, tier, plan = expired
    summary = plan.splitlines()[0]
    if locked(tier):
        assert "every copy, local and remote" not in summary, summary
        assert "every local copy; the bucket's lock keeps the remote copies of all " in summary
        assert "read then only by cat --expired" in summary
        assert "remote locked until " in plan.splitlines()[1]
    else:
        assert "every copy, local and remote" in summary, summary
        assert "locked" not in plan
    # Since done: the next plan has nothing left to delete.
    assert ck_json(site, "expire")["result"]["items"] == []


def test_an_expired_file_says_what_the_bucket_keeps_and_cat_expired_reads_it(
    expired: tuple[Path, Tier, str], tmp_path: Path
) -> None:
    site, tier, _ = expired
    gone = [e for e in entries(site) if e["status"] == "expired" and e["member_offset"] is None]
    e = gone[0]
    versioned = f"{e['relpath']}@{e['id']}"
    run = ck(site, "cat", versioned, check=1)
    said = run.stderr
    assert run.stdout == "" and f"entry {e['id']}): expired on " in said, said
    restored = ck(site, "restore", str(e["id"]), "--to", str(tmp_path / "out"), check=1)
    read = subprocess.run(
        [*COLDKEEP, "cat", "--expired", versioned, "--config", str(site / "coldkeep.toml")],
        capture_output=True,
        check=False,
    )
    if not locked(tier):
        assert "no copy is left anywhere" in said, said
        assert "no copy is left anywhere" in restored.stdout, restored.stdout
        assert read.returncode == 1 and read.stdout == b""
        return
    until = datetime.fromtimestamp(remote_rows(site)[e["gz_path"]]["retain_until"] / 1000, UTC)
    keeps = f"the bucket's lock keeps its remote copy until {until:%Y-%m-%d}"
    assert keeps in said and f"coldkeep cat --expired reads entry {e['id']}" in said, said
    assert keeps in restored.stdout, restored.stdout
    assert not (tmp_path / "out" / e["relpath"]).exists()
    assert read.returncode == 0, read.stderr
    assert hashlib.sha256(read.stdout).hexdigest() == e["sha256"]
    note = read.stderr.decode()
    assert "expired on " in note and f"still keeps (its lock ends {until:%Y-%m-%d})" in note


def test_restore_events_never_fetches_an_expired_month_back(
    expired: tuple[Path, Tier, str],
) -> None:
    site, tier, _ = expired
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        months = [m for (m,) in db.execute("SELECT month FROM expired_months ORDER BY month")]
    assert months
    run = ck(site, "restore-events", "--month", months[0], check=1)
    assert f"{months[0]} expired on " in run.stderr, run.stderr
    assert ("the bucket's lock keeps its snapshots until " in run.stderr) == locked(tier)
    ck(site, "restore-events", "--kind", "webhook_event", check=None)
    here = {p.stem for p in (site / "archive" / "events").glob("*.db")}
    assert not here & set(months), "an expired month came back"


def test_status_and_metrics_count_what_the_lock_keeps_from_the_confirmed_rows(
    expired: tuple[Path, Tier, str], request: pytest.FixtureRequest
) -> None:
    site, tier, _ = expired
    remote = ck_json(site, "status")["result"]["remote"]
    metrics = ck(site, "metrics").stdout
    gauges = {
        line.split()[0]: float(line.split()[1])
        for line in metrics.splitlines()
        if line.startswith("coldkeep_remote_locked") or line.startswith("coldkeep_remote_legal")
    }
    assert gauges["coldkeep_remote_locked_objects"] == remote["locked_objects"]
    assert gauges["coldkeep_remote_locked_expired_objects"] == remote["locked_expired_objects"]
    if not locked(tier):
        assert (remote["locked_objects"], remote["locked_expired_objects"]) == (0, 0)
        return
    heads = bucket_heads(request.getfixturevalue("worm"))
    now = now_ms()
    kept = {
        key
        for key, head in heads.items()
        # Manifest snapshots have no rows; the site's claim and heartbeats no lock.
        if not key.startswith(("manifest/", "site/", "heartbeat/"))
        and head["ObjectLockRetainUntilDate"].timestamp() * 1000 > now
    }
    rows = remote_rows(site)
    assert {r["stored_as"] or p for p, r in rows.items()} == kept
    assert remote["locked_objects"] == len(kept)
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        waiting = {p for (p,) in db.execute("SELECT path FROM expiring")}
    expired_rows = [
        p for p, r in rows.items() if p in waiting or f"events/{r['month']}.db" in waiting
    ]
    assert remote["locked_expired_objects"] == len(expired_rows) > 0
    text = ck(site, "status").stdout
    [line] = [x for x in text.splitlines() if x.lstrip().startswith("locked ")]
    assert f"{len(expired_rows)} of them expired here" in line, line
    assert "manifest snapshots not counted" in line
