"""The read-only commands and the console on a manifest of 10,000,000 entries.

    python bench/scale.py [--entries N] [--quick] [--keep DIR]

The manifest's rows are written directly (SQL): a year of archiving, 95 % of
its entries shipped with their local copies dropped (the steady state of a site
that ships), the rest archived here and not shipped yet, each with an (empty)
gzip on disk for the walk to find.
The live tree is the demo's, so a pass has nothing to do but look. Each row is
one call of the core API (or the console's first full paint), timed in this
process, best of three; the CLI's own start-up is left out (bench/query.py
measures it).

Rows: status, plan, a pass with nothing to do, find (a substring, a glob),
expire's plan with files past a 360-day retention (the oldest 1.4 %), the
restore browser's first page and its slowest filter (with the index of paths,
and before it is there; its build, its check and its size), console start-up to its
first full paint and the peak RSS of its process (one of its own) by the time
its findings walk has seen every gzip, the
manifest's bytes per entry, and how long the schema migrations since 13 took
when the manifest was first opened (the rows are written before them: what an
upgrade costs a site of that size).

Targets: status < 1 s, plan, the no-op pass and expire's plan < 3 s, find < 1 s,
the browser's first page < 0.5 s and a filter < 200 ms, console start-up < 2 s,
RSS < 300 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mountkit import hwm_mb
from report import Row, met, print_table

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.layout import PATH_INDEX_NAME
from coldkeep.core.files.catalog import Catalog, load_catalog, parse_query
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.store.entries import read_entry_count
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.schema import SCHEMA_VERSION, migration_scripts
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.kit.pilot import settle
from coldkeep.tui.console.panes.orphans import OrphansPane

NOW_MS = 1_790_000_000_000
# The schema the rows are written at: the one before the totals' triggers.
BUILT_AT = 13
YEAR_MS = 365 * 86_400_000
UNITS = 5000
LOCAL = 20  # one entry in LOCAL is archived here and not shipped yet
TARGETS = {
    "status": 1.0,
    "plan": 3.0,
    "a pass with nothing to do": 3.0,
    "find a substring": 1.0,
    "find a glob": 1.0,
    "expire's plan": 3.0,
}
# The files past this retention: the oldest 1.4 % (a year of mtimes), a week's
# worth of expiries left undone.
RETAIN_DAYS = 360


def build(work: Path, entries: int) -> tuple[Path, float]:
    """A demo site whose manifest holds ``entries`` entries (see the module doc),
    and the seconds its migrations from BUILT_AT took. The rows are written at
    schema BUILT_AT (before the triggers that keep the totals: none fires per
    row), then the manifest is opened as an upgrade opens it: the migrations'
    own statements count them, as they would on a site that upgrades."""
    site = write_demo(work / "site", seed=7, scale=0.02)
    db = site.archive / "coldkeep.db"
    shipped = entries - entries // LOCAL
    with sqlite3.connect(db, isolation_level=None) as conn:
        for n, script in migration_scripts(0):
            if n <= BUILT_AT:
                conn.executescript(script)
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?) "
            "INSERT INTO entries (unit, relpath, bytes, sha256, gz_path, gz_bytes, mtime_ns, "
            "dev, ino, mode, archived_at, status, source_present) "
            "SELECT printf('unit-%05d', i % ?), printf('unit-%05d/%d/part-%06d.jsonl', i % ?, "
            "2025 + i % 2, i / ?), 1000 + i % 9000, lower(hex(randomblob(32))), "
            "printf('files/unit-%05d/%d/part-%06d.jsonl.gz', i % ?, 2025 + i % 2, i / ?), "
            "300, (? + i * ?) * 1000000, 1, i + 10, 33188, ? + i * ?, 'archived', 0 FROM n",
            [entries, *[UNITS] * 5, *[NOW_MS - YEAR_MS, YEAR_MS // entries] * 2],
        )
        conn.execute(
            "INSERT INTO remote_objects (path, bytes, sha256, shipped_at, local_gone_at, "
            "local_present) SELECT gz_path, gz_bytes, sha256, archived_at + 86400000, "
            "archived_at + 2 * 86400000, 0 FROM entries WHERE id <= ?",
            [shipped],
        )
        local = conn.execute("SELECT gz_path FROM entries WHERE id > ?", [shipped]).fetchall()
        conn.execute("PRAGMA journal_mode = WAL")
    for (gz,) in local:  # empty: the walk looks at names, a pass reads nothing
        path = site.archive / gz
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))

    async def upgrade() -> float:
        t0 = time.perf_counter()
        async with await Manifest.open(db):
            return time.perf_counter() - t0

    return site.config, asyncio.run(upgrade())


async def _best(call: Callable[[], Awaitable[Any]], times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        t0 = time.perf_counter()
        await call()
        best = min(best, time.perf_counter() - t0)
    return best


def _one(entries: int) -> str:
    return f"00042/2025/part-{entries // UNITS // 2:06d}"  # one file, its unit's middle


async def _find(config: Path, entries: int) -> float:
    archiver = Archiver(load_settings(config), clock=lambda: NOW_MS, serve_events=False)
    return await _best(lambda: archiver.find(_one(entries)))


async def _core(config: Path, entries: int) -> dict[str, float]:
    settings = load_settings(config)
    one = _one(entries)
    archiver = Archiver(settings, clock=lambda: NOW_MS, serve_events=False)
    retained = replace(settings, retention=replace(settings.retention, files_days=RETAIN_DAYS))
    expiring = Archiver(retained, clock=lambda: NOW_MS, serve_events=False)
    return {
        "status": await _best(archiver.status),
        "plan": await _best(archiver.plan),
        "a pass with nothing to do": await _best(archiver.run_pass),
        "find a substring": await _best(lambda: archiver.find(one)),
        "find a glob": await _best(lambda: archiver.find("unit-00042/2025/*.jsonl")),
        "expire's plan": await _best(expiring.expire_plan),
    }


async def _startup(config: Path) -> float:
    """The console's first full paint; then it runs on until the findings walk
    has ended (the archive's gzips all seen), which is where it holds the most."""
    t0 = time.perf_counter()
    app = ColdkeepApp(load_settings(config), watch_live=False, clock=lambda: NOW_MS)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert app.ready_at
        findings = app.query_one(OrphansPane)
        while findings.recovery is None or findings.recovery.walking:
            await pilot.pause(0.1)
    return app.ready_at - t0


def _console(config: Path) -> tuple[float, float]:
    """The console's first full paint, and its process's peak RSS (MiB) by the
    end of its findings walk, in a process of its own: this one has held the
    core calls' reads."""
    out = subprocess.run(
        [sys.executable, __file__, "--console", str(config)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return float(out[-2]), float(out[-1])


def _row(what: str, seconds: float, target: float) -> Row:
    return (what, f"{seconds:.2f} s", "", "", f"< {target:g} s", met(seconds < target))


FILTERS = ("unit:unit-04242", "part-000150", "sha:ab", "status:stale", "no-such-name")


@dataclass(frozen=True)
class Browser:
    first: float  # the catalog opened and its first page read
    unindexed: float  # the slowest of FILTERS before the index of paths is there
    indexed: float  # ... once it is
    prepared: float  # the index of paths built (the first time) or checked


def _slowest(catalog: Catalog) -> float:
    worst = 0.0
    for text in FILTERS:
        t0 = time.perf_counter()
        catalog.filter(parse_query(text))
        worst = max(worst, time.perf_counter() - t0)
    return worst


def _browser(db: Path) -> Browser:
    """The restore browser as the console runs it: the catalog opened and its
    first page read, filters typed at once (a rare word scans every path), the
    index of paths prepared (its worker, in the console), filters typed then."""
    t0 = time.perf_counter()
    catalog = load_catalog(db)
    catalog.filter(parse_query(""))
    first = time.perf_counter() - t0
    unindexed = _slowest(replace(catalog, paths=None))
    t0 = time.perf_counter()
    why = catalog.prepare()
    prepared = time.perf_counter() - t0
    assert why is None, why
    return Browser(first, unindexed, _slowest(catalog), prepared)


def built(work: Path, entries: int) -> tuple[Path, float | None]:
    """The site in ``work``: built, or the one a run with ``--keep`` left there
    (then no migration was timed)."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "site" / "coldkeep.toml"
    if config.exists():
        print(f"(reusing the site in {work})", flush=True)
        return config, None
    t0 = time.perf_counter()
    config, migrated = build(work, entries)
    print(f"(built the {entries:,}-entry manifest in {time.perf_counter() - t0:.0f} s)", flush=True)
    return config, migrated


def measure(work: Path, entries: int) -> list[Row]:
    config, migrated = built(work, entries)
    db = load_settings(config).archive_root / "coldkeep.db"
    with sqlite3.connect(db) as conn:
        entries = read_entry_count(conn)
    n = f"{entries:,}"
    index = db.with_name(PATH_INDEX_NAME)
    # find reads the index of paths where the console left one: first without it
    # (a site whose console never opened), then with it, built below.
    index.unlink(missing_ok=True)
    took = asyncio.run(_core(config, entries))
    painted, rss = min(_console(config) for _ in range(2))
    index.unlink(missing_ok=True)  # its build is measured, then its check
    built_index, browser = _browser(db), _browser(db)
    per = db.stat().st_size / entries
    unindexed_find = took.pop("find a substring")
    indexed_find = asyncio.run(_find(config, entries))
    rows = [_row(f"{k} ({n} entries)", v, TARGETS[k]) for k, v in took.items()]
    return [
        *rows,
        _row(
            f"find a substring ({n} entries, the index of paths there)",
            indexed_find,
            TARGETS["find a substring"],
        ),
        _row(
            f"find a substring ({n} entries, before any console made the index of paths)",
            unindexed_find,
            TARGETS["find a substring"],
        ),
        _row(f"restore browser at {n}: first page", min(built_index.first, browser.first), 0.5),
        _row(
            f"restore browser at {n}: filter, worst of {len(FILTERS)}",
            min(built_index.indexed, browser.indexed),
            0.2,
        ),
        (
            f"restore browser at {n}: filter before the index of paths is there",
            f"{min(built_index.unindexed, browser.unindexed):.2f} s",
            "",
            "",
            "",
            "",
        ),
        (
            f"restore browser at {n}: index of paths built once / checked when opened",
            f"{built_index.prepared:.1f} / {browser.prepared:.2f} s",
            "",
            "",
            "",
            "",
        ),
        (
            f"restore browser at {n}: index of paths, size per entry",
            f"{index.stat().st_size / entries:.0f} B",
            "",
            "",
            "",
            "",
        ),
        _row(f"console start-up to first full paint ({n})", painted, 2.0),
        (f"console peak RSS ({n})", f"{rss:.0f} MiB", "", "", "< 300 MB", met(rss < 286)),
        (f"manifest size per entry ({n})", f"{per:.0f} B", "", "", "< 1 KiB", met(per < 1024)),
        (
            f"the schema migrations on upgrade from {BUILT_AT} to {SCHEMA_VERSION} ({n})",
            "reused" if migrated is None else f"{migrated:.1f} s",
            "",
            "",
            "stated",
            "",
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=10_000_000)
    ap.add_argument("--quick", action="store_true", help="5,000 entries, seconds")
    ap.add_argument(
        "--keep", type=Path, help="build the site in this folder and keep it; reuse it if there"
    )
    ap.add_argument("--console", type=Path, help=argparse.SUPPRESS)  # one console run
    args = ap.parse_args()
    if args.console:
        painted = asyncio.run(_startup(args.console))
        # VmHWM, not ru_maxrss: Linux carries the high-water mark across exec,
        # and this process was started by the bench's, which had just held
        # every core call's reads (ru_maxrss said 336 MiB here for 167).
        print(painted, hwm_mb(os.getpid()))
        return
    if args.keep:
        print_table(measure(args.keep, 5_000 if args.quick else args.entries))
        return
    work = Path(tempfile.mkdtemp(prefix="ck-scale-"))
    try:
        print_table(measure(work, 5_000 if args.quick else args.entries))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
