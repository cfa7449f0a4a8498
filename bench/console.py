"""The console's responsiveness, measured headless (Textual's run_test).

    python bench/console.py [--quick]

Rows:
  loop lag p50/p99 during a full-speed pass   demo data scaled up; a 5 ms ticker on
                                              the console's own loop measures how late
                                              it wakes while the pass runs
  start-up to first full paint                a 1,000,000-entry manifest (and its
                                              1,000,000 gzips on disk): construction to
                                              status, backlog and checkpoints painted
  findings: first shown / walk done            the same archive with a few orphans planted
                                              among its gzips: construction to the first
                                              walk finding in the findings pane, and to
                                              the whole walk (shown as it goes)
  restore browser: first page / filter        the catalog opened and its first page
                                              read; the slowest of a few typical
                                              filters (each one SQL statement)
  trends (the Trends screen's read)           Archiver.trends(30) on a 1,000,000-entry
                                              manifest archived over a year, 60 % of its
                                              gzips shipped (unbundled: one remote row
                                              each, the tiers' worst case), a fifth of
                                              those dropped here; a stats sample every
                                              5 minutes, a pass an hour; best of three

Targets: lag p99 < 25 ms, start-up < 1.5 s, first findings < 3 s, the browser's first
page < 0.5 s, filter < 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from report import Row, loop_lag, met, pct, print_table

from coldkeep.core.base.config import load_settings
from coldkeep.core.base.layout import Layout
from coldkeep.core.files.catalog import load_catalog, parse_query
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.ops.trends import read_trends
from coldkeep.core.store.manifest import Manifest
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.kit.messages import FindingsLoaded
from coldkeep.tui.console.kit.pilot import press, settle

PLANTED_ORPHANS = 10


class TimedApp(ColdkeepApp):
    """The console, noting when the findings walk first found something and
    when it ended (Textual runs this handler, then the app's own)."""

    first_found: float | None = None
    walk_done: float | None = None

    def on_findings_loaded(self, message: FindingsLoaded) -> None:
        rec, now = message.recovery, time.perf_counter()
        if self.first_found is None and (rec.orphans or rec.partials or rec.missing):
            self.first_found = now
        if not rec.walking:
            self.walk_done = now


async def _lag_during_pass(config: Path) -> tuple[list[float], float, int]:
    app = ColdkeepApp(load_settings(config), watch_live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        await press(pilot, "p")
        async with loop_lag() as lags:
            t0 = time.perf_counter()
            await press(pilot, "y")  # returns once the pass and its refreshes are done
            seconds = time.perf_counter() - t0
        files = app.status.last_passes[0].summary["files"]["archived"] if app.status else 0
    return lags, seconds, files


def lag_rows(work: Path, scale: float) -> list[Row]:
    site = write_demo(work / "lag", seed=11, scale=scale)
    lags, seconds, files = asyncio.run(_lag_during_pass(site.config))
    p99 = pct(lags, 99)
    return [
        (
            f"console loop lag p50 / p99 during a pass ({files} files, {seconds:.1f} s)",
            f"{pct(lags, 50):.1f} / {p99:.1f} ms",
            "",
            "",
            "p99 < 25 ms",
            met(p99 < 25),
        )
    ]


def big_manifest(work: Path, entries: int) -> Path:
    """A demo site whose archive holds ``entries`` entries and as many (empty) gzips."""
    site = write_demo(work / "big", seed=5, scale=0.02)
    db = site.archive / "coldkeep.db"

    async def create() -> None:
        async with await Manifest.open(db):
            pass

    asyncio.run(create())
    rnd = random.Random(5)
    files = site.archive / "files"
    rows = []
    for i in range(entries):
        unit = f"unit-{i % 5000:05d}"
        rel = f"{unit}/2026/part-{i // 5000:04d}.jsonl"
        gz = f"files/{rel}.gz"
        rows.append(
            (
                unit,
                rel,
                1000 + i,
                f"{rnd.getrandbits(256):064x}",
                gz,
                300,
                1_790_000_000_000_000_000,
                1,
                i + 10,
                0o100644,
                1_790_000_000_000,
                "archived",
                0,
            )
        )
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO entries (unit, relpath, bytes, sha256, gz_path, gz_bytes, mtime_ns, "
            "dev, ino, mode, archived_at, status, source_present) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    for unit in {r[0] for r in rows}:
        (files / unit / "2026").mkdir(parents=True, exist_ok=True)
    for r in rows:
        os.close(os.open(site.archive / r[4], os.O_CREAT | os.O_WRONLY, 0o600))
    # Orphans a crash might have left (gzips no entry names), anywhere in the walk.
    for k in range(PLANTED_ORPHANS):
        unit = f"unit-{rnd.randrange(min(entries, 5000)):05d}"
        orphan = files / unit / "2026" / f"orphan-{k}.jsonl.gz"
        os.close(os.open(orphan, os.O_CREAT | os.O_WRONLY, 0o600))
    return site.config


async def _startup(config: Path) -> tuple[float, float, float]:
    """Seconds to the first full paint, to the first walk finding, to the walk's end."""
    t0 = time.perf_counter()
    app = TimedApp(load_settings(config), watch_live=False)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
    assert app.ready_at and app.first_found and app.walk_done
    return app.ready_at - t0, app.first_found - t0, app.walk_done - t0


def manifest_rows(work: Path, entries: int) -> list[Row]:
    t0 = time.perf_counter()
    config = big_manifest(work, entries)
    built = time.perf_counter() - t0
    painted, found, walked = asyncio.run(_startup(config))
    manifest = load_settings(config).archive_root / "coldkeep.db"
    t0 = time.perf_counter()
    catalog = load_catalog(manifest)
    catalog.filter(parse_query(""))
    loaded = time.perf_counter() - t0
    worst = 0.0
    for text in ("unit-04242", "part-0150", "sha:ab", "status:stale", "unit:unit-00042 part-01"):
        t0 = time.perf_counter()
        catalog.filter(parse_query(text))
        worst = max(worst, time.perf_counter() - t0)
    n = f"{entries:,}"
    print(f"(built the {n}-entry archive in {built:.0f} s)")
    return [
        (
            f"console start-up to first full paint ({n} entries)",
            f"{painted:.2f} s",
            "",
            "",
            "< 1.5 s",
            met(painted < 1.5),
        ),
        (
            f"console findings: first shown (walk of {n} gzips)",
            f"{found:.2f} s",
            "",
            "",
            "< 3 s",
            met(found < 3),
        ),
        (f"console findings: the whole walk ({n})", f"{walked:.2f} s", "", "", "", ""),
        (
            f"restore browser: first page ({n})",
            f"{loaded * 1000:.0f} ms",
            "",
            "",
            "< 500 ms",
            met(loaded < 0.5),
        ),
        (
            f"restore browser: filter ({n}, worst of 5)",
            f"{worst * 1000:.0f} ms",
            "",
            "",
            "< 200 ms",
            met(worst < 0.2),
        ),
    ]


TRENDS_NOW_MS = 1_790_000_000_000
YEAR_MS = 365 * 86_400_000


def trends_manifest(work: Path, entries: int) -> Path:
    """An archive root whose manifest holds ``entries`` entries archived evenly
    over the year before TRENDS_NOW_MS (no gzips on disk: trends reads none)."""
    root = work / "trends"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    db = root / "coldkeep.db"

    async def create() -> None:
        async with await Manifest.open(db):
            pass

    asyncio.run(create())
    step = YEAR_MS // entries
    gz = [f"files/unit-{i % 5000:05d}/part-{i // 5000:05d}.jsonl.gz" for i in range(entries)]
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO entries (unit, relpath, bytes, sha256, gz_path, gz_bytes, mtime_ns, "
            "mode, archived_at, source_present) VALUES (?, ?, ?, ?, ?, ?, 1, 33188, ?, 0)",
            (
                (
                    p[6:16],
                    p[6:-3],
                    4000 + i % 997,
                    f"{i:064x}",
                    p,
                    900 + i % 97,
                    TRENDS_NOW_MS - YEAR_MS + i * step,
                )
                for i, p in enumerate(gz)
            ),
        )
        conn.executemany(
            "INSERT INTO remote_objects (path, bytes, sha256, shipped_at, local_gone_at, "
            "local_present) VALUES (?, 1, 'x', ?, ?, ?)",
            (
                (p, TRENDS_NOW_MS, TRENDS_NOW_MS if i % 5 == 0 else None, int(i % 5 != 0))
                for i, p in enumerate(gz[: entries * 6 // 10])
            ),
        )
        conn.executemany(
            "INSERT INTO stats (at, entries, bytes, gz_bytes, backlog_files, backlog_bytes, "
            "backlog_rows) VALUES (?, 0, 0, 0, ?, ?, 0)",
            ((TRENDS_NOW_MS - k * 300_000, k % 100, k * 1000) for k in range(365 * 288)),
        )
        conn.executemany(
            "INSERT INTO passes (started_at, finished_at, mode, origin, status) "
            "VALUES (?, ?, 'on', 'scheduler', 'ok')",
            (
                (TRENDS_NOW_MS - k * 3_600_000, TRENDS_NOW_MS - k * 3_600_000 + 60_000)
                for k in range(8760)
            ),
        )
    conn.close()
    return root


def trends_rows(work: Path, entries: int) -> list[Row]:
    root = trends_manifest(work, entries)

    async def read() -> float:
        async with await Manifest.open(root / "coldkeep.db", readonly=True) as manifest:
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                await read_trends(manifest, Layout(root), days=30, now_s=TRENDS_NOW_MS // 1000)
                best = min(best, time.perf_counter() - t0)
            return best

    took = asyncio.run(read())
    return [
        (
            f"trends at {entries:,} entries (30 days, best of 3)",
            f"{took * 1000:.0f} ms",
            "",
            "",
            "< 1.5 s (the Trends screen drawn)",
            met(took < 1.5),
        )
    ]


def measure(work: Path, quick: bool) -> list[Row]:
    rows = lag_rows(work, 0.05 if quick else 0.5)
    # Quick: every row measured on small data (the suite runs it; its numbers
    # are not the table's).
    rows += manifest_rows(work, 2_000 if quick else 1_000_000)
    rows += trends_rows(work, 2_000 if quick else 1_000_000)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, under a minute")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ck-console-"))
    try:
        print_table(measure(work, args.quick))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
