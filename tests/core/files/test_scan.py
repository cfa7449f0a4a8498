"""Which live files a pass would take, and why it leaves the others."""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from coldkeep.core.base.config import Settings, parse_settings
from coldkeep.core.files.scan import ScanError, scan_files

from helpers import Roots


def settings(roots: Roots, **files: object) -> Settings:
    return parse_settings(
        {"live_root": str(roots.live), "archive_root": str(roots.archive), "files": files},
        roots.base / "coldkeep.toml",
    )


def test_eligibility(roots: Roots) -> None:
    roots.write("closed/old.jsonl", b"x")
    roots.write("closed/deep/er/old.log", b"x")
    roots.write("closed/new.jsonl", b"x", age_days=1)
    roots.write("closed/old.txt", b"x")
    roots.write("closed/old.jsonl.partial", b"x")
    roots.write("closed/old.jsonl.restore-partial", b"x")
    roots.write("closed/held.jsonl", b"x")
    (roots.live / "closed" / ".closed").write_text("")
    roots.write("open/old.jsonl", b"x")
    (roots.live / "closed" / "link.jsonl").symlink_to(roots.live / "closed" / "old.jsonl")
    os.mkfifo(roots.live / "closed" / "fifo.jsonl")
    (roots.live / "linked-unit").symlink_to(roots.live / "closed")

    cfg = settings(roots, unit_closed="marker:.closed")
    scan = scan_files(cfg, now_ns=time.time_ns(), in_grace={"closed/held.jsonl"})

    assert [c.relpath for c in scan.eligible] == ["closed/old.jsonl", "closed/deep/er/old.log"]
    assert dict(scan.skipped) == {"too_new": 1, "held": 1, "unit_open": 1, "not_regular": 2}


def test_a_file_named_like_a_temporary_is_counted_not_passed_over(roots: Roots) -> None:
    roots.write("u/download.partial", b"x")
    roots.write("u/report.pdf.restore-partial", b"x")
    roots.write("u/kept.log", b"x")
    scan = scan_files(settings(roots, include=["**"]), now_ns=time.time_ns())
    assert [c.relpath for c in scan.eligible] == ["u/kept.log"]
    assert dict(scan.skipped) == {"temp_name": 2}


def test_sql_rule_and_its_failure(roots: Roots) -> None:
    db = roots.base / "state.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE units (name TEXT, closed INT)")
        c.executemany("INSERT INTO units VALUES (?, ?)", [("a", 1), ("b", 0)])
    roots.write("a/x.jsonl", b"x")
    roots.write("b/x.jsonl", b"x")
    cfg = parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "state_db": str(db),
            "files": {"unit_closed": "sql:SELECT name FROM units WHERE closed"},
        },
        roots.base / "coldkeep.toml",
    )
    assert [c.relpath for c in scan_files(cfg, now_ns=time.time_ns()).eligible] == ["a/x.jsonl"]

    bad = parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "state_db": str(db),
            "files": {"unit_closed": "sql:SELECT name FROM nope"},
        },
        roots.base / "coldkeep.toml",
    )
    with pytest.raises(ScanError, match="no such table: nope"):
        scan_files(bad, now_ns=time.time_ns())
