"""``coldkeep verify --remote`` never forgets the only copy of anything: a bad
event month snapshot whose database is gone from here is reported, its row kept
(it is all that is left here of the month), exit 1; one whose database is here
is shipped again from it, and only then its row replaced. Through the CLI, on a
``file://`` folder and on an S3 bucket with Object Lock (moto's server, which
enforces it)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from pyrage import x25519

from helpers import ck, ck_json
from remotecheck import (
    SITE,
    Tier,
    demo_after_pass,
    folder_tier,
    remote_rows,
    set_remote,
    shipped_tier,
)

RETENTION = "\n[retention]\nfiles_days = 400\nevents_days = 400\n"


@pytest.fixture(scope="module")
def passed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_after_pass(tmp_path_factory.mktemp("verify") / "demo")


@pytest.fixture(params=["folder", "worm"])
def tiered(request: pytest.FixtureRequest, passed: Path) -> tuple[Path, Tier]:
    """Shipped, every local copy kept."""
    return shipped_tier(request, passed, "keep_local_days = -1\n", RETENTION)


@pytest.fixture(params=["folder", "worm"])
def dropped(request: pytest.FixtureRequest, passed: Path) -> tuple[Path, Tier]:
    """Shipped, the archive files' local copies dropped once shipped."""
    return shipped_tier(request, passed, "keep_local_days = 0\n", RETENTION)


def month_snapshots(site: Path) -> dict[str, str]:
    """Each shipped event month's snapshot (one each after a single ship)."""
    rows = remote_rows(site)
    return {str(r["month"]): path for path, r in sorted(rows.items()) if r["month"]}


def test_a_bad_month_with_no_database_here_is_reported_and_its_row_kept(
    tiered: tuple[Path, Tier],
) -> None:
    site, tier = tiered
    month, path = sorted(month_snapshots(site).items())[0]
    (site / "archive" / "events" / f"{month}.db").unlink()
    tier.damage(path)

    run = ck(site, "verify", "--remote", check=1)
    assert "1 FAILED" in run.stdout and "shipped again" not in run.stdout, run.stdout
    [line] = [x for x in run.stdout.splitlines() if path in x]
    assert f"no database of {month} is here to ship it again from: its row is kept" in line
    assert f"no other snapshot of {month} is recorded" in line
    assert "not the" in remote_rows(site)[path]["verify_error"]
    # The month is still known: a query refuses to answer without it, and
    # restore-events does not say there are no archived events for it.
    query = ck(site, "query", "SELECT count(*) FROM events", check=1)
    assert month in query.stderr and "only in the remote tier" in query.stderr
    events = ck(site, "restore-events", "--month", month, check=None)
    assert events.returncode == 1 and "no archived events" not in events.stderr, events
    # Said again by the next verify, never forgotten.
    again = ck_json(site, "verify", "--remote", check=1)["result"]
    assert [path in x for x in again["failed"]] == [True] and again["reshipped"] == []
    assert ck_json(site, "status")["result"]["remote"]["verify_failed"] == 1


def test_a_bad_month_whose_database_is_here_is_shipped_again_from_it(
    tiered: tuple[Path, Tier],
) -> None:
    site, tier = tiered
    [path, *_] = sorted(month_snapshots(site).values())
    before = tier.get(path)
    tier.damage(path)
    run = ck(site, "verify", "--remote", check=None)
    if "object_lock" in tier.table:
        # The bucket keeps the version shipped (its lock): coldkeep deletes what
        # it may (the version put over it), replaces nothing, and says so.
        assert run.returncode == 1 and "kept by the bucket's lock" in run.stdout, run.stdout
        assert remote_rows(site)[path]["verify_error"]
    else:
        assert run.returncode == 0 and f"shipped again {path}" in run.stdout, run.stdout
    assert tier.get(path) == before, "the key holds the snapshot shipped"
    assert ck_json(site, "verify", "--remote")["result"]["failed"] == []
    assert remote_rows(site)[path]["verify_error"] is None


def test_a_packed_month_shipped_again_once_the_site_seals_goes_sealed(
    passed: Path, tmp_path: Path
) -> None:
    """Packed while the site did not seal; bad once it does: the same database
    goes back at its key sealed, as every month of a sealing site is."""
    site = tmp_path / "site"
    shutil.copytree(passed, site)
    tier = folder_tier(site, SITE, "keep_local_days = -1\n")
    set_remote(site, tier.table)
    ck(site, "ship")
    [path, *_] = sorted(month_snapshots(site).values())
    assert path.endswith(".db.gz") and remote_rows(site)[path]["seek_points"] is not None
    key = x25519.Identity.generate()
    set_remote(site, f'{tier.table}encrypt_to = ["{key.to_public()}"]\n')
    tier.damage(path)
    run = ck(site, "verify", "--remote")
    assert f"shipped again {path}" in run.stdout, run.stdout
    row = remote_rows(site)[path]
    assert row["sealed_to"] and row["seek_points"] is None and row["verify_error"] is None
    assert ck_json(site, "verify", "--remote")["result"]["failed"] == []


def test_a_bad_snapshot_of_a_month_grown_since_goes_once_the_month_is_shipped_anew(
    tiered: tuple[Path, Tier],
) -> None:
    site, tier = tiered
    month, path = sorted(month_snapshots(site).items())[0]
    with sqlite3.connect(site / "archive" / "events" / f"{month}.db") as db:
        db.execute("CREATE TEMP TABLE grown AS SELECT * FROM events ORDER BY id DESC LIMIT 1")
        db.execute("UPDATE grown SET id = id + 1000000")
        db.execute("INSERT INTO events SELECT * FROM grown")
    tier.damage(path)
    run = ck(site, "verify", "--remote", check=None)
    rows = remote_rows(site)
    [new] = [p for p, r in rows.items() if r["month"] == month and p != path]
    assert rows[new]["verify_error"] is None and tier.get(new) is not None
    if "object_lock" in tier.table:
        # Shipped anew; the bad copy stays, and so does its row, until the
        # bucket lets it go.
        assert run.returncode == 1, run.stdout
        [line] = [x for x in run.stdout.splitlines() if path in x]
        assert f"{new} holds " in line and "kept by the bucket's lock" in line, line
        assert rows[path]["verify_error"]
    else:
        assert run.returncode == 0, run.stdout
        said = f"shipped again {path} (its database is in {new}, shipped now; the bad copy deleted)"
        assert said in run.stdout, run.stdout
        assert path not in rows and tier.get(path) is None


def test_a_bad_file_with_no_local_copy_is_reported_and_its_row_kept(
    dropped: tuple[Path, Tier],
) -> None:
    site, tier = dropped
    rows = remote_rows(site)
    path = sorted(p for p, r in rows.items() if r["month"] is None and r["local_gone_at"])[0]
    tier.damage(path)
    run = ck(site, "verify", "--remote", check=1)
    [line] = [x for x in run.stdout.splitlines() if path in x]
    assert "its local copy is gone: this copy cannot be repaired from here" in line, line
    assert "not the" in remote_rows(site)[path]["verify_error"]
    again = ck_json(site, "verify", "--remote", check=1)["result"]
    assert [path in x for x in again["failed"]] == [True]
