"""The event move, against the one-shot SQL an operator would otherwise run.

    python bench/events.py [--rows 1000000] [--rate 200]

Builds a live state DB (the demo generator's, scaled to --rows), copies it twice,
and on each copy runs a writer process (tests/appwriter.py: inserts and updates,
one short transaction each, at --rate writes/s) while moving the eligible rows:

  coldkeep   dbmove.move_events: batches, month DBs, PASSIVE checkpoints
  one-shot   the sqlite3 CLI: ATTACH an archive DB, then INSERT … SELECT and
             DELETE in one transaction

and prints one table: rows/s, the writer's commit latency p50/p99 during the
move, and the WAL's peak size. Targets: coldkeep at >= 50 % of the one-shot
rows/s, with writer p99 <= 25 ms and the WAL under 64 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WRITER = ROOT / "tests" / "appwriter.py"

from report import Row, met, pct, print_table  # noqa: E402

from coldkeep.core.base.config import parse_settings  # noqa: E402
from coldkeep.core.events.checkpoint import wal_bytes  # noqa: E402
from coldkeep.core.events.dbmove import move_events  # noqa: E402
from coldkeep.core.ops.demo import ARCHIVED_KINDS, write_state_db  # noqa: E402

MIN_AGE_DAYS = 30


@dataclass
class Run:
    rows: int
    seconds: float
    p50: float
    p99: float
    wal_peak: int
    writer_errors: int

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds


class Writer:
    """The application, writing while we move; latency counted only during the move."""

    def __init__(self, db: Path, rate: float, max_id: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(db), str(rate), str(max_id), "5"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == "started\n"

    def stop(self, t0: float, t1: float) -> tuple[list[float], int]:
        """The commit latencies of writes in flight at any time between t0 and t1
        (monotonic, system-wide), and the number of failed writes."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        said = json.loads(self.proc.stdout.readline())
        self.proc.wait()
        during = [ms for at, ms in said["latencies_ms"] if at <= t1 and at + ms / 1000 >= t0]
        return during, len(said["errors"])


class WalWatch:
    def __init__(self, db: Path) -> None:
        self.db = db
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, wal_bytes(self.db))

    def stop(self) -> int:
        self._stop.set()
        self._t.join()
        return self.peak


def eligible_where(now_ms: int) -> str:
    kinds = ", ".join(f"'{k}'" for k in ARCHIVED_KINDS)
    cutoff = now_ms - MIN_AGE_DAYS * 86_400_000
    return f"kind IN ({kinds}) AND ts < {cutoff} AND id < (SELECT max(id) FROM events)"


def count_eligible(db: Path, now_ms: int) -> int:
    with sqlite3.connect(db) as c:
        return int(
            c.execute(f"SELECT count(*) FROM events WHERE {eligible_where(now_ms)}").fetchone()[0]
        )


def run_coldkeep(
    base: Path, db: Path, rate: float, max_id: int, now_ms: int, events: dict[str, Any]
) -> Run:
    (base / "live").mkdir()
    cfg = parse_settings(
        {
            "live_root": str(base / "live"),
            "archive_root": str(base / "archive"),
            "state_db": str(db),
            "events": {"min_age_days": MIN_AGE_DAYS, "kinds": list(ARCHIVED_KINDS), **events},
        },
        base / "coldkeep.toml",
    )
    # The copies just made are ~200 MB of dirty pages: flushed during the run,
    # they stalled the writer's commits for 50-70 ms (ext4 journal). Each run
    # starts from a clean page cache.
    os.sync()
    writer = Writer(db, rate, max_id)
    watch = WalWatch(db)
    t0 = time.monotonic()
    report = asyncio.run(move_events(cfg, base / "archive" / "events", now_ms=now_ms))
    t1 = time.monotonic()
    peak = watch.stop()
    during, errors = writer.stop(t0, t1)
    return Run(report.moved, t1 - t0, pct(during, 50), pct(during, 99), peak, errors)


def run_oneshot(base: Path, db: Path, rate: float, max_id: int, now_ms: int) -> Run:
    rows = count_eligible(db, now_ms)
    with sqlite3.connect(db) as c:
        ddl = c.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()[0]
    archive = base / "oneshot-archive.db"
    where = eligible_where(now_ms)
    script = (
        ".timeout 5000\n"
        f"ATTACH '{archive}' AS arc;\n"
        f"{ddl.replace('CREATE TABLE events', 'CREATE TABLE arc.events', 1)};\n"
        "BEGIN IMMEDIATE;\n"
        f"INSERT INTO arc.events SELECT * FROM main.events WHERE {where};\n"
        f"DELETE FROM main.events WHERE {where};\n"
        "COMMIT;\n"
    )
    os.sync()
    writer = Writer(db, rate, max_id)
    watch = WalWatch(db)
    t0 = time.monotonic()
    subprocess.run(["sqlite3", str(db)], input=script, text=True, check=True)
    t1 = time.monotonic()
    peak = watch.stop()
    during, errors = writer.stop(t0, t1)
    return Run(rows, t1 - t0, pct(during, 50), pct(during, 99), peak, errors)


def table(ck: Run, one: Run | None) -> list[Row]:
    """The rows; without the sqlite3 CLI (``one`` None) the anchor columns say so."""
    mb = 1 << 20
    na = "no sqlite3 CLI"
    ratio = ck.rows_per_s / one.rows_per_s if one else None
    return [
        (
            "event move rows/s",
            f"{ck.rows_per_s:,.0f}",
            f"{one.rows_per_s:,.0f}" if one else na,
            f"{ratio:.2f}" if ratio is not None else "",
            ">= 0.50",
            met(ratio >= 0.5) if ratio is not None else "?",
        ),
        (
            "writer commit p50 / p99 (ms)",
            f"{ck.p50:.1f} / {ck.p99:.1f}",
            f"{one.p50:.1f} / {one.p99:.1f}" if one else na,
            "",
            "p99 <= 25",
            met(ck.p99 <= 25),
        ),
        (
            "WAL peak (MB)",
            f"{ck.wal_peak / mb:.1f}",
            f"{one.wal_peak / mb:.1f}" if one else na,
            "",
            "< 64",
            met(ck.wal_peak < 64 * mb),
        ),
        (
            "writer errors",
            str(ck.writer_errors),
            str(one.writer_errors) if one else na,
            "",
            "0",
            met(ck.writer_errors == 0),
        ),
    ]


def measure(rows: int, rate: float, work: Path, events: dict[str, Any] | None = None) -> list[Row]:
    now_ms = time.time_ns() // 1_000_000
    src = work / "state.db"
    write_state_db(src, random.Random(11), now_ms, rows / 500_000)
    for name in ("ck", "one"):
        (work / name).mkdir()
        shutil.copy(src, work / name / "state.db")
    eligible = count_eligible(src, now_ms)
    print(f"live DB: {rows:,} rows, {eligible:,} eligible; writer at {rate:g} writes/s", flush=True)
    ck = run_coldkeep(work / "ck", work / "ck" / "state.db", rate, rows, now_ms, events or {})
    one = None
    if shutil.which("sqlite3"):
        one = run_oneshot(work / "one", work / "one" / "state.db", rate, rows, now_ms)
    return table(ck, one)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rate", type=float, default=200.0, help="writer writes per second")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an [events] setting for coldkeep, e.g. batch_rows=4000 (repeatable)",
    )
    args = ap.parse_args()
    events = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    with tempfile.TemporaryDirectory(dir=ROOT / "bench") as tmp:
        print_table(measure(args.rows, args.rate, Path(tmp), events))


if __name__ == "__main__":
    main()
