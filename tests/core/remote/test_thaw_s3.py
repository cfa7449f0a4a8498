"""Cold storage classes on a real S3 server (moto) behind the proxy's thaw model:
archive files shipped to DEEP_ARCHIVE with every local copy dropped, what is read
without asking left in STANDARD, a restore that says to thaw, ``thaw`` asking
once per object (a bundle once), and the restore once the thaw is done."""

from __future__ import annotations

import asyncio
import errno
import shutil
import signal
import sqlite3
from dataclasses import asdict
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.files.catalog import parse_query
from coldkeep.core.files.restore import Selection
from coldkeep.core.ops import restore as restoring
from coldkeep.core.ops.fleet import Fleet
from coldkeep.core.remote.thaw import ThawPlan
from coldkeep.core.store import thaws
from coldkeep.core.store.manifest import Manifest

from helpers import ck, ck_json, entries, eventually, mounting, sha, start
from remotecheck import demo_after_pass, set_remote
from s3kit import S3Site
from s3kit.proxy import Respond
from s3kit.thaw import DAY_S, HOUR_S, Thaw, s3_error

KILL = "COLDKEEP_TEST_KILL_AT"
SITE = "web-1"
PREFIX = "cold"


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_after_pass(tmp_path_factory.mktemp("cold-template") / "site")


def shipped_cold(archived: Path, tmp_path: Path, s3: S3Site, cls: str = "DEEP_ARCHIVE") -> Path:
    """The demo after a pass, shipped to ``cls`` with every local copy dropped."""
    site = tmp_path / "site"
    shutil.copytree(archived, site, symlinks=True)
    set_remote(
        site,
        f'url = "s3://{s3.bucket}/{PREFIX}"\nendpoint_url = "{s3.endpoint}"\n'
        f'region = "us-east-1"\nsite = "{SITE}"\nkeep_local_days = 0\n'
        f'storage_class = "{cls}"\n',
    )
    doc = ck_json(site, "ship")
    assert doc["ok"] and doc["result"]["problems"] == [], doc
    return site


def classes(s3: S3Site) -> dict[str, str]:
    """Each key under the site's prefix and its storage class (as a HEAD says)."""
    client = s3.server.client
    return {
        key: client.head_object(Bucket=s3.bucket, Key=key).get("StorageClass", "STANDARD")
        for key in s3.server.list_keys(s3.bucket, f"{PREFIX}/")
    }


def remote_only(site: Path, unit: str) -> list[dict[str, object]]:
    return [e for e in entries(site) if e["unit"] == unit and e["status"] == "archived"]


def test_cold_data_ships_and_what_is_read_without_asking_stays_warm(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    shipped_cold(archived, tmp_path, s3)
    got = classes(s3)
    files = {k: c for k, c in got.items() if k.startswith(f"{PREFIX}/{SITE}/files/")}
    others = {k: c for k, c in got.items() if k not in files}
    assert files and set(files.values()) == {"DEEP_ARCHIVE"}
    assert any("/manifest/" in k for k in others) and any("/events/" in k for k in others)
    assert set(others.values()) == {"STANDARD"}, others


def test_status_says_what_each_class_holds_as_shipped_after_the_class_changes(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    site = shipped_cold(archived, tmp_path, s3, cls="GLACIER_IR")
    config = site / "coldkeep.toml"
    config.write_text(config.read_text().replace('"GLACIER_IR"', '"DEEP_ARCHIVE"'))
    got = classes(s3)
    recorded = {
        f"{PREFIX}/{SITE}/{path}": cls
        for path, cls in sqlite3.connect(site / "archive" / "coldkeep.db").execute(
            "SELECT path, storage_class FROM remote_objects"
        )
    }
    assert recorded and all(got[k] == c for k, c in recorded.items()), (recorded, got)

    remote = ck_json(site, "status")["result"]["remote"]
    by_class = {c["storage_class"]: c for c in remote["classes"]}
    # An instant class holds the event months too; the config's new class nothing yet.
    assert list(by_class) == ["GLACIER_IR"], "as shipped, not as the config says now"
    assert by_class["GLACIER_IR"]["objects"] == len(recorded)
    assert by_class["GLACIER_IR"]["bytes"] == remote["shipped_bytes"] > 0
    assert remote["cold"]["storage_class"] == "DEEP_ARCHIVE" and remote["cold"]["objects"] == 0
    said = ck(site, "status").stdout
    assert "by class    GLACIER_IR " in said and "a month (estimates)" in said, said


def test_a_restore_of_a_cold_file_says_to_thaw_and_thaw_asks_once_per_object(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    s3.proxy.thaw = thaw = Thaw(s3.server.now)
    site = shipped_cold(archived, tmp_path, s3)
    # A unit some of whose files are bundled: a bundle is asked for once.
    unit = next(
        u
        for u in sorted({str(e["unit"]) for e in entries(site)})
        if len({e["gz_path"] for e in remote_only(site, u)}) < len(remote_only(site, u))
    )
    wanted = remote_only(site, unit)
    objects = {str(e["gz_path"]) for e in wanted}

    out = ck(site, "restore", "--unit", unit, "--to", str(tmp_path / "back"), check=1)
    assert "DEEP_ARCHIVE" in out.stdout and "coldkeep thaw" in out.stdout, out.stdout
    assert "credentials" not in out.stdout + out.stderr

    s3.proxy.reset_counts()
    plan = ck(site, "thaw", "--unit", unit)
    assert f"{len(objects)} objects to thaw" in plan.stdout, plan.stdout
    assert "DEEP_ARCHIVE usually up to 12 hours" in plan.stdout and "--yes" in plan.stdout
    assert s3.proxy.counts.get("POST", 0) == 0, "the plan asks for nothing"

    doc = ck_json(site, "thaw", "--unit", unit, "--yes")
    assert sorted(doc["result"]["asked"]) == sorted(objects)
    assert s3.proxy.counts.get("POST", 0) == len(objects), "one request per object"
    again = ck_json(site, "thaw", "--unit", unit, "--yes")["result"]
    assert again["asked"] == [] and again["to_ask"] == 0
    assert {o["state"] for o in again["objects"]} == {"thawing"}
    assert s3.proxy.counts.get("POST", 0) == len(objects), "never twice for one thawing"
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        rows = db.execute("SELECT key, state, tier FROM thaws").fetchall()
    assert sorted(rows) == sorted((o, "asked", "standard") for o in objects)

    out = ck(site, "restore", "--unit", unit, "--to", str(tmp_path / "back"), check=1)
    assert "not done yet" in out.stdout, out.stdout
    cold = ck_json(site, "status")["result"]["remote"]["cold"]
    assert cold["storage_class"] == "DEEP_ARCHIVE" and cold["thaws_asked"] == len(objects)
    assert cold["objects"] > 0 and 0 < cold["usd_a_month"] < 0.01
    said = ck(site, "status").stdout
    assert "in DEEP_ARCHIVE, ~under 0.01 USD a month" in said
    assert f"{len(objects)} thaws asked (the oldest " in said, said
    assert "ago; usually up to 12 hours), 0 restores waiting" in said, said

    s3.server.advance_clock(12 * HOUR_S + 60)
    refused = thaw.refused
    ck(site, "restore", "--unit", unit, "--to", str(tmp_path / "back"))
    assert thaw.refused == refused, "no GET of a cold object once it is thawed"
    for e in wanted:
        back = tmp_path / "back" / str(e["relpath"])
        assert sha(back.read_bytes()) == e["sha256"]


def test_cat_and_the_mount_say_what_thawing_a_cold_file_takes_and_read_it_after(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    s3.proxy.thaw = thaw = Thaw(s3.server.now)
    site = shipped_cold(archived, tmp_path, s3)
    e = remote_only(site, sorted({str(e["unit"]) for e in entries(site)})[-1])[0]
    rel, entry_id = str(e["relpath"]), int(str(e["id"]))

    said = ck(site, "cat", rel, check=1).stderr
    assert f"{rel} (entry {entry_id}), in s3://" in said and "in DEEP_ARCHIVE storage" in said
    assert f"ask for it with coldkeep thaw {entry_id} --yes" in said, said
    assert "a standard thaw usually takes up to 12 hours and costs under 0.01 USD" in said
    assert "InvalidObjectState" not in said and len(said.strip().splitlines()) == 1
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        with pytest.raises(OSError) as refused:
            (mnt / rel).read_bytes()
        assert refused.value.errno == errno.EIO
    log = (tmp_path / "mnt.log").read_text()
    assert f"entry {entry_id}, in s3://" in log and f"coldkeep thaw {entry_id} --yes" in log, log

    ck(site, "thaw", str(entry_id), "--yes")
    assert "its thaw asked and not done yet" in ck(site, "cat", rel, check=1).stderr
    s3.server.advance_clock(12 * HOUR_S + 60)
    refused_before = thaw.refused
    assert sha(ck(site, "cat", rel).stdout.encode()) == e["sha256"]
    with mounting(site, mnt):
        assert sha((mnt / rel).read_bytes()) == e["sha256"]
    assert thaw.refused == refused_before, "no GET of a cold object once it is thawed"


def test_a_remote_verify_checks_a_cold_object_by_what_s3_says_and_says_so(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    site = shipped_cold(archived, tmp_path, s3, "GLACIER")
    doc = ck_json(site, "verify", "--remote")
    result = doc["result"]
    assert doc["ok"] and result["failed"] == []
    assert result["cold"] > 0 and result["cold"] + result["ok"] == result["checked"]
    out = ck(site, "verify", "--remote")
    assert "cold objects not thawed" in out.stdout, out.stdout


def test_deep_archive_has_no_expedited_thaw(archived: Path, tmp_path: Path, s3: S3Site) -> None:
    site = shipped_cold(archived, tmp_path, s3)
    s3.proxy.reset_counts()
    out = ck(site, "thaw", "--path", "**", "--tier", "expedited", "--yes", check=2)
    assert "DEEP_ARCHIVE offers no expedited thaw" in out.stderr, out.stderr
    assert s3.proxy.counts.get("POST", 0) == 0


def test_a_request_s3_refuses_is_recorded_said_and_asked_again_next_time(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    s3.proxy.thaw = Thaw(s3.server.now)
    site = shipped_cold(archived, tmp_path, s3)
    refusal = s3_error("MalformedXML", "not today")
    s3.proxy.fail(Respond(400, refusal), method="POST", query="restore", times=1)
    doc = ck_json(site, "thaw", "--path", "**", "--yes", check=1)
    result = doc["result"]
    assert not doc["ok"] and len(result["failed"]) == 1 and "MalformedXML" in result["failed"][0]
    assert len(result["asked"]) == result["to_ask"] - 1
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        states = dict(db.execute("SELECT state, count(*) FROM thaws GROUP BY state").fetchall())
    assert states == {"asked": result["to_ask"] - 1, "failed": 1}
    again = ck_json(site, "thaw", "--path", "**", "--yes")["result"]
    assert len(again["asked"]) == 1 and again["failed"] == []


@pytest.mark.parametrize("step", ["thaw_recorded", "thaw_recorded:2", "thaw_asked:2"])
def test_a_thaw_killed_at_each_step_loses_no_request_and_doubles_none(
    archived: Path, tmp_path: Path, s3: S3Site, step: str
) -> None:
    s3.proxy.thaw = Thaw(s3.server.now)
    site = shipped_cold(archived, tmp_path, s3)
    s3.proxy.reset_counts()
    run = ck(site, "thaw", "--path", "**", "--yes", check=None, env={KILL: step})
    assert run.returncode == -signal.SIGKILL, f"not killed at {step}: {run.stderr}"
    sent = s3.proxy.counts.get("POST", 0)
    doc = ck_json(site, "thaw", "--path", "**", "--yes")["result"]
    assert doc["failed"] == [] and doc["under_way"] == []
    objects = {o["key"] for o in doc["objects"]}
    assert {o["state"] for o in doc["objects"]} <= {"to ask", "thawing"}
    assert sent + len(doc["asked"]) == len(objects) == s3.proxy.counts.get("POST", 0)
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        rows = dict(db.execute("SELECT key, state FROM thaws").fetchall())
    assert rows == dict.fromkeys(objects, "asked")


def job_runs(site: Path, job: str) -> list[tuple[str, str]]:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        rows = db.execute("SELECT status, error FROM job_runs WHERE job = ? ORDER BY id", (job,))
        return [(str(s), str(e)) for s, e in rows.fetchall()]


def test_restore_thaw_is_finished_by_the_scheduler_across_a_sigkill(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    s3.proxy.thaw = thaw = Thaw(s3.server.now)
    site = shipped_cold(archived, tmp_path, s3)
    config = site / "coldkeep.toml"
    config.write_text(
        config.read_text() + "\n[jobs.thaws]\ninterval = 1\n[jobs.alerts]\ninterval = 1\n"
    )
    unit = sorted({str(e["unit"]) for e in entries(site)})[-1]
    wanted = remote_only(site, unit)
    objects = {str(e["gz_path"]) for e in wanted}
    back = tmp_path / "back"
    s3.proxy.reset_counts()

    doc = ck_json(site, "restore", "--unit", unit, "--to", str(back), "--thaw")
    assert doc["result"]["waiting_restore"] == 1 and sorted(doc["result"]["asked"]) == sorted(
        objects
    )
    assert not back.exists()
    daemon = start("run", "--config", str(config))
    try:
        eventually(lambda: len(job_runs(site, "thaws")) >= 2, within=60)
        assert daemon.kill() == -signal.SIGKILL
    finally:
        daemon.kill()
    assert not back.exists() and thaw.refused == 0, "nothing read before the thaw is done"

    s3.server.advance_clock(12 * HOUR_S + 60)
    daemon = start("run", "--config", str(config))
    try:
        eventually(lambda: ("ok", "None") in job_runs(site, "thaws")[-1:], within=60)
        eventually(lambda: alerts(site, "thaw_restore_done"), within=60)
    finally:
        daemon.kill()
    for e in wanted:
        assert sha((back / str(e["relpath"])).read_bytes()) == e["sha256"]
    assert s3.proxy.counts.get("POST", 0) == len(objects), "no thaw asked twice"
    assert thaw.refused == 0
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        assert db.execute("SELECT state FROM thaw_restores").fetchall() == [("done",)]


def alerts(site: Path, kind: str) -> bool:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        return bool(db.execute("SELECT 1 FROM alerts WHERE kind = ?", (kind,)).fetchall())


def test_disaster_recovery_from_deep_archive_thaws_nothing_until_a_restore_asks(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    s3.proxy.thaw = thaw = Thaw(s3.server.now)
    site = shipped_cold(archived, tmp_path, s3)
    expected = {e["relpath"]: e["sha256"] for e in entries(site)}
    shutil.rmtree(site / "archive")
    s3.proxy.reset_counts()

    doc = ck_json(site, "rebuild-manifest", "--from-remote")
    assert doc["ok"] and doc["result"]["remote_only"] > 0, doc
    assert ck(site, "find", "part").stdout
    assert asyncio.run(fleet_finds(s3, tmp_path / "fleet", "part")) > 0
    assert s3.proxy.counts.get("POST", 0) == 0 and thaw.refused == 0, "no thaw"
    assert not [x for x in s3.proxy.exchanges if x.method == "GET" and x.status == 403]

    out = tmp_path / "restored"
    plan = ck_json(site, "restore", "--path", "**", "--to", str(out), "--thaw")["result"]
    objects = {o["key"] for o in plan["objects"]}
    assert (
        sorted(plan["asked"])
        == sorted(objects)
        == sorted({str(e["gz_path"]) for e in entries(site) if e["status"] == "archived"})
    )
    s3.server.advance_clock(12 * HOUR_S + 60)
    assert ck_json(site, "restore", "--path", "**", "--to", str(out))["ok"]
    back = {
        p.relative_to(out).as_posix(): sha(p.read_bytes()) for p in out.rglob("*") if p.is_file()
    }
    assert back == expected
    assert s3.proxy.counts.get("POST", 0) == len(objects) and thaw.refused == 0


async def fleet_finds(s3: S3Site, cache: Path, text: str) -> int:
    """How many files the fleet view over the bucket finds for ``text``."""
    remote = RemoteSettings(
        f"s3://{s3.bucket}/{PREFIX}", endpoint_url=s3.endpoint, region="us-east-1"
    )
    fleet = Fleet(remote, cache)
    try:
        assert [s.site for s in await fleet.load() if s.usable] == [SITE]
        catalogs = await fleet.catalogs()
        return catalogs[SITE].filter(parse_query(text))[0]
    finally:
        await fleet.close()


def test_expire_s_plan_says_what_deleting_cold_copies_early_costs(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    site = shipped_cold(archived, tmp_path, s3)
    config = site / "coldkeep.toml"
    config.write_text(config.read_text() + "\n[retention]\nfiles_days = 1\n")
    plan = ck_json(site, "expire")["result"]
    shipped = [i for i in plan["items"] if i["remote"]]
    assert shipped and plan["early_deletions"] == len(shipped)
    assert plan["early_deletion_usd"] > 0
    said = ck(site, "expire").stdout
    assert "under the cold class's minimum stay: deleting them now costs about" in said, said


async def test_a_waiting_restore_that_can_never_run_is_failed_once_not_retried(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    site = shipped_cold(archived, tmp_path, s3)
    archiver = Archiver(load_settings(site / "coldkeep.toml"), stream=EventStream())
    selection = asdict(Selection(unit="no-such-unit"))
    async with await Manifest.open(site / "archive" / "coldkeep.db") as manifest:
        await thaws.add_waiting(manifest, selection, None, "standard", 7, 0)
        report = await restoring.finish_thawed(archiver.sessions, manifest, None)
        assert report.failed == [1] and report.restored == []
        [row] = await thaws.restores(manifest)
        assert row.state == "failed" and "nothing archived matches --unit no-such-unit" in str(
            row.detail
        )
        again = await restoring.finish_thawed(archiver.sessions, manifest, None)
        assert again.failed == [] and again.waiting == 0


async def test_a_waiting_restore_whose_identity_file_is_gone_fails_naming_it(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    site = shipped_cold(archived, tmp_path, s3)
    archiver = Archiver(load_settings(site / "coldkeep.toml"), stream=EventStream())
    unit = sorted({str(e["unit"]) for e in entries(site)})[-1]
    gone = tmp_path / "usb" / "key.txt"
    async with await Manifest.open(site / "archive" / "coldkeep.db") as manifest:
        await thaws.add_waiting(
            manifest, asdict(Selection(unit=unit)), None, "standard", 7, 0, str(gone)
        )
        first = await restoring.finish_thawed(archiver.sessions, manifest, None)
        assert first.asked > 0 and first.waiting == 1  # moto thaws at once: ready next time
        report = await restoring.finish_thawed(archiver.sessions, manifest, None)
        assert report.failed == [1] and report.restored == []
        [row] = await thaws.restores(manifest)
    assert row.state == "failed" and f"{gone}: no such file" in str(row.detail), row


async def test_a_thawed_copy_that_ended_before_the_restore_ran_is_asked_for_again(
    archived: Path, tmp_path: Path, s3: S3Site
) -> None:
    s3.proxy.thaw = thaw = Thaw(s3.server.now)
    site = shipped_cold(archived, tmp_path, s3)
    unit = sorted({str(e["unit"]) for e in entries(site)})[-1]
    wanted = remote_only(site, unit)
    objects = {str(e["gz_path"]) for e in wanted}
    back = tmp_path / "back"
    archiver = Archiver(load_settings(site / "coldkeep.toml"), stream=EventStream())
    s3.proxy.reset_counts()
    plan = await archiver.restore_thawing(Selection(unit=unit), back, "standard", 1)
    assert isinstance(plan, ThawPlan) and plan.waiting_restore == 1

    s3.server.advance_clock(12 * HOUR_S + 2 * DAY_S)  # thawed, and its one day over
    async with await Manifest.open(site / "archive" / "coldkeep.db") as manifest:
        report = await restoring.finish_thawed(archiver.sessions, manifest, None)
    assert report.asked == len(objects) and report.waiting == 1 and report.restored == []
    assert s3.proxy.counts.get("POST", 0) == 2 * len(objects)
    assert not back.exists() and thaw.refused == 0, "no GET of a copy that ended"

    s3.server.advance_clock(12 * HOUR_S + 60)
    async with await Manifest.open(site / "archive" / "coldkeep.db") as manifest:
        report = await restoring.finish_thawed(archiver.sessions, manifest, None)
    assert report.restored == [1] and thaw.refused == 0
    for e in wanted:
        assert sha((back / str(e["relpath"])).read_bytes()) == e["sha256"]
