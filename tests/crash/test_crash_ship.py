"""``coldkeep ship`` to a ``file://`` remote, killed with SIGKILL at every announced
ship step and at random moments, then run again. Right after the kill and after
the ship that resumes: every entry's bytes are readable whole from a local copy
or a recorded remote copy, every recorded remote copy is there with its recorded
sha256, no local copy is gone without one, and nothing temporary is left; after
the ship that resumes, nothing is pending (archive files nor event rows)."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import RandomKills, ck, ck_json, report_line
from remotecheck import check_remote_site, demo_after_pass, folder_fetch, remote_rows, set_remote
from sitecheck import Tally

pytestmark = pytest.mark.crash
SITE = "web-1"
STEPS = [
    "object_uploaded",
    "object_recorded",
    "object_uploaded:5",
    "snapshot_uploaded",
    "manifest_shipped",
    "local_drop_recorded",
    "local_dropped",
    "local_drop_recorded:4",
]
KILL = "COLDKEEP_TEST_KILL_AT"
RANDOM_KILLS = 6


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    t = Tally()
    yield t
    report_line(request.config, t.line("crash matrix (ship)", "SIGKILLs"))


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo site after a pass, shipping to remote/ and dropping at once."""
    site = demo_after_pass(tmp_path_factory.mktemp("ship-template") / "site")
    set_remote(site, f'url = "file:remote"\nsite = "{SITE}"\nkeep_local_days = 0\n')
    return site


def copy(archived: Path, where: Path) -> Path:
    site = where / "site"
    shutil.copytree(archived, site, symlinks=True)
    return site


def check(site: Path, tally: Tally, *, settled: bool = True) -> None:
    fetch = folder_fetch(site / "remote")
    tally.checks += check_remote_site(site, fetch, SITE, settled=settled)


def settled(site: Path, tally: Tally) -> None:
    """The ship run again finishes the job: everything remote (every archived event
    row too, the month passes still add to included), no local copy."""
    ck(site, "ship")
    check(site, tally)
    remote = ck_json(site, "status")["result"]["remote"]
    assert (remote["pending_files"], remote["pending_event_rows"]) == (0, 0), remote
    rows = remote_rows(site)
    assert rows and all(r["local_present"] == 0 for r in rows.values() if r["month"] is None)
    assert not [p for p in (site / "archive" / "files").rglob("*") if p.is_file()]
    # Every snapshot left is the site's own, signed: none a kill left unsigned.
    listed = ck_json(site, "rebuild-manifest", "--from-remote", "--list")["result"]
    assert listed["snapshots"] and {s["verdict"] for s in listed["snapshots"]} == {"own"}


def killed_then_settled(site: Path, tally: Tally, step: str) -> None:
    """A ship SIGKILLed at ``step``; nothing lost even before anything settles
    it, then the ship run again finishes the job."""
    run = ck(site, "ship", check=None, env={KILL: step})
    assert run.returncode == -signal.SIGKILL, f"not killed at {step}: {run.stderr}"
    tally.faults += 1
    tally.by_kind["ship@" + step.split(":", maxsplit=1)[0]] += 1
    check(site, tally, settled=False)
    settled(site, tally)


@pytest.mark.parametrize("step", STEPS)
def test_ship_killed_at_each_step(archived: Path, tmp_path: Path, tally: Tally, step: str) -> None:
    killed_then_settled(copy(archived, tmp_path), tally, step)


def grown(site: Path) -> None:
    """The newest event month holds more rows, as after a pass adds to it."""
    newest = sorted((site / "archive" / "events").glob("*.db"))[-1]
    with sqlite3.connect(newest) as db:
        db.execute(
            "INSERT INTO events (ts, kind, unit, payload) "
            "SELECT ts, kind, unit, payload FROM events ORDER BY id DESC LIMIT 20"
        )


@pytest.mark.parametrize("step", ["months_superseded", "loose_deleted"])
def test_ship_killed_letting_a_superseded_month_go(
    archived: Path, tmp_path: Path, tally: Tally, step: str
) -> None:
    """The third ship of a month that changed at each one lets its first
    snapshot go (two manifest snapshots name newer ones); killed at it, the
    next ship finishes: the bucket holds two snapshots of the month."""
    site = copy(archived, tmp_path)
    for _ in range(2):
        ck(site, "ship")
        grown(site)
    killed_then_settled(site, tally, step)
    month = sorted((site / "archive" / "events").glob("*.db"))[-1].stem
    assert len(list((site / "remote" / SITE / "events").glob(f"{month}.*.db.gz"))) == 2


def test_ship_killed_at_random_moments(archived: Path, tmp_path: Path, tally: Tally) -> None:
    probe = copy(archived, tmp_path / "probe")
    t0 = time.monotonic()
    ck(probe, "ship")
    kills = RandomKills(20261201, time.monotonic() - t0)
    killed = 0
    for i in range(RANDOM_KILLS):
        # A ship that ends before its moment is measured again (RandomKills), and
        # a moment drawn again on a fresh copy, up to 3 times.
        for attempt in range(3):
            site = copy(archived, tmp_path / f"run-{i}-{attempt}")
            was_killed = kills.run(["ship", "--config", str(site / "coldkeep.toml")])
            if was_killed:
                killed += 1
                tally.faults += 1
                tally.by_kind["ship@random"] += 1
            check(site, tally, settled=False)
            settled(site, tally)
            shutil.rmtree(site)
            if was_killed:
                break
    assert killed >= RANDOM_KILLS // 2, f"only {killed} of {RANDOM_KILLS} runs were killed mid-ship"


def lake_months(site: Path) -> dict[str, list[str]]:
    """The lake's Parquet files under the site, by month folder."""
    found: dict[str, list[str]] = {}
    for p in sorted((site / "remote" / "lake" / "events" / f"site={SITE}").rglob("*.parquet")):
        found.setdefault(p.parent.name, []).append(p.name)
    return found


def one_file_a_month(site: Path) -> dict[str, list[str]]:
    """The lake's files, asserted one for each month here."""
    files = lake_months(site)
    local = sorted(p.stem for p in (site / "archive" / "events").glob("*.db"))
    assert sorted(files) == [f"month={m}" for m in local]
    assert all(len(names) == 1 for names in files.values()), files
    return files


@pytest.mark.parametrize("step", ["lake_uploaded", "lake_recorded", "lake_deleted"])
def test_ship_killed_writing_the_lake(
    archived: Path, tmp_path: Path, tally: Tally, step: str
) -> None:
    """Killed as it puts a month into the fleet's lake (the month grown since the
    last ship, so that its old file is deleted too): the next ship leaves one
    file a month, each recorded, the newest of its month."""
    site = copy(archived, tmp_path)
    with (site / "coldkeep.toml").open("a") as config:
        config.write("\n[lake]\nenabled = true\n")
    ck(site, "ship")
    grown(site)
    killed_then_settled(site, tally, step)
    files = one_file_a_month(site)
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        recorded = {k.rsplit("/", 1)[-1] for (k,) in db.execute("SELECT key FROM lake_objects")}
    assert recorded == {n for names in files.values() for n in names}


@pytest.mark.parametrize("step", ["lake_uploaded", "lake_recorded"])
def test_lake_export_killed_then_run_again(
    archived: Path, tmp_path: Path, tally: Tally, step: str
) -> None:
    """Months shipped before the lake was on, written by ``lake export``: killed
    as it puts one, the export run again writes each month once."""
    site = copy(archived, tmp_path)
    ck(site, "ship")
    with (site / "coldkeep.toml").open("a") as config:
        config.write("\n[lake]\nenabled = true\n")
    run = ck(site, "lake", "export", "--yes", check=None, env={KILL: step})
    assert run.returncode == -signal.SIGKILL, f"not killed at {step}: {run.stderr}"
    tally.faults += 1
    tally.by_kind["lake export@" + step] += 1
    check(site, tally, settled=False)
    ck(site, "lake", "export", "--yes")
    one_file_a_month(site)
    assert "nothing to do" in ck(site, "lake", "export").stdout
