"""``coldkeep demo``: the first thing a new operator runs, through the real CLI."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

from helpers import gunzip

COLDKEEP = [sys.executable, "-m", "coldkeep.tui.cli"]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_demo_writes_a_site_and_archives_it_without_losing_a_byte(tmp_path: Path) -> None:
    site = tmp_path / "demo"
    subprocess.run([*COLDKEEP, "demo", str(site), "--scale", "0.03", "--no-console"], check=True)
    originals = {
        p.relative_to(site / "live").as_posix(): sha(p.read_bytes())
        for p in (site / "live").rglob("*")
        if p.is_file() and p.name != ".closed"
    }
    with sqlite3.connect(site / "state.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*) FROM events").fetchone()[0] >= 1000

    run = subprocess.run(
        [*COLDKEEP, "demo", str(site), "--seed", "1"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "Using the existing demo" in out
    assert "removed leftover files/unit-0000/interrupted.jsonl.gz.partial" in out
    for outcome in ("adopted", "stale", "corrupt"):
        assert f": {outcome}" in out
    assert "files eligible" in out and "archived" in out

    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        rows = db.execute("SELECT relpath, sha256, gz_path FROM entries").fetchall()
    archived = {}
    for relpath, digest, gz_path in rows:
        assert sha(gunzip(site / "archive" / gz_path)) == digest
        archived.setdefault(relpath, set()).add(digest)
    for relpath, digest in originals.items():
        live = site / "live" / relpath
        assert (live.exists() and sha(live.read_bytes()) == digest) or digest in archived.get(
            relpath, set()
        ), f"{relpath} is neither live nor archived"
    assert not list(site.rglob("*.partial"))
