"""``coldkeep expire --yes`` on a site with local and remote copies and a legal
hold, killed with SIGKILL at every announced expiry step, then run again. Right
after the kill: everything not expired is whole (locally or remotely) and
nothing temporary is left. After the expiry that resumes: nothing past its
retention and unheld is left anywhere, every tombstone's files are gone from
both tiers, and nothing held was touched."""

from __future__ import annotations

import shutil
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import ck, ck_json, entries, report_line
from remotecheck import check_remote_site, demo_after_pass, folder_fetch, remote_rows, set_remote
from sitecheck import Tally

pytestmark = pytest.mark.crash
SITE = "web-1"
HELD_UNIT = "unit-0001"
STEPS = [
    "expire_recorded",
    "expire_remote_deleted",
    "expire_local_deleted",
    "expire_recorded:3",
    "expire_local_deleted:4",
]
KILL = "COLDKEEP_TEST_KILL_AT"


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    t = Tally()
    yield t
    report_line(request.config, t.line("crash matrix (expire)", "SIGKILLs"))


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo site after a pass and a ship (local copies kept), with retention
    and a hold on one unit."""
    site = demo_after_pass(tmp_path_factory.mktemp("expire-template") / "site")
    set_remote(site, f'url = "file:remote"\nsite = "{SITE}"\nkeep_local_days = -1\n')
    ck(site, "ship")
    with (site / "coldkeep.toml").open("a") as f:
        f.write("\n[retention]\nfiles_days = 30\nevents_days = 60\n")
    ck(site, "hold", "add", "--unit", HELD_UNIT, "--reason", "case 114")
    plan = ck_json(site, "expire")["result"]
    assert plan["items"] and plan["held"], "the site has something to expire and something held"
    assert any(i["remote"] for i in plan["items"]) and any(
        i["kind"] == "month" for i in plan["items"]
    )
    return site


def check_kept(site: Path, tally: Tally, *, settled: bool) -> None:
    tally.checks += check_remote_site(site, folder_fetch(site / "remote"), SITE, settled=settled)
    held = [e for e in entries(site) if e["unit"] == HELD_UNIT]
    assert held and all(e["status"] != "expired" for e in held), "a held unit lost an entry"
    tally.checks += 1


def check_done(site: Path, tally: Tally) -> None:
    check_kept(site, tally, settled=True)
    assert ck_json(site, "expire")["result"]["items"] == [], "everything due went"
    remote = remote_rows(site)
    archive, bucket = site / "archive", site / "remote" / SITE
    for e in entries(site):
        if e["status"] == "expired":
            gz = e["gz_path"]
            assert not (archive / gz).exists() and not (bucket / gz).exists(), gz
            assert gz not in remote, f"{gz}: expired, still recorded remote"
    with sqlite3.connect(archive / "coldkeep.db") as db:
        assert db.execute("SELECT count(*) FROM expiring").fetchone() == (0,)
        months = [m for (m,) in db.execute("SELECT month FROM expired_months")]
    assert months
    for month in months:
        assert not (archive / "events" / f"{month}.db").exists()
        assert not list(bucket.glob(f"events/{month}.*")), month
    tally.checks += 4


@pytest.mark.parametrize("step", STEPS)
def test_expire_killed_at_each_step(shipped: Path, tmp_path: Path, tally: Tally, step: str) -> None:
    site = tmp_path / "site"
    shutil.copytree(shipped, site, symlinks=True)
    run = ck(site, "expire", "--yes", check=None, env={KILL: step})
    assert run.returncode == -signal.SIGKILL, f"not killed at {step}: {run.stderr}"
    tally.faults += 1
    tally.by_kind["expire@" + step.split(":", maxsplit=1)[0]] += 1
    check_kept(site, tally, settled=False)
    resumed = ck_json(site, "expire", "--yes")["result"]
    # Killed once the last step was done, there is nothing left to settle.
    settles = 0 if step.startswith("expire_local_deleted") else 1
    assert (resumed["settled"], resumed["problems"]) == (settles, [])
    check_done(site, tally)
