"""``coldkeep demo``: the first thing a new operator runs, through the real CLI."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from helpers import COLDKEEP, live_files


def test_demo_writes_a_site_with_something_for_every_pane(tmp_path: Path) -> None:
    site = tmp_path / "demo"
    subprocess.run([*COLDKEEP, "demo", str(site), "--scale", "0.03", "--no-console"], check=True)
    assert (site / "coldkeep.toml").read_text().count('mode = "on"') == 1
    assert len(live_files(site)) > 20
    with sqlite3.connect(site / "state.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*) FROM events").fetchone()[0] >= 1000
    leftovers = sorted(p.name for p in (site / "archive" / "files").rglob("*"))
    assert sum(n.endswith(".gz") for n in leftovers) == 3
    assert "interrupted.jsonl.gz.partial" in leftovers

    run = subprocess.run(
        [*COLDKEEP, "demo", str(site), "--no-console"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Using the existing demo" in run.stdout and "Next: coldkeep plan" in run.stdout
    assert "interrupted.jsonl.gz.partial" in {p.name for p in site.rglob("*.partial")}, (
        "nothing is touched without the operator"
    )


def test_demo_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    run = subprocess.run(
        [*COLDKEEP, "demo", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 2 and "is not empty" in run.stderr
    assert "Writing" not in run.stdout
    assert (tmp_path / "precious.txt").read_text() == "keep me"
