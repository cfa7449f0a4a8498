"""``coldkeep demo``: the first thing a new operator runs, through the real CLI."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers import ck_json, cli, cli_ok, live_files


def test_demo_writes_a_site_with_something_for_every_pane(tmp_path: Path) -> None:
    site = tmp_path / "demo"
    cli_ok("demo", str(site), "--scale", "0.03", "--no-console")
    assert (site / "coldkeep.toml").read_text().count('mode = "on"') == 1
    assert len(live_files(site)) > 20
    with sqlite3.connect(site / "state.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*) FROM events").fetchone()[0] >= 1000
    leftovers = sorted(p.name for p in (site / "archive" / "files").rglob("*"))
    assert sum(n.endswith(".gz") for n in leftovers) == 3
    assert "interrupted.jsonl.gz.partial" in leftovers
    assert not (site / "archive" / "coldkeep.db").exists(), "--no-console: no history"

    run = cli("demo", str(site), "--no-console")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Using the existing demo" in run.stdout and "Next: coldkeep plan" in run.stdout
    assert "interrupted.jsonl.gz.partial" in {p.name for p in site.rglob("*.partial")}, (
        "nothing is touched without the operator"
    )


def test_demo_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    run = cli("demo", str(tmp_path))
    assert run.returncode == 2 and "is not empty" in run.stderr
    assert "Writing" not in run.stdout
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_demo_records_weeks_of_passes_and_backlog_for_the_trends(tmp_path: Path) -> None:
    """The history a newcomer's demo carries: a pass each night and a backlog
    sample each day, the backlog growing; nothing archived, and the first real
    pass runs after them."""
    site = tmp_path / "demo"
    cli_ok("demo", str(site), "--scale", "0.02", "--history", "14", "--no-console")
    status = ck_json(site, "status", "--days", "14")["result"]
    trends = status["trends"]
    backlog = trends["backlog_bytes"]
    assert None not in backlog[:-1] and backlog[-1] is None, "a sample each day before today"
    assert backlog[-2] > backlog[0] > 0
    assert len(trends["passes"]["seconds"]) == 14 and min(trends["passes"]["seconds"]) > 0
    assert set(trends["bytes_in"]) == {0}, "nothing is archived yet"
    done = ck_json(site, "pass")["result"]
    assert done["status"] == "ok" and done["files"]["archived"] > 0
