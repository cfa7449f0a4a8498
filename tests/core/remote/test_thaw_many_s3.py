"""Disaster recovery at scale from DEEP_ARCHIVE: a thousand files over many
bundles, sealed to an age recipient and locked by the bucket, every local copy
dropped; ``restore --thaw`` asks once per object, ``coldkeep run`` is killed
while the thaws are under way, and the next one finishes the restore with the
identity ``restore --thaw`` was given, each file bit-identical."""

from __future__ import annotations

import signal
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from pyrage import x25519
from sealkit import new_identity

from helpers import DAY_NS, EVERY_FILE, ck, ck_json, entries, eventually, sha, start, write_raw
from s3kit import S3Site
from s3kit.thaw import HOUR_S, Thaw

UNITS = 5
PER_UNIT_MONTH = 66  # 5 units x 3 months x 66 = 990 bundled files
MONTHS_AGO = (40, 70, 100)
ALONE = 10  # each the only file of its unit and month: a gzip of its own


def live_tree(live: Path) -> dict[str, str]:
    """The files written, by relpath: their sha256."""
    written: dict[str, str] = {}
    now = time.time_ns()

    def put(rel: str, data: bytes, days: int) -> None:
        write_raw(live, rel.encode(), data, now - days * DAY_NS)
        written[rel] = sha(data)

    for u in range(UNITS):
        for m, days in enumerate(MONTHS_AGO):
            for i in range(PER_UNIT_MONTH):
                put(f"unit-{u}/m{m}/f{i:03}.log", f"{u} {m} {i}\n".encode() * (i + 1), days)
    for a in range(ALONE):
        put(f"alone-{a}/only.log", f"alone {a}\n".encode() * 500, 40)
    return written


def sealed_locked_cold(tmp_path: Path, worm: S3Site) -> tuple[Path, Path, dict[str, str]]:
    site = tmp_path / "site"
    written = live_tree(site / "live")
    key, _ = new_identity(tmp_path)
    to = x25519.Identity.from_str(key.read_text().splitlines()[1]).to_public()
    config = site / "coldkeep.toml"
    config.write_text(EVERY_FILE)
    ck(site, "pass")
    config.write_text(
        f"{EVERY_FILE}\n[retention]\nfiles_days = 400\nevents_days = 400\n"
        f"[jobs.thaws]\ninterval = 1\n[jobs.alerts]\ninterval = 1\n"
        f'[remote]\nurl = "s3://{worm.bucket}/many"\nendpoint_url = "{worm.endpoint}"\n'
        f'region = "us-east-1"\nsite = "web-9"\nkeep_local_days = 0\n'
        f'storage_class = "DEEP_ARCHIVE"\nobject_lock = "compliance"\n'
        f'encrypt_to = ["{to}"]\n'
    )
    doc = ck_json(site, "ship")
    assert doc["ok"] and doc["result"]["problems"] == [], doc
    return site, key, written


def job_runs(site: Path, job: str) -> list[tuple[str, str]]:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        rows = db.execute("SELECT status, error FROM job_runs WHERE job = ? ORDER BY id", (job,))
        return [(str(s), str(e)) for s, e in rows]


def alerted(site: Path, kind: str) -> Callable[[], bool]:
    """Whether an alert whose kind starts with ``kind`` was raised."""

    def check() -> bool:
        with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
            found = db.execute("SELECT 1 FROM alerts WHERE kind LIKE ? || '%'", (kind,))
            return bool(found.fetchall())

    return check


def thaw_restores(site: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        return db.execute("SELECT * FROM thaw_restores").fetchall()


def cold_gets(worm: S3Site) -> list[str]:
    """GETs S3 refused as cold (moto's own refusal or the thaw model's)."""
    return [x.path for x in worm.proxy.exchanges if x.method == "GET" and x.status == 403]


def test_a_thousand_sealed_locked_files_come_back_from_deep_archive_across_a_sigkill(
    tmp_path: Path, worm: S3Site
) -> None:
    worm.proxy.thaw = thaw = Thaw(worm.server.now)
    site, key, written = sealed_locked_cold(tmp_path, worm)
    shipped = entries(site)
    assert len(shipped) == len(written) == UNITS * len(MONTHS_AGO) * PER_UNIT_MONTH + ALONE
    objects = {str(e["gz_path"]) for e in shipped}
    assert len(objects) == UNITS * len(MONTHS_AGO) + ALONE, "a bundle per unit and month"
    back = tmp_path / "back"
    worm.proxy.reset_counts()

    refused = ck(site, "restore", "--path", "**", "--to", str(back), "--thaw", check=2)
    assert "sealed to age recipients" in refused.stderr and "--identity" in refused.stderr
    assert worm.proxy.counts.get("POST", 0) == 0, "refused before anything is asked"
    doc = ck_json(
        site, "restore", "--path", "**", "--to", str(back), "--thaw", "--identity", str(key)
    )
    plan = doc["result"]
    assert plan["waiting_restore"] is not None and len(plan["asked"]) == len(objects)
    assert worm.proxy.counts.get("POST", 0) == len(objects), "one RestoreObject per object"
    assert all(o["sealed"] for o in plan["objects"])

    config = str(site / "coldkeep.toml")
    daemon = start("run", "--config", config)
    try:
        eventually(lambda: len(job_runs(site, "thaws")) >= 2, within=60)
        assert daemon.kill() == -signal.SIGKILL
    finally:
        daemon.kill()
    assert not back.exists() and cold_gets(worm) == [], "nothing read before the thaw is done"

    worm.server.advance_clock(12 * HOUR_S + 60)
    daemon = start("run", "--config", config)
    try:
        eventually(alerted(site, "thaw_restore_"), within=120)
    finally:
        daemon.kill()
    assert alerted(site, "thaw_restore_done")(), thaw_restores(site)
    got = {p.relative_to(back).as_posix(): sha(p.read_bytes()) for p in back.rglob("*.log")}
    assert got == written
    assert worm.proxy.counts.get("POST", 0) == len(objects), "no thaw asked twice"
    assert cold_gets(worm) == [] and thaw.refused == 0
    [row] = thaw_restores(site)
    assert row[6] == "done" and row[-1] == str(key.resolve()), row
