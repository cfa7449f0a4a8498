"""The CLI's contract with an operator: exit codes, one-line errors, refusals that
write nothing, the lock, graceful stops, and what verify and restore report."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from pyrage import x25519

from helpers import COLDKEEP, as_legacy_gzip, ck, ck_json, cli_ok, entries, live_files, sha

SCALE = "0.02"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    cli_ok("demo", str(site), "--scale", SCALE, "--no-console")
    return site


def set_config(site: Path, old: str, new: str) -> None:
    config = site / "coldkeep.toml"
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new))


def test_a_bad_config_exits_2_with_one_line(site: Path) -> None:
    set_config(site, "min_age_days = 14", "min_age_days = 'old'")
    run = ck(site, "pass", check=2)
    assert run.stderr.count("\n") == 1
    assert "files.min_age_days: expected a number" in run.stderr
    assert not (site / "archive" / "coldkeep.db").exists(), "nothing ran"


def test_mode_off_refuses_and_mode_plan_only_counts(site: Path) -> None:
    set_config(site, 'mode = "on"', 'mode = "off"')
    assert 'mode = "off"' in ck(site, "pass", check=2).stderr
    set_config(site, 'mode = "off"', 'mode = "plan"')
    before = live_files(site)
    result = ck_json(site, "pass")["result"]
    assert result["mode"] == "plan" and result["files"]["archived"] == 0
    plan = ck_json(site, "plan")["result"]
    assert result["files"]["eligible"] == plan["files"]["eligible"] > 0, "the backlog, counted"
    text = ck(site, "pass").stdout
    assert f"files: {plan['files']['eligible']} eligible" in text and "nothing archived" in text
    assert "recovery, not done: 1 partial, 3 orphans" in text
    assert live_files(site) == before and not (site / "archive" / "coldkeep.db").exists()
    assert list(site.rglob("*.partial")), "plan mode removed nothing"


def test_plan_lists_what_recovery_would_touch_by_path(site: Path) -> None:
    text = ck(site, "plan").stdout
    assert "  partial  files/unit-0000/interrupted.jsonl.gz.partial" in text
    orphans = [line.split()[1] for line in text.splitlines() if line.startswith("  orphan ")]
    assert len(orphans) == 3 and all(o.endswith(".gz") for o in orphans)
    ck(site, "adopt", orphans[0])  # the path as plan shows it is what adopt takes


def test_a_second_pass_while_one_runs_exits_3_naming_the_first(site: Path) -> None:
    set_config(site, "[files]", "[io]\nbytes_per_s = 200000\n\n[files]")  # a slow pass
    first = subprocess.Popen(
        [*COLDKEEP, "pass", "--config", str(site / "coldkeep.toml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert first.stderr is not None
    for line in first.stderr:  # it holds the lock once it reports its files phase
        if line.startswith("files:"):
            break
    second = ck(site, "pass", check=3)
    assert f"pid {first.pid}" in second.stderr and "coldkeep pass" in second.stderr
    assert "--wait" in second.stderr
    refused = ck_json(site, "pass", check=3)  # --json still gets its one document
    assert (refused["command"], refused["ok"], refused["result"]) == ("pass", False, None)
    assert f"pid {first.pid}" in refused["error"]

    first.send_signal(signal.SIGTERM)  # graceful: stops at the next safe point
    out, _ = first.communicate(timeout=60)
    assert first.returncode == 0 and "cancelled" in out
    assert not list(site.rglob("*.partial"))
    set_config(site, "bytes_per_s = 200000", "bytes_per_s = 0")
    ck(site, "recover")
    assert ck_json(site, "pass")["result"]["status"] == "ok"


def test_status_plan_and_pass_speak_json(site: Path) -> None:
    assert ck_json(site, "status")["result"]["entries"] == {}
    plan = ck_json(site, "plan")
    assert plan["command"] == "plan" and plan["ok"] is True
    assert set(plan["result"]) == {"files", "events", "events_error", "recovery"}
    done = ck_json(site, "pass")["result"]
    assert set(done) >= {"status", "files", "events", "recovery", "problems", "pass_id"}
    status = ck_json(site, "status")["result"]
    assert status["entries"]["archived"]["entries"] == done["files"]["archived"] + 1
    assert status["last_passes"][0]["status"] == "ok"


def test_status_json_carries_the_trends_of_the_days_asked(site: Path) -> None:
    empty = ck_json(site, "status")["result"]["trends"]
    assert len(empty["days"]) == 30 and set(empty["bytes_in"]) == {0}
    assert set(empty["ratio"]) == {None} and empty["passes"]["started"] == []
    assert empty["tiers"] == {"local": 0, "shipped": 0, "remote_only": 0, "expired": 0}
    done = ck_json(site, "pass")["result"]
    status = ck_json(site, "status", "--days", "3")["result"]
    trends = status["trends"]
    assert len(trends["days"]) == len(trends["bytes_in"]) == len(trends["backlog_bytes"]) == 3
    assert sum(trends["bytes_in"]) >= done["files"]["bytes_in"] > 0
    assert trends["passes"]["status"] == ["ok"]
    kept = sum(status["entries"][s]["gz_bytes"] for s in ("archived", "stale"))
    assert trends["tiers"]["local"] == kept
    assert "trends" not in ck(site, "status").stdout
    assert "--days" in ck(site, "status", "--days", "0", check=2).stderr


def test_a_manifest_entry_pointing_outside_is_refused(site: Path, tmp_path: Path) -> None:
    ck(site, "pass")
    victim = entries(site)[0]
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.execute("UPDATE entries SET relpath = '../../etc/x' WHERE id = ?", (victim["id"],))
        db.execute(
            "UPDATE entries SET gz_path = '../../../outside.gz' WHERE id = ?",
            (entries(site)[1]["id"],),
        )
    before = sorted(p for p in tmp_path.rglob("*"))
    run = ck(site, "restore", str(victim["id"]), str(entries(site)[1]["id"]), check=1)
    assert [line.split()[0] for line in run.stdout.splitlines()[:2]] == ["refused", "refused"]
    assert "'..'" in run.stdout
    assert sorted(p for p in tmp_path.rglob("*")) == before, "nothing written anywhere"


def test_all_versions_of_a_path_go_side_by_side_and_never_in_place(
    site: Path, tmp_path: Path
) -> None:
    ck(site, "pass")
    [old] = [e for e in entries(site) if e["status"] == "stale"]  # the demo's earlier version
    path = old["relpath"]
    [new] = [e for e in entries(site) if e["relpath"] == path and e["id"] != old["id"]]

    listed = ck_json(site, "restore", "--path", path, "--all-versions", "--list")["result"]
    assert [e["id"] for e in listed] == [old["id"], new["id"]], "--list names the ids"
    run = ck(site, "restore", "--path", path, "--all-versions", check=2)
    assert f"2 versions of {path} (entries {old['id']}, {new['id']})" in run.stderr
    assert "--to DIR" in run.stderr
    assert not (site / "live" / path).exists(), "nothing placed in the live tree"

    out = tmp_path / "versions"
    run = ck(site, "restore", "--path", path, "--all-versions", "--to", str(out))
    assert "restore: 2 restored" in run.stdout, run.stdout
    assert sha((out / path).read_bytes()) == new["sha256"], "the newest keeps the name"
    older = out / f"{path}.entry-{old['id']}"
    assert sha(older.read_bytes()) == old["sha256"]


def test_restore_to_a_directory_through_a_symlink_is_refused(site: Path, tmp_path: Path) -> None:
    ck(site, "pass")
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    run = ck(site, "restore", "--unit", "unit-0000", "--to", str(tmp_path / "link" / "x"), check=2)
    assert "goes through a symlink" in run.stderr
    assert list(real.iterdir()) == []
    run = ck(site, "restore", "--unit", "unit-0000", "--to", str(site / "archive" / "x"), check=2)
    assert "inside the archive" in run.stderr


def test_verify_finds_a_damaged_gzip_and_resumes_across_runs(site: Path) -> None:
    ck(site, "pass")
    rows = entries(site)
    bundled = [r for r in rows if r["member_offset"] is not None]
    assert len({r["gz_path"] for r in bundled}) < len(bundled), "a bundle holds several"
    hit = bundled[0]
    victim = site / "archive" / hit["gz_path"]
    data = bytearray(victim.read_bytes())
    data[hit["member_offset"] + hit["member_length"] - 6] ^= 0xFF  # the CRC in its trailer
    victim.write_bytes(bytes(data))

    # Only that member fails; the rest of its bundle verifies.
    report = ck_json(site, "verify", check=1)["result"]
    assert [p["gz_path"] for p in report["problems"]] == [
        f"{hit['gz_path']}@{hit['member_offset']}"
    ]
    assert report["ok"] == len(rows) - 1
    assert report["problems"][0]["result"] == "corrupt"
    assert ck_json(site, "status", check=1)["result"]["verify_failures"] == 1

    # A tiny time budget: each run checks a little and the next one resumes.
    checked, runs = 0, 0
    while True:
        part = ck_json(site, "verify", "--max-duration", "0.000001", check=None)["result"]
        runs += 1
        checked += part["checked"]
        if part["complete"]:
            break
        assert part["checked"] > 0
    assert runs > 1 and checked == len(rows)


def test_a_legacy_plain_copy_is_removed_only_when_it_is_a_prefix(site: Path) -> None:
    live = site / "live"
    closed = sorted(p for p in live.glob("unit-000[0-2]/*.jsonl"))
    prefix_of, differs_from = closed[0], closed[1]
    files = site / "archive" / "files"
    legacy_ok = files / prefix_of.relative_to(live)
    legacy_bad = files / differs_from.relative_to(live)
    for legacy, data in (
        (legacy_ok, prefix_of.read_bytes()[:1000]),
        (legacy_bad, b"something else entirely\n"),
    ):
        legacy.parent.mkdir(parents=True, exist_ok=True)
        legacy.write_bytes(data)

    run = ck(site, "pass", "--json", check=1)
    result = json.loads(run.stdout)["result"]
    assert (result["files"]["legacy_removed"], result["files"]["legacy_kept"]) == (1, 1)
    assert not legacy_ok.exists() and legacy_bad.read_bytes() == b"something else entirely\n"
    assert "not a copy of its first bytes" in run.stderr


def fullest_month(site: Path) -> str:
    """The archived month with the most rows (the oldest may hold one: the demo's
    events start a year before today, on whatever day of the month that is)."""

    def rows(db: Path) -> int:
        with sqlite3.connect(db) as m:
            return int(m.execute("SELECT count(*) FROM events").fetchone()[0])

    return max((site / "archive" / "events").glob("*.db"), key=rows).stem


def test_restored_event_rows_stay_live_and_never_overwrite(site: Path) -> None:
    ck(site, "pass")
    month = fullest_month(site)
    with sqlite3.connect(site / "archive" / "events" / f"{month}.db") as m:
        first = m.execute("SELECT * FROM events ORDER BY id LIMIT 1").fetchone()
    with sqlite3.connect(site / "state.db") as live:
        cols = len(first)
        live.execute(
            f"INSERT INTO events VALUES ({', '.join('?' * cols)})",
            (*first[:-1], "the application wrote this since"),
        )
    result = ck_json(site, "restore-events", "--month", month, check=1)["result"]
    assert result["restored"] > 0 and len(result["conflicts"]) == 1
    with sqlite3.connect(site / "state.db") as live:
        row = live.execute("SELECT * FROM events WHERE id = ?", (first[0],)).fetchone()
    assert row[-1] == "the application wrote this since", "never overwritten"
    again = ck_json(site, "pass")["result"]
    # Every row put back (or asked for: the conflicting one too) is held from passes.
    assert again["events"]["held"] == result["restored"] + 1, "restored rows are held"
    assert (
        "no archived events for 1999-01"
        in ck(site, "restore-events", "--month", "1999-01", check=2).stderr
    )


def test_restore_events_by_days_puts_back_only_those_days(site: Path) -> None:
    ck(site, "pass")
    month = fullest_month(site)
    start, end = f"{month}-10", f"{month}-11"  # two whole UTC days, both included
    lo = int(datetime.fromisoformat(f"{start}T00:00:00+00:00").timestamp() * 1000)
    hi = lo + 2 * 86_400_000
    with sqlite3.connect(site / "archive" / "events" / f"{month}.db") as m:
        kind, want = m.execute(
            "SELECT kind, count(*) FROM events WHERE ts >= ? AND ts < ? GROUP BY kind "
            "ORDER BY 2 DESC LIMIT 1",
            (lo, hi),
        ).fetchone()
    with sqlite3.connect(site / "state.db") as live:
        [(before,)] = live.execute("SELECT count(*) FROM events").fetchall()
    got = ck_json(site, "restore-events", "--from", start, "--to", end, "--kind", kind)
    assert got["result"]["restored"] == want > 0
    with sqlite3.connect(site / "state.db") as live:
        [(after,)] = live.execute("SELECT count(*) FROM events").fetchall()
        [(inside,)] = live.execute(
            "SELECT count(*) FROM events WHERE kind = ? AND ts >= ? AND ts < ?", (kind, lo, hi)
        ).fetchall()
    assert after == before + want, "no row outside those days, nor of another kind"
    assert inside >= want
    assert "--from '2026-13'" in ck(site, "restore-events", "--from", "2026-13", check=2).stderr


def test_the_pass_summary_names_each_conflicting_row(site: Path) -> None:
    ck(site, "pass")
    month = sorted(p.stem for p in (site / "archive" / "events").glob("*.db"))[0]
    with sqlite3.connect(site / "archive" / "events" / f"{month}.db") as m:
        first = m.execute("SELECT * FROM events ORDER BY id LIMIT 1").fetchone()
    with sqlite3.connect(site / "state.db") as live:  # the application reuses an archived id
        live.execute(
            f"INSERT INTO events VALUES ({', '.join('?' * len(first))})",
            (*first[:-1], "other content"),
        )
    run = ck(site, "pass", check=1)
    assert f"conflict: row {first[0]} is archived in {month}.db with other content" in run.stdout
    assert "ATTENTION: 1 event rows conflict" in run.stdout


def test_a_pass_lists_its_first_hundred_conflicts_and_counts_the_rest(site: Path) -> None:
    # An application that reuses archived ids makes a conflict each time; each
    # stays live, and every pass finds it again: its summary (stored, and read
    # back by the alerts) must not grow with them.
    ck(site, "pass")
    archived: list[tuple[int, int, str, str, str]] = []  # id, ts, kind, unit, payload
    for path in sorted((site / "archive" / "events").glob("*.db")):
        with sqlite3.connect(path) as m:
            archived += m.execute("SELECT * FROM events ORDER BY id LIMIT 40").fetchall()
    clashes = archived[:130]
    assert len(clashes) == 130
    with sqlite3.connect(site / "state.db") as live:
        marks = ", ".join("?" * len(clashes[0]))
        live.executemany(
            f"INSERT INTO events VALUES ({marks})", [(*r[:-1], "other content") for r in clashes]
        )

    run = ck(site, "pass", check=1)
    assert "ATTENTION: 130 event rows conflict" in run.stdout
    assert run.stdout.count("    conflict: row ") == 20
    assert "… and 110 more (--json lists the first 100; the next passes list the rest" in run.stdout
    events = ck_json(site, "pass", check=1)["result"]["events"]
    assert events["conflicts_total"] == 130
    assert [c["row_id"] for c in events["conflicts"]] == sorted(r[0] for r in clashes)[:100]
    with sqlite3.connect(site / "state.db") as live:
        kept = live.execute("SELECT count(*) FROM events WHERE payload = 'other content'")
        assert kept.fetchone() == (130,), "a conflict past the listed ones stays live too"


def test_usage_errors_exit_2(site: Path) -> None:
    assert "select something" in ck(site, "restore", check=2).stderr
    assert ck(site, "adopt", check=2).returncode == 2
    assert "YYYY-MM-DD" in ck(site, "restore", "--after", "yesterday", check=2).stderr
    env_run = subprocess.run(
        [*COLDKEEP, "status"],
        capture_output=True,
        text=True,
        cwd=site,
        env={**os.environ, "COLDKEEP_CONFIG": str(site / "coldkeep.toml")},
        check=False,
    )
    assert env_run.returncode == 0 and "archive_root" in env_run.stdout


def test_a_killed_pass_is_settled_as_interrupted_with_what_it_archived(site: Path) -> None:
    killed = ck(site, "pass", env={"COLDKEEP_TEST_KILL_AT": "source_unlinked:4"}, check=-9)
    assert killed.returncode == -signal.SIGKILL
    archived_before_the_kill = len(entries(site))
    recovered = ck_json(site, "recover")["result"]
    assert recovered["passes_interrupted"] == 1
    ck(site, "pass")
    ck(site, "pass")

    passes = ck_json(site, "status")["result"]["last_passes"]
    assert [p["status"] for p in passes] == ["ok", "ok", "interrupted"]
    dead = passes[-1]
    assert dead["finished_at"] is not None
    # The demo's archive has planted orphans the killed pass had no time to settle;
    # everything entered between its start and the kill is its work.
    assert 4 <= dead["summary"]["files"]["archived"] <= archived_before_the_kill
    assert "running" not in ck(site, "status").stdout


def test_history_text_shows_each_actions_arguments(site: Path) -> None:
    ck(site, "pass")
    month = sorted(p.stem for p in (site / "archive" / "events").glob("*.db"))[0]
    ck(site, "restore-events", "--month", month, "--kind", "ci_completed", check=None)
    line = next(x for x in ck(site, "history").stdout.splitlines() if "restore-events" in x)
    assert f'months=["{month}"]' in line and 'kinds=["ci_completed"]' in line, line


def test_a_gzip_an_older_coldkeep_wrote_still_verifies_rebuilds_and_restores(
    site: Path, tmp_path: Path
) -> None:
    """Its mode and exact mtime were in an extra field (FEXTRA), before they moved
    to the comment: such gzips stay readable, with everything they carry."""
    ck(site, "pass")
    entry = next(
        e for e in entries(site) if e["member_offset"] is None and e["status"] == "archived"
    )
    gz = site / "archive" / entry["gz_path"]
    size = as_legacy_gzip(gz)
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.execute("UPDATE entries SET gz_bytes = ? WHERE id = ?", (size, entry["id"]))
    verified = ck_json(site, "verify")["result"]
    assert verified["ok"] == verified["checked"] and not verified["problems"]

    rebuilt = tmp_path / "rebuilt.db"
    ck(site, "rebuild-manifest", "--out", str(rebuilt))
    with sqlite3.connect(rebuilt) as db:
        mode, mtime_ns = db.execute(
            "SELECT mode, mtime_ns FROM entries WHERE gz_path = ?", (entry["gz_path"],)
        ).fetchone()
    assert (mode, mtime_ns) == (entry["mode"], entry["mtime_ns"])

    out = tmp_path / "out"
    [done] = ck_json(site, "restore", str(entry["id"]), "--to", str(out))["result"]
    assert done["result"] == "restored"
    restored = out / entry["relpath"]
    assert sha(restored.read_bytes()) == entry["sha256"]
    assert restored.stat().st_mtime_ns == entry["mtime_ns"]


def test_a_pass_stopped_by_an_unexpected_error_exits_1_and_is_recorded_failed(
    site: Path,
) -> None:
    fault = {"COLDKEEP_TEST_RAISE_AT": "batch_archived"}
    run = ck(site, "pass", check=1, env=fault)
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("coldkeep: stopped on an unexpected error: InjectedFault:"), last
    assert "Traceback" in run.stderr  # the bug's report, above the line
    said = json.loads(ck(site, "pass", "--json", check=1, env=fault).stdout)
    assert said["ok"] is False and "InjectedFault" in said["error"]

    passes = ck_json(site, "status")["result"]["last_passes"]
    assert [p["status"] for p in passes[:2]] == ["failed", "failed"]
    assert "InjectedFault" in passes[0]["summary"]["problems"][-1]
    history = ck(site, "history").stdout
    assert "pass" in history and "error" in history
    assert ck_json(site, "pass")["result"]["status"] == "ok"


def test_a_trigger_on_the_events_table_refuses_the_event_phase_and_deletes_nothing(
    site: Path,
) -> None:
    db = site / "state.db"
    with sqlite3.connect(db) as live:
        live.execute("CREATE TABLE deliveries (event_id INTEGER)")
        live.execute("INSERT INTO deliveries SELECT id FROM events")
        live.execute(
            "CREATE TRIGGER events_cleanup AFTER DELETE ON events "
            "BEGIN DELETE FROM deliveries WHERE event_id = old.id; END"
        )

    def counts() -> tuple[int, int]:
        with sqlite3.connect(db) as live:
            return (
                live.execute("SELECT count(*) FROM events").fetchone()[0],
                live.execute("SELECT count(*) FROM deliveries").fetchone()[0],
            )

    before = counts()
    assert "events_cleanup (AFTER DELETE)" in ck(site, "plan").stdout
    done = ck_json(site, "pass", check=1)["result"]
    assert done["status"] == "failed" and done["files"]["archived"] > 0
    [line] = [p for p in done["problems"] if "events_cleanup" in p]
    assert 'events.triggers = "fire"' in line
    assert counts() == before and not list((site / "archive" / "events").glob("*.db"))

    set_config(site, "[events]\n", '[events]\ntriggers = "fire"\n')
    moved = ck_json(site, "pass")["result"]["events"]["moved"]
    assert moved > 0 and counts() == (before[0] - moved, before[1] - moved)


def test_history_shows_times_as_times_and_a_long_detail_cut(site: Path) -> None:
    """A hold's until= is a time, not epoch ms; a failed rekey's summary (JSON,
    thousands of characters) is cut on its line, saying how to see it; --full
    and --json give it whole."""
    ck(site, "pass")
    set_config(site, 'site = "demo"', 'site = "demo"\nkeep_local_days = 0')
    ck(site, "ship")
    for _ in range(2):  # sealed to one key, then that key replaced: rekey needs the first
        public = x25519.Identity.generate().to_public()
        text = (site / "coldkeep.toml").read_text().split("\nencrypt_to = ")[0].rstrip("\n")
        (site / "coldkeep.toml").write_text(f'{text}\nencrypt_to = ["{public}"]\n')
        failed = ck(site, "rekey", "--yes", check=None)
    assert failed.returncode == 1, failed.stderr
    until = "2031-06-30T12:00"
    ck(site, "hold", "add", "--unit", "events", "--reason", "tax year", "--until", until)
    lines = ck(site, "history").stdout.splitlines()
    [held] = [x for x in lines if " hold " in x]
    assert "until=2031-06-30 12:00" in held and not re.search(r"\d{13}", held), held
    [rekey] = [x for x in lines if " rekey " in x and " failed " in x]
    [record] = [r for r in ck_json(site, "history")["result"] if r["outcome"] == "failed"]
    whole = record["detail"]
    assert len(whole) > 1000 and whole not in rekey
    assert rekey.endswith(f"… {len(whole)} characters: history --full shows them)"), rekey
    assert len(rekey) < 700, len(rekey)
    [full] = [x for x in ck(site, "history", "--full").stdout.splitlines() if " failed " in x]
    assert full.endswith(f"  ({whole})"), full
