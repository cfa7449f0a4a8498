"""``coldkeep demo DIR``: a realistic site to try coldkeep on, deterministic by seed.

    DIR/live/<unit>/**/*.jsonl   a few hundred units of JSONL event logs, 1 KiB to
                                 tens of MiB, mtimes spread over six months; most
                                 units closed (a ``.closed`` marker), some open
    DIR/state.db                 the application's SQLite database (WAL): an
                                 ``events`` table of ~500,000 rows over 12 months,
                                 archivable and live kinds mixed
    DIR/archive/                 an archive with crash leftovers planted in it: a
                                 ``.partial``, an adoptable orphan, a stale gzip
                                 (an earlier version) and a corrupt one
    DIR/coldkeep.toml            a config pointing at all of it, ``mode = "on"``,
                                 shipping to the folder ``DIR/remote`` (``coldkeep ship``)
    DIR/archive/coldkeep.db      with ``history_days``: that many days of what the
                                 scheduler records, a pass each night (its time) and
                                 a backlog sample each day, so the Trends screen has
                                 weeks to chart; no entry (nothing is archived yet)

Every pane of the console has something to show on first start. ``scale`` shrinks
or grows everything (tests use a small one). Without ``history_days`` no
coldkeep.db is written: the first pass is pass 1.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..base import times
from ..base.cancel import CancelToken
from ..base.codec import Codec, compress_fd
from ..base.layout import Layout, partial_of
from ..base.times import DAY_MS, NS_PER_MS
from ..store import passlog, sitestate, stats
from ..store.manifest import Manifest

# The demo application's kinds: those nothing reads back and that come in volume
# are archived (its config names them in events.kinds); the others stay live.
ARCHIVED_KINDS = (
    "base_advanced",
    "ci_completed",
    "exec_policy_violation",
    "pingpong_decision_failed",
    "recheck_noop",
    "reconcile_pass",
    "wakes_stranded",
    "webhook_event",
)
LIVE_KINDS = ("pr_closed", "verdict_applied", "head_push", "anomaly", "comment_sweep")
_WORDS = [
    "queued",
    "started",
    "finished",
    "retry",
    "timeout",
    "merged",
    "rebased",
    "approved",
    "rejected",
    "skipped",
    "webhook",
    "push",
    "check",
    "suite",
    "run",
    "job",
    "step",
    "cache",
    "hit",
    "miss",
    "lint",
    "test",
    "build",
    "deploy",
]


@dataclass(frozen=True)
class DemoSite:
    root: Path
    config: Path
    live: Path
    archive: Path
    state_db: Path
    files: int
    bytes: int
    events: int


_KINDS = ARCHIVED_KINDS + LIVE_KINDS


def _line_pool(rnd: random.Random, unit: str) -> list[str]:
    """The tails of a unit's event lines (everything after the time stamp)."""
    pool = []
    for _ in range(256):
        msg = " ".join(rnd.choices(_WORDS, k=rnd.randint(3, 14)))
        pool.append(
            f'"kind":"{rnd.choice(_KINDS)}","unit":"{unit}","run":{rnd.randint(1, 99999)},'
            f'"sha":"{rnd.getrandbits(64):016x}","msg":"{msg}"}}\n'
        )
    return pool


def write_jsonl(path: Path, rnd: random.Random, unit: str, size: int, mtime_ms: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    pool = _line_pool(rnd, unit)
    n_lines = max(1, size // 160)
    steps = rnd.choices(range(50, 5000), k=n_lines)
    tails = rnd.choices(pool, k=n_lines)
    ts = mtime_ms - sum(steps)
    out: list[str] = []
    for step, tail in zip(steps, tails, strict=True):
        ts += step
        out.append(f'{{"ts":{ts},{tail}')
    data = "".join(out).encode()
    path.write_bytes(data)
    os.utime(path, ns=(mtime_ms * NS_PER_MS, mtime_ms * NS_PER_MS))
    return len(data)


def _size(rnd: random.Random) -> int:
    # Log-uniform from 1 KiB to 1 MiB: most logs are small, a few are not.
    return int(2 ** rnd.uniform(10, 20))


def write_live(live: Path, rnd: random.Random, now_ms: int, scale: float) -> tuple[int, int]:
    units = max(8, int(240 * scale))
    files = total = 0
    for u in range(units):
        unit = f"unit-{u:04d}"
        age_days = rnd.uniform(0, 180)
        # A few old, closed units always, so even a tiny demo has something to do.
        closed = u < 3 or (age_days > 10 and rnd.random() < 0.8)
        if u < 3:
            age_days = max(age_days, 30)
        for f in range(rnd.randint(1, 6)):
            sub = rnd.choice(["", "runs/", "logs/"])
            ext = "jsonl" if rnd.random() < 0.85 else "log"
            mtime = now_ms - int((age_days + rnd.uniform(0, 20)) * DAY_MS)
            total += write_jsonl(
                live / unit / f"{sub}part-{f:02d}.{ext}", rnd, unit, _size(rnd), mtime
            )
            files += 1
        if closed:
            (live / unit / ".closed").write_text("closed\n")
    # A few big ones, tens of MiB, in closed, old units.
    for i, mib in enumerate((12, 24, 40)):
        unit = f"bulk-{i}"
        size = max(1 << 16, int(mib * (1 << 20) * scale))
        total += write_jsonl(
            live / unit / "firehose.jsonl", rnd, unit, size, now_ms - (60 + i) * DAY_MS
        )
        (live / unit / ".closed").write_text("closed\n")
        files += 1
    # Files directly in live_root belong to the unit "."
    total += write_jsonl(live / "daemon.log", rnd, ".", 1 << 14, now_ms - 40 * DAY_MS)
    return files + 1, total


def write_state_db(path: Path, rnd: random.Random, now_ms: int, scale: float) -> int:
    n = max(1000, int(500_000 * scale))
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(
            "CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL, "
            "kind TEXT NOT NULL, unit TEXT NOT NULL, payload TEXT NOT NULL)"
        )
        db.execute("CREATE INDEX events_kind_ts ON events (kind, ts)")
        archivable = list(ARCHIVED_KINDS)
        start = now_ms - 365 * DAY_MS
        step = 365 * DAY_MS // n

        # Three rows in four are of an archivable kind.
        weights = [3 / len(archivable)] * len(archivable) + [1 / len(LIVE_KINDS)] * len(LIVE_KINDS)
        kinds = rnd.choices(archivable + list(LIVE_KINDS), weights=weights, k=n)
        units = rnd.choices([f"unit-{u:04d}" for u in range(240)], k=n)
        pool = [
            json.dumps({"run": rnd.randint(1, 99999), "ok": rnd.random() < 0.9}) for _ in range(997)
        ]
        payloads = rnd.choices(pool, k=n)
        stamps = (start + i * step + rnd.randrange(step) for i in range(n))

        with db:
            db.executemany(
                "INSERT INTO events (ts, kind, unit, payload) VALUES (?, ?, ?, ?)",
                zip(stamps, kinds, units, payloads, strict=False),
            )
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    return n


def _plant_gzip(live_file: Path, gz: Path, data: bytes | None = None) -> None:
    """A gzip the way coldkeep writes one (name, mtime), of the file or of ``data``."""
    gz.parent.mkdir(parents=True, exist_ok=True)
    src = live_file
    if data is not None:
        src = gz.with_name(gz.name + ".src")
        src.write_bytes(data)
    fd = os.open(src, os.O_RDONLY)
    try:
        compress_fd(
            fd,
            gz,
            name=os.fsencode(live_file.name),
            mtime_ns=live_file.stat().st_mtime_ns,
            mode=live_file.stat().st_mode,
            codec=Codec(),
            cancel=CancelToken(),
        )
    finally:
        os.close(fd)
    if data is not None:
        src.unlink()
    mtime = live_file.stat().st_mtime_ns
    os.utime(gz, ns=(mtime, mtime))


def plant_leftovers(live: Path, archive: Path, rnd: random.Random) -> None:
    """What a crashed or older coldkeep would leave: one of each."""
    closed = sorted(p for p in live.glob("unit-*/*.jsonl") if (p.parent / ".closed").exists())
    small = [p for p in closed if p.stat().st_size < (1 << 18)]
    orphan, stale, corrupt = rnd.sample(small if len(small) >= 3 else closed, 3)
    layout = Layout(archive)

    def gz_of(p: Path) -> Path:
        return layout.gz_for(p.relative_to(live).as_posix())

    _plant_gzip(orphan, gz_of(orphan))  # an adoptable orphan: the live file's bytes
    _plant_gzip(stale, gz_of(stale), b'{"ts":0,"kind":"an earlier version"}\n')
    _plant_gzip(corrupt, gz_of(corrupt))
    with gz_of(corrupt).open("r+b") as f:  # one flipped byte in the deflate stream
        f.seek(max(20, f.seek(0, 2) // 2))
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x55]))
    partial = partial_of(layout.gz_for("unit-0000/interrupted.jsonl"))
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_bytes(b"\x1f\x8b\x08\x08half a gzip")


_KINDS_LINE = "kinds = [\n" + "".join(f'    "{k}",\n' for k in ARCHIVED_KINDS) + "]"
CONFIG = f"""\
# coldkeep demo site: see docs/config.md for every key.
live_root = "live"
archive_root = "archive"
state_db = "state.db"
mode = "on"
hold_days = 7

[files]
include = ["**/*.jsonl", "**/*.log"]
min_age_days = 14
unit_closed = "marker:.closed"

[events]
table = "events"
kind_column = "kind"
ts_column = "ts"
# The kinds archived (leave kinds out to archive every kind); the others stay live.
{_KINDS_LINE}
min_age_days = 30
batch_rows = 2600

# The remote tier: a folder inside the demo stands in for a bucket.
[remote]
url = "file:remote"
site = "demo"
"""


# The passes the demo's history records: what a summary says of them.
HISTORY_NOTE = "recorded by coldkeep demo: a night's pass for the Trends screen (nothing archived)"


async def write_history(
    archive: Path, rnd: random.Random, now_ms: int, days: int, backlog: tuple[int, int, int]
) -> None:
    """``days`` days before ``now_ms`` as the scheduler records them in the
    manifest under ``archive``: a pass each night (02:00 UTC and a few minutes,
    its duration growing with the backlog, one in a while failed) and a stats
    sample each morning, the backlog (``backlog``: files, bytes, event rows as
    they are now) growing to today's."""
    today = now_ms // DAY_MS * DAY_MS
    async with await Manifest.open(Layout(archive).manifest) as manifest:
        # The seed's, not a random one: the same seed, the same site.
        await sitestate.adopt_id(manifest, f"{rnd.getrandbits(128):032x}")
        for k in range(days, 0, -1):
            day = today - k * DAY_MS
            grown = (0.45 + 0.55 * (days - k) / days) * rnd.uniform(0.93, 1.07)
            files, size, rows = (int(n * grown) for n in backlog)
            start = day + 2 * 3_600_000 + rnd.randrange(600_000)
            took = int((20 + 80 * grown) * 1000 * rnd.uniform(0.8, 1.25))
            status = "failed" if rnd.random() < 0.05 else "ok"
            pass_id = await passlog.start(manifest, "on", "demo", start)
            await passlog.finish(manifest, pass_id, status, {"note": HISTORY_NOTE}, start + took)
            sample = {"entries": 0, "bytes": 0, "gz_bytes": 0}
            sample |= {"backlog_files": files, "backlog_bytes": size, "backlog_rows": rows}
            await stats.record(manifest, day + 6 * 3_600_000, sample)


def write_demo(
    root: Path,
    *,
    seed: int = 7,
    scale: float = 1.0,
    now_ms: int | None = None,
    history_days: int = 0,
) -> DemoSite:
    """Write a demo site into ``root`` (which must be empty or absent). The same
    seed and ``now_ms`` give the same bytes; ``history_days``: that many days
    of passes and backlog samples in a coldkeep.db."""
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty; give a new directory for the demo")
    rnd = random.Random(seed)
    now = now_ms if now_ms is not None else times.now_ms()
    live, archive, state = root / "live", root / "archive", root / "state.db"
    live.mkdir(parents=True)
    archive.mkdir()
    files, size = write_live(live, rnd, now, scale)
    events = write_state_db(state, rnd, now, scale)
    plant_leftovers(live, archive, rnd)
    if history_days:
        # The backlog now, roughly: the closed units' part of the tree, and the
        # archivable rows older than a month.
        backlog = (files * 2 // 3, size * 2 // 3, events * 3 // 4 * 11 // 12)
        asyncio.run(write_history(archive, rnd, now, history_days, backlog))
    config = root / "coldkeep.toml"
    config.write_text(CONFIG)
    return DemoSite(root, config, live, archive, state, files, size, events)
