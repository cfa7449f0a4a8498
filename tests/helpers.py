"""Test helpers: real temporary trees and realistic data."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from coldkeep.core.layout import Layout

DAY_NS = 86_400 * 1_000_000_000


@dataclass
class Roots:
    """A live tree and an archive root side by side in a temp dir."""

    base: Path
    live: Path
    archive: Path

    @property
    def layout(self) -> Layout:
        return Layout(self.archive)

    def write(self, relpath: str, data: bytes, *, age_days: float = 30.0) -> Path:
        path = self.live / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        mtime = time.time_ns() - int(age_days * DAY_NS)
        os.utime(path, ns=(mtime, mtime))
        return path


def jsonl(n_lines: int, seed: int = 0) -> bytes:
    """Realistic-looking event lines: compressible, not trivially so."""
    rnd = random.Random(seed)
    kinds = ["webhook_event", "ci_completed", "recheck_noop", "pr_closed"]
    return "".join(
        f'{{"id":{i},"ts":{1_700_000_000_000 + i * 977},"kind":"{rnd.choice(kinds)}",'
        f'"repo":"org/r{rnd.randint(1, 40)}","sha":"{rnd.getrandbits(160):040x}"}}\n'
        for i in range(n_lines)
    ).encode()


def gunzip(path: Path) -> bytes:
    """The system's gunzip, as an operator would check."""
    import subprocess

    return subprocess.run(["gunzip", "-c", str(path)], check=True, capture_output=True).stdout


DAY_MS = 86_400_000
ARCHIVABLE = ("webhook_event", "ci_completed", "recheck_noop")
LIVE_ONLY = ("pr_closed", "anomaly")


def make_events_db(
    path: Path,
    n: int,
    *,
    now_ms: int,
    wal: bool = True,
    index: bool = True,
    seed: int = 1,
    days: int = 120,
) -> None:
    """A live state DB with ``n`` events spread over ``days`` days, ids in time order."""
    import sqlite3

    rnd = random.Random(seed)
    db = sqlite3.connect(path)
    if wal:
        db.execute("PRAGMA journal_mode = WAL")
    db.execute(
        "CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER, kind TEXT NOT NULL, "
        "payload TEXT, n REAL)"
    )
    if index:
        db.execute("CREATE INDEX events_kind_ts ON events (kind, ts)")
    start = now_ms - days * DAY_MS
    step = days * DAY_MS // max(n, 1)
    kinds = ARCHIVABLE + LIVE_ONLY
    with db:
        db.executemany(
            "INSERT INTO events (ts, kind, payload, n) VALUES (?, ?, ?, ?)",
            (
                (start + i * step, kinds[i % len(kinds)], f"p{rnd.getrandbits(40):x}", i / 7)
                for i in range(n)
            ),
        )
    db.close()


def all_event_rows(live: Path, events_dir: Path) -> list[tuple[object, ...]]:
    """Every row in live and in every month DB (a multiset, as a sorted list)."""
    import sqlite3

    rows: list[tuple[object, ...]] = []
    for db_path in [live, *sorted(events_dir.glob("*.db"))]:
        with sqlite3.connect(db_path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",), db_path
            rows.extend(db.execute("SELECT id, ts, kind, payload, n FROM events"))
    return sorted(rows, key=repr)
