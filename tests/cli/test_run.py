"""``coldkeep run``, the unattended mode, as systemd would run it: a real process
with a pass due now, stopped with SIGTERM in the middle of it."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from metricscheck import scrape, value

from coldkeep.core.base.config import load_settings
from coldkeep.core.base.lock import ArchiveLock
from coldkeep.core.files.pathindex import PathIndex

from helpers import COLDKEEP, ck, ck_json, cli_ok


def demo_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    cli_ok("demo", str(site), "--scale", "0.03", "--no-console")
    return site


def daemon_site(tmp_path: Path, rate: int) -> Path:
    site = demo_site(tmp_path)
    config = site / "coldkeep.toml"
    config.write_text(
        config.read_text()
        + f"\n[io]\nbytes_per_s = {rate}\n"
        + '\n[jobs.pass]\ncron = "17 3 * * *"\nrun_on_boot = true\n'  # due now
    )
    return site


def start(site: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*COLDKEEP, "run", "--log-json", "--config", str(site / "coldkeep.toml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def lines_until(proc: subprocess.Popen[str], predicate: object) -> list[dict[str, object]]:
    """Read the daemon's JSON log lines until one satisfies ``predicate``."""
    assert proc.stderr is not None
    seen: list[dict[str, object]] = []
    for raw in proc.stderr:
        record = json.loads(raw)
        seen.append(record)
        if predicate(record):  # type: ignore[operator]
            return seen
    raise AssertionError(f"the daemon ended first: {seen[-5:]}")


def test_sigterm_mid_pass_exits_0_and_the_next_start_finishes(tmp_path: Path) -> None:
    site = daemon_site(tmp_path, rate=300_000)
    proc = start(site)
    lines_until(proc, lambda r: r.get("kind") == "phase" and r.get("phase") == "files")
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert time.monotonic() - t0 < 10, "a graceful stop takes seconds, not minutes"
    try:
        tail = [json.loads(line) for line in err.splitlines()]
    except json.JSONDecodeError as bad:  # seen once in CI: an empty line, cause not found yet
        raise AssertionError(f"a line of the daemon's stderr is not JSON: {err!r}") from bad
    assert any(r.get("kind") == "job_run_finished" and r.get("status") == "cancelled" for r in tail)
    assert tail[-1]["kind"] == "stopped"

    assert not list(site.rglob("*.partial")), "a graceful stop leaves no partial"
    recovered = ck_json(site, "recover")["result"]
    assert recovered["missing"] == 0 and recovered["orphans_unreadable"] == 0
    assert recovered["partials_removed"] == 0 and recovered["orphans_found"] == 0
    history = ck_json(site, "history", "--jobs")["result"]
    assert [(r["job"], r["status"]) for r in history if r["job"] == "pass"] == [
        ("pass", "cancelled")
    ]

    config = site / "coldkeep.toml"
    config.write_text(config.read_text().replace("bytes_per_s = 300000", "bytes_per_s = 0"))
    again = start(site)
    seen = lines_until(
        again, lambda r: r.get("kind") == "job_run_finished" and r.get("job") == "pass"
    )
    assert seen[-1]["status"] == "ok", seen[-1]
    again.send_signal(signal.SIGTERM)
    again.communicate(timeout=30)
    assert again.returncode == 0
    plan = ck_json(site, "plan")["result"]
    assert plan["files"]["eligible"] == 0 and plan["events"]["rows"] == 0
    audit = ck_json(site, "history")["result"]
    assert {(r["origin"], r["action"]) for r in audit} >= {
        ("scheduler", "pass"),
        ("cli", "recover"),
    }
    ck(site, "status")


def test_a_run_the_daemon_was_killed_in_shows_killed_once_it_starts_again(
    tmp_path: Path,
) -> None:
    site = daemon_site(tmp_path, rate=300_000)
    proc = start(site)
    lines_until(proc, lambda r: r.get("kind") == "phase" and r.get("phase") == "files")
    proc.kill()
    proc.communicate(timeout=30)
    [left] = [r for r in ck_json(site, "history", "--jobs")["result"] if r["job"] == "pass"]
    assert left["status"] == "running"

    again = start(site)
    seen = lines_until(
        again, lambda r: r.get("kind") == "job_run_finished" and r.get("job") == "pass"
    )
    again.send_signal(signal.SIGTERM)
    again.communicate(timeout=30)
    assert (seen[-1]["status"], seen[-1]["run_id"]) == ("killed", left["id"]), seen[-1]
    killed = next(
        r for r in ck_json(site, "history", "--jobs")["result"] if r["status"] == "killed"
    )
    assert killed["id"] == left["id"] and killed["ended_at"] >= killed["started_at"]
    assert "its process ended" in killed["error"]
    assert "killed" in ck(site, "history", "--jobs").stdout
    samples = asyncio.run(scrape(load_settings(site / "coldkeep.toml")))
    assert value(samples, "coldkeep_job_runs_total", job="pass", outcome="killed") == 1


def test_a_scheduled_pass_keeps_the_index_of_paths_find_reads(tmp_path: Path) -> None:
    """A site that only ever runs unattended has the index of paths too (the
    console builds it otherwise): find at 10,000,000 entries reads it in ~0.3 s
    where the manifest's relpath index takes ~1 s."""
    site = daemon_site(tmp_path, rate=0)
    proc = start(site)
    seen = lines_until(
        proc, lambda r: r.get("kind") == "job_run_finished" and r.get("job") == "pass"
    )
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert seen[-1]["status"] == "ok", seen[-1]
    db = site / "archive" / "coldkeep.db"
    index = PathIndex(db)
    assert index.check(), "no index of paths after the scheduled pass"
    with sqlite3.connect(db) as conn:
        [(newest,)] = conn.execute("SELECT max(id) FROM entries").fetchall()
    found = index.candidates(b"part-", cap=1_000_000)
    assert found is not None and found[1] == newest  # every entry covered
    assert ck_json(site, "find", "part-")["result"]["versions"]


def test_a_job_that_times_out_leaves_a_log_of_json_lines_and_nothing_else(
    tmp_path: Path,
) -> None:
    site = demo_site(tmp_path)
    ck(site, "pass")
    config = site / "coldkeep.toml"
    config.write_text(  # a verify far too slow for its timeout, every second
        config.read_text()
        + "\n[io]\nbytes_per_s = 20000\n"
        + "\n[jobs.verify]\ninterval = 1\ntimeout = 1\nrun_on_boot = true\n"
    )
    proc = start(site)
    timeouts = 0

    def second_timeout(r: dict[str, object]) -> bool:
        nonlocal timeouts
        if r.get("kind") == "job_run_finished" and r.get("job") == "verify":
            assert r.get("status") == "timeout", r
            timeouts += 1
        return timeouts == 2

    lines_until(proc, second_timeout)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    records = [json.loads(line) for line in err.splitlines()]  # every line is JSON
    assert not [r for r in records if r.get("kind") == "internal_error"]


def alerting_site(tmp_path: Path, jobs: str) -> tuple[Path, Path]:
    """A demo site whose alerts go to a file, one JSON document per line."""
    site = demo_site(tmp_path)
    received = tmp_path / "alerts.jsonl"
    command = [
        sys.executable,
        "-c",
        f"import sys; open({str(received)!r}, 'a').write(sys.stdin.read() + '\\n')",
    ]
    config = site / "coldkeep.toml"
    config.write_text(
        config.read_text()
        + jobs
        + "\n[jobs.alerts]\ninterval = 1\nrun_on_boot = true\n"
        + f"\n[alerts]\ncommand = {json.dumps(command)}\n"
    )
    return site, received


def alerts_of(received: Path) -> list[dict[str, object]]:
    if not received.exists():
        return []
    return [json.loads(line) for line in received.read_text().splitlines() if line]


def test_pass_and_verify_due_together_take_turns_and_page_nobody(tmp_path: Path) -> None:
    site, received = alerting_site(
        tmp_path,
        "\n[io]\nbytes_per_s = 3000000\n"
        "\n[jobs.pass]\ninterval = 5\nrun_on_boot = true\n"
        "\n[jobs.verify]\ninterval = 8\nrun_on_boot = true\n",
    )
    proc = start(site)
    finished: set[str] = set()
    alerts_after_both = 0

    def both_then_an_alerts_poll(r: dict[str, object]) -> bool:
        nonlocal alerts_after_both
        if r.get("kind") == "job_run_finished":
            if r.get("job") == "alerts" and {"pass", "verify"} <= finished:
                alerts_after_both += 1
            finished.add(str(r.get("job")))
        return alerts_after_both >= 1

    seen = lines_until(proc, both_then_an_alerts_poll)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err

    waits = [r for r in seen if r.get("kind") == "job_waiting"]
    assert [(r["job"], r["detail"]) for r in waits][:1] == [
        ("verify", "behind pass, which holds the archive lock")
    ]
    runs = ck_json(site, "history", "--jobs")["result"]
    assert not [r for r in runs if "LockHeld" in str(r["error"])], runs
    verify = [r for r in runs if r["job"] == "verify" and r["status"] != "cancelled"]
    assert verify and verify[-1]["summary"]["waited_for"] == "pass"
    assert "waited" in ck(site, "history", "--jobs").stdout
    assert not [a for a in alerts_of(received) if str(a["kind"]).startswith("job_")]


def test_a_lock_held_by_another_process_alerts_once(tmp_path: Path) -> None:
    site, received = alerting_site(tmp_path, "\n[jobs.verify]\ninterval = 1\nrun_on_boot = true\n")
    ck(site, "recover")  # the manifest exists, the planted leftovers are settled
    with ArchiveLock.try_acquire(site / "archive", "an operator's restore"):
        proc = start(site)
        refused = 0

        def three_refusals_then_a_poll(r: dict[str, object]) -> bool:
            nonlocal refused
            if r.get("kind") == "job_run_finished" and r.get("job") == "verify":
                assert r.get("status") == "error" and "LockHeld" in str(r.get("error")), r
                refused += 1
            return refused >= 3 and r.get("kind") == "job_run_finished" and r.get("job") == "alerts"

        lines_until(proc, three_refusals_then_a_poll)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    paged = [a for a in alerts_of(received) if str(a["kind"]).startswith("job_")]
    assert len(paged) == 1, paged
    assert "an operator's restore" in str(paged[0]["message"])
