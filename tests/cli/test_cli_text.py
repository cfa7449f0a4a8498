"""What the CLI says, as an operator reads it: one of a thing is singular, the
progress display ends before the result prints, a phase with nothing to say
gets no line, and history shows a refusal's detail whole (a longer one is cut)."""

from __future__ import annotations

import os
import pty
import select
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from coldkeep.core.base.lock import ArchiveLock
from coldkeep.tui.text.fmt import plural

from helpers import COLDKEEP, DAY_NS, ck, ck_json, cli_ok

CONFIG = """\
live_root = "live"
archive_root = "archive"
mode = "on"
"""


@pytest.fixture
def one_file(tmp_path: Path) -> Path:
    """A site with one eligible file, one unit, nothing archived yet."""
    site = tmp_path / "site"
    path = site / "live" / "u1" / "a.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"a": 1}\n' * 100)
    old = path.stat().st_mtime_ns - 60 * DAY_NS
    os.utime(path, ns=(old, old))
    (site / "coldkeep.toml").write_text(CONFIG)
    return site


def test_plural() -> None:
    assert [plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert plural(1, "entry", "entries") == "1 entry"
    assert plural(3, "entry", "entries") == "3 entries"


def test_one_of_a_thing_is_singular(one_file: Path) -> None:
    plan = ck(one_file, "plan").stdout
    assert "1 files" not in plan and " 1 file " in plan, plan
    done = ck(one_file, "pass").stdout
    assert "1 archived" in done and "0 verify failures, 0 errors" in done, done
    status = ck(one_file, "status").stdout
    assert "1 files" not in status and "1 file " in status, status
    assert ck(one_file, "restore", "--list", "--unit", "u1").stdout.endswith("1 entry\n")
    rebuilt = ck(one_file, "rebuild-manifest", "--out", str(one_file / "x.db")).stdout
    assert "1 entry written" in rebuilt


def test_no_phase_line_with_nothing_to_say(one_file: Path) -> None:
    run = ck(one_file, "pass")
    lines = run.stderr.splitlines()
    assert "recovery:" not in lines and "files: 1 to do, 900 B" in lines, run.stderr
    assert not [line for line in lines if line.endswith(":")], run.stderr


def _on_a_terminal(site: Path, *args: str) -> bytes:
    """The command's stdout and stderr, both on one pseudo-terminal, as an operator sees them."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real CLI, its output on the terminal
        os.execv(COLDKEEP[0], [*COLDKEEP, *args, "--config", str(site / "coldkeep.toml")])
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        assert ready, "the command hung"
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out


def test_the_progress_bar_ends_before_the_result_prints(tmp_path: Path) -> None:
    site = tmp_path / "site"
    cli_ok("demo", str(site), "--scale", "0.05", "--no-console")
    out = _on_a_terminal(site, "pass")
    assert "━".encode() in out, "a bar was drawn"
    at = out.index(b"pass 1 (on): ok")
    # The bar was erased (ESC [2K) or its line ended: the result starts a line.
    before = out[:at]
    assert before.endswith((b"\n", b"\x1b[2K", b"\r")), before[-200:]


def test_history_shows_a_detail_whole(one_file: Path) -> None:
    ck(one_file, "pass")
    command = "a very long command line " * 8
    with ArchiveLock.try_acquire(one_file / "archive", command=command.strip()):
        refused = ck(one_file, "recover", check=3)
    why = refused.stderr.removeprefix("coldkeep: ").split("; try again")[0]
    assert len(why) > 200
    line = next(x for x in ck(one_file, "history").stdout.splitlines() if "refused" in x)
    assert why in line, line


def a_site_with_its_own_kinds(site: Path, kinds: str = "") -> Path:
    """A live DB whose kinds are no demo's (``click``, ``view``), old enough to move."""
    db = site / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER, kind TEXT)")
        conn.execute("CREATE INDEX events_kind_ts ON events (kind, ts)")
        old = int(time.time() * 1000) - 90 * 86_400_000
        conn.executemany(
            "INSERT INTO events (ts, kind) VALUES (?, ?)",
            [(old + i, ("click", "view")[i % 2]) for i in range(200)],
        )
    config = site / "coldkeep.toml"
    config.write_text(config.read_text() + 'state_db = "state.db"\n' + kinds)
    return site


def test_every_kind_is_archived_by_default(one_file: Path) -> None:
    site = a_site_with_its_own_kinds(one_file)
    events = ck_json(site, "plan")["result"]["events"]
    assert events["rows"] == 199, "every kind but the last row's id (it never moves)"
    assert events["kinds"] == {"in_table": ["click", "view"], "archived": None}
    [found] = [
        f for f in ck_json(site, "doctor")["result"]["findings"] if f["check"] == "events_kinds"
    ]
    assert found["level"] == "ok" and "every kind" in found["found"]
    assert ck_json(site, "pass")["result"]["events"]["moved"] == 199


def test_plan_and_doctor_say_which_kinds_exist_when_the_config_names_others(
    one_file: Path,
) -> None:
    site = a_site_with_its_own_kinds(one_file, '[events]\nkinds = ["webhook_event", "view"]\n')
    text = ck(site, "plan").stdout
    assert "kinds: the table has 2 kinds (click, view); events.kinds archives view" in text, text
    assert "kinds staying live: click" in text
    assert "events.kinds names kinds with no row in the table: webhook_event" in text
    doctor = ck(site, "doctor").stdout
    line = next(x for x in doctor.splitlines() if "events_kinds" in x)
    assert line.startswith("warn") and "webhook_event" in line, line
    set_kinds = (site / "coldkeep.toml").read_text().replace('"webhook_event", "view"', '"x"')
    (site / "coldkeep.toml").write_text(set_kinds)
    line = next(x for x in ck(site, "doctor").stdout.splitlines() if "events_kinds" in x)
    assert "no event row would move" in line, line


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    site = tmp_path / "demo"
    cli_ok("demo", str(site), "--scale", "0.02", "--no-console")
    return site


def test_verify_help_says_what_sample_does() -> None:
    run = subprocess.run(
        [*COLDKEEP, "verify", "--help"], capture_output=True, text=True, check=True
    )
    said = " ".join(run.stdout.split())
    assert "--sample rotates: each run starts" not in said  # it never did, locally
    assert "--sample checks a random fraction, drawn afresh each run" in said
    assert "With --remote, --sample rotates instead" in said


def test_verify_says_how_many_entries_it_left_to_the_remote(demo: Path) -> None:
    config = demo / "coldkeep.toml"
    config.write_text(
        config.read_text().replace('site = "demo"', 'site = "demo"\nkeep_local_days = 0')
    )
    ck(demo, "pass")
    shipped = ck_json(demo, "ship")["result"]
    assert shipped["dropped"] > 0
    status = ck_json(demo, "status")["result"]["entries"]
    result = ck_json(demo, "verify")["result"]
    assert result["remote_only"] > 0
    assert result["checked"] + result["remote_only"] == sum(
        status[s]["entries"] for s in ("archived", "stale", "restored") if s in status
    )
    text = ck(demo, "verify").stdout
    n = result["remote_only"]
    assert f"{n} entries only on the remote, not read (verify --remote reads them)" in text, text


def test_the_pass_and_status_say_what_recovery_adopted(demo: Path) -> None:
    eligible = ck_json(demo, "plan")["result"]["files"]["eligible"]
    done = ck(demo, "pass").stdout
    archived = eligible - 1  # the demo's adoptable orphan: its source was counted eligible
    assert f"files: {archived} archived (+1 adopted by recovery)" in done, done
    line = next(x for x in ck(demo, "status").stdout.splitlines() if x.startswith("pass 1 "))
    assert line.endswith(f"{archived} files (+1 adopted by recovery)"), line


def test_a_file_that_cannot_be_archived_is_listed_by_status_with_what_to_do(
    one_file: Path,
) -> None:
    """Its archive folder is taken by a plain file: that one file cannot be
    archived; the pass ends ok, and status lists it with its reason and remedy
    until it is settled."""
    (one_file / "archive" / "files").mkdir(parents=True)
    (one_file / "archive" / "files" / "u1").write_bytes(b"in the way\n")
    done = ck(one_file, "pass")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  problem: u1/a.jsonl: " in done.stdout
    text = ck(one_file, "status").stdout
    assert "FILE PROBLEMS 1 file (left as they were; the rest went on)" in text
    assert "  u1/a.jsonl: " in text and "[io_error, 1 pass]" in text
    assert "    -> reading it or writing its gzip failed" in text
    (one_file / "archive" / "files" / "u1").unlink()
    ck(one_file, "pass")
    assert "FILE PROBLEMS" not in ck(one_file, "status").stdout
