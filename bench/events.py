"""The event move, against the one-shot SQL an operator would otherwise run.

    python bench/events.py [--rows 1000000 ...] [--rate 200] [--runs N]
                           [--against OTHER_PYTHON]

Builds a live state DB (the demo generator's, scaled to --rows), copies it for
each run, and on each copy runs a writer process (tests/appwriter.py: inserts
and updates, one short transaction each, at --rate writes/s) while moving the
eligible rows:

  coldkeep   dbmove.move_events in a child process: batches, month DBs,
             PASSIVE checkpoints
  one-shot   the sqlite3 CLI: ATTACH an archive DB, then INSERT … SELECT and
             DELETE in one transaction
  against    (--against) the same child, run by another Python whose
             ``coldkeep`` is other code (another checkout's .venv/bin/python)

and prints one table per size: rows/s, the writer's commit latency p50/p99
during the move, and the WAL's peak size. With --runs N the contenders take
turns N times, each on a fresh copy (the order alternating), and each one's
best run is shown: on a shared machine only numbers from the same run compare.
Targets: coldkeep at >= 0.9 of the one-shot rows/s at 1M and 10M rows, with
writer p99 <= 25 ms and the WAL under 64 MB; with several --rows, the largest
size's rows/s within 10 % of the smallest's.
"""

from __future__ import annotations

import argparse
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


# The move, in a child process: ours and --against's run the very same way, their
# imports outside the time. argv: the settings (JSON), the config's path, now_ms.
CHILD = """
import asyncio, json, sys, time
from pathlib import Path
from coldkeep.core.base.config import parse_settings
from coldkeep.core.events.dbmove import move_events
raw, where, now_ms = json.loads(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
cfg = parse_settings(raw, where)
events = Path(raw["archive_root"]) / "events"
t0 = time.monotonic()
report = asyncio.run(move_events(cfg, events, now_ms=now_ms))
t1 = time.monotonic()
print(json.dumps({"moved": report.moved, "t0": t0, "t1": t1}))
"""


def run_coldkeep(
    base: Path,
    db: Path,
    rate: float,
    max_id: int,
    now_ms: int,
    events: dict[str, Any],
    python: str = sys.executable,
) -> Run:
    (base / "live").mkdir()
    raw = {
        "live_root": str(base / "live"),
        "archive_root": str(base / "archive"),
        "state_db": str(db),
        "events": {"min_age_days": MIN_AGE_DAYS, "kinds": list(ARCHIVED_KINDS), **events},
    }
    parse_settings(raw, base / "coldkeep.toml")  # a typo in --set fails here, before the run
    # The copies just made are ~200 MB of dirty pages: flushed during the run,
    # they stalled the writer's commits for 50-70 ms (ext4 journal). Each run
    # starts from a clean page cache.
    os.sync()
    writer = Writer(db, rate, max_id)
    watch = WalWatch(db)
    child = subprocess.run(
        [python, "-c", CHILD, json.dumps(raw), str(base / "coldkeep.toml"), str(now_ms)],
        capture_output=True,
        text=True,
        check=False,
    )
    peak = watch.stop()
    if child.returncode:
        writer.stop(0, 0)
        raise SystemExit(f"{python}: the move failed:\n{child.stderr}")
    said = json.loads(child.stdout.splitlines()[-1])
    t0, t1 = said["t0"], said["t1"]
    during, errors = writer.stop(t0, t1)
    return Run(said["moved"], t1 - t0, pct(during, 50), pct(during, 99), peak, errors)


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


def table(ck: Run, one: Run | None, against: Run | None = None) -> list[Row]:
    """The rows; without the sqlite3 CLI (``one`` None) the anchor columns say so."""
    mb = 1 << 20
    na = "no sqlite3 CLI"
    ratio = ck.rows_per_s / one.rows_per_s if one else None
    rows: list[Row] = []
    if against is not None:
        rows.append(
            (
                "event move rows/s (vs --against, same run)",
                f"{ck.rows_per_s:,.0f}",
                f"{against.rows_per_s:,.0f}",
                f"{ck.rows_per_s / against.rows_per_s:.2f}",
                "",
                "",
            )
        )
        if one is not None:
            rows.append(
                (
                    "  --against vs the one-shot (ratio), writer p99 (ms)",
                    f"{against.p99:.1f}",
                    f"{one.rows_per_s:,.0f}",
                    f"{against.rows_per_s / one.rows_per_s:.2f}",
                    "",
                    "",
                )
            )
    return [
        *rows,
        (
            "event move rows/s",
            f"{ck.rows_per_s:,.0f}",
            f"{one.rows_per_s:,.0f}" if one else na,
            f"{ratio:.2f}" if ratio is not None else "",
            ">= 0.90",
            met(ratio >= 0.9) if ratio is not None else "?",
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


def measure(
    rows: int,
    rate: float,
    work: Path,
    events: dict[str, Any] | None = None,
    *,
    runs: int = 1,
    against: str | None = None,
) -> tuple[list[Row], Run]:
    """The table for one size, and coldkeep's best run."""
    now_ms = time.time_ns() // 1_000_000
    src = work / "state.db"
    write_state_db(src, random.Random(11), now_ms, rows / 500_000)
    eligible = count_eligible(src, now_ms)
    print(f"live DB: {rows:,} rows, {eligible:,} eligible; writer at {rate:g} writes/s", flush=True)
    contenders: list[str] = ["coldkeep"]
    if against is not None:
        contenders.append("against")
    if shutil.which("sqlite3"):
        contenders.append("one-shot")
    best: dict[str, Run] = {}
    pairs: list[float] = []  # coldkeep / --against, turn by turn
    for turn in range(runs):
        speed: dict[str, float] = {}
        for name in contenders if turn % 2 == 0 else contenders[::-1]:
            base = work / f"{name}-{turn}"
            base.mkdir()
            db = base / "state.db"
            shutil.copy(src, db)
            if name == "one-shot":
                run = run_oneshot(base, db, rate, rows, now_ms)
            else:
                python = sys.executable if name == "coldkeep" else str(against)
                run = run_coldkeep(base, db, rate, rows, now_ms, events or {}, python)
            shutil.rmtree(base)
            print(
                f"  run {turn + 1} {name:8}: {run.rows_per_s:>10,.0f} rows/s, "
                f"p99 {run.p99:.1f} ms, WAL {run.wal_peak / (1 << 20):.1f} MB",
                flush=True,
            )
            if name not in best or run.rows_per_s > best[name].rows_per_s:
                best[name] = run
            speed[name] = run.rows_per_s
        if against is not None:
            pairs.append(speed["coldkeep"] / speed["against"])
    if pairs:
        turns = " ".join(f"{r:.2f}" for r in pairs)
        print(f"  coldkeep / --against, turn by turn: {turns} (median {pct(pairs, 50):.2f})")
    ck = best["coldkeep"]
    return table(ck, best.get("one-shot"), best.get("against")), ck


def at_two_sizes(small: int, large: int, rate: float, work: Path) -> list[Row]:
    """The table at ``small`` rows, the same rows at ``large`` (their labels
    naming the size), and whether the large run's rows/s is within 10 % of the
    small one's."""
    for size in ("small", "large"):
        (work / size).mkdir()
    first, ck_small = measure(small, rate, work / "small")
    second, ck_large = measure(large, rate, work / "large")
    return [
        *first,
        *((f"{r[0]} ({large:,} rows)", *r[1:]) for r in second),
        scaling(small, ck_small.rows_per_s, large, ck_large.rows_per_s),
    ]


def scaling(small: int, small_speed: float, large: int, large_speed: float) -> Row:
    """Whether the move at ``large`` rows keeps within 10 % of its rows/s at ``small``."""
    drop = 1 - large_speed / small_speed
    return (
        f"event move rows/s, {large:,} vs {small:,} rows",
        f"{large_speed:,.0f}",
        f"{small_speed:,.0f}",
        f"{-drop:+.0%}",
        "within 10 %",
        met(abs(drop) <= 0.1),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, action="append", help="repeatable (default 1000000)")
    ap.add_argument("--rate", type=float, default=200.0, help="writer writes per second")
    ap.add_argument("--runs", type=int, default=1, help="turns per contender; the best shown")
    ap.add_argument(
        "--against",
        metavar="OTHER_PYTHON",
        help="also run the move with this Python's coldkeep (e.g. another checkout's "
        ".venv/bin/python), side by side",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an [events] setting for coldkeep, e.g. batch_rows=4000 (repeatable)",
    )
    args = ap.parse_args()
    events = {k: json.loads(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    sizes = args.rows or [1_000_000]
    speeds: list[float] = []
    for rows in sizes:
        with tempfile.TemporaryDirectory(dir=ROOT / "bench") as tmp:
            table_rows, ck = measure(
                rows, args.rate, Path(tmp), events, runs=args.runs, against=args.against
            )
        print_table(table_rows)
        speeds.append(ck.rows_per_s)
    if len(sizes) > 1:
        print_table([scaling(sizes[0], speeds[0], sizes[-1], speeds[-1])])


if __name__ == "__main__":
    main()
