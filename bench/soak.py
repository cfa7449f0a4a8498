"""``coldkeep run`` left alone under an application's load, watched: what a
daemon does in the months nobody looks at, in hours.

    python bench/soak.py [--minutes 20] [--rows-per-s 100] [--files-per-s 2]
                         [--clashes-per-s 0] [--kills] [--dir DIR]

A demo site whose jobs all come round every 30 to 90 seconds (pass, ship with
``keep_local_days = 0``, verify with the remote copies, stats, alerts,
checkpoint), files and rows old enough to move within a minute, a legal hold
on one unit, and an application writing ``--rows-per-s`` event rows and
``--files-per-s`` files the whole time. ``--clashes-per-s`` has it also write
rows under ids already archived with other content (an application that reuses
ids): each stays live, a conflict every pass reports again. ``--kills``
SIGKILLs the daemon a third of the way through and SIGTERMs it at two thirds,
each time starting it again.

Once a minute: the daemon's RSS, open fds and threads, the live WAL and the
manifest's size, the archive's data (its files' gzips, here or shipped, and
its event months) and the bucket's (``files/`` and ``events/``). Then one table of the
samples and the targets: RSS growth after the first 15 minutes (a straight
line fitted to the samples of the last daemon process), the remote's bytes
against the archive's, the writer's commit p99, and every row written
accounted for once (live or archived).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from report import Row, met, pct, print_table, size_of

COLDKEEP = Path(sys.executable).parent / "coldkeep"
KINDS = ("webhook_event", "ci_completed", "reconcile_pass")  # archived kinds of the demo
JOBS = """
[jobs.pass]
interval = 60
[jobs.ship]
interval = 45
[jobs.verify]
interval = 90
remote_sample = 0.2
[jobs.stats]
interval = 30
[jobs.alerts]
interval = 30
[jobs.checkpoint]
interval = 30
"""
# Old enough to move a minute after they are written.
AGE_DAYS = 60 / 86_400
WARM_UP_S = 15 * 60


@dataclass
class Sample:
    at: float  # seconds into the run
    pid: int
    rss: int
    anon: int  # of it, the heap's and the stacks' (RssAnon): not pages of mapped files
    fds: int
    threads: int
    live_wal: int
    manifest: int
    archive: int  # its data: the files' gzips (here or shipped) and the event months
    remote: int  # the bucket's data: files/ and events/ (not the manifest snapshots)


@dataclass
class Writer:
    """The application: rows into state.db, files into the live tree."""

    site: Path
    rows_per_s: float
    files_per_s: float
    clashes_per_s: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    commits: list[float] = field(default_factory=list)
    rows: int = 0
    files: int = 0
    clashes: int = 0
    errors: list[str] = field(default_factory=list)

    def rows_loop(self) -> None:
        db = sqlite3.connect(self.site / "state.db", timeout=30)
        db.execute("PRAGMA journal_mode = WAL")
        rnd = random.Random(1)
        tick = 0.1
        per_tick = max(1, round(self.rows_per_s * tick))
        while not self.stop.wait(tick):
            now = int(time.time() * 1000)
            batch = [
                (now, rnd.choice(KINDS), f"unit-{rnd.randrange(40):04d}", f"soak:{self.rows + i}")
                for i in range(per_tick)
            ]
            t0 = time.perf_counter()
            try:
                with db:
                    db.executemany(
                        "INSERT INTO events (ts, kind, unit, payload) VALUES (?, ?, ?, ?)", batch
                    )
            except sqlite3.Error as err:
                self.errors.append(str(err))
                continue
            self.commits.append(time.perf_counter() - t0)
            self.rows += per_tick
        db.close()

    def clashes_loop(self) -> None:
        """Rows under archived ids, with other content (and the archived row's
        time, so the next pass takes them up again)."""
        db = sqlite3.connect(self.site / "state.db", timeout=30)
        taken: set[int] = set()
        while not self.stop.wait(1 / self.clashes_per_s):
            for month in sorted((self.site / "archive" / "events").glob("*.db")):
                with sqlite3.connect(f"file:{month}?mode=ro", uri=True, timeout=30) as m:
                    found = m.execute(
                        "SELECT id, ts, kind, unit FROM events WHERE payload LIKE 'soak:%' "
                        "ORDER BY id DESC LIMIT 1000"
                    ).fetchall()
                row = next((r for r in found if r[0] not in taken), None)
                if row is None:
                    continue
                try:
                    with db:
                        db.execute(
                            "INSERT INTO events (id, ts, kind, unit, payload) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (*row, f"clash:{row[0]}"),
                        )
                except sqlite3.IntegrityError:  # still live (not yet deleted): the next one
                    pass
                except sqlite3.Error as err:
                    self.errors.append(str(err))
                else:
                    self.clashes += 1
                taken.add(row[0])
                break
        db.close()

    def files_loop(self) -> None:
        unit = self.site / "live" / "soak"
        unit.mkdir(exist_ok=True)
        (unit / ".closed").write_text("closed\n")
        block = b'{"soak": true, "n": %d}\n' * 1
        while not self.stop.wait(1 / self.files_per_s):
            path = unit / f"soak-{self.files:06d}.jsonl"
            path.write_bytes(b"".join(block % i for i in range(400)))
            self.files += 1


def setup(site: Path) -> Path:
    subprocess.run(
        [COLDKEEP, "demo", str(site), "--scale", "0.05", "--no-console", "--history", "0"],
        check=True,
        capture_output=True,
    )
    config = site / "coldkeep.toml"
    text = config.read_text().split("\n[remote]\n")[0]
    text = text.replace("min_age_days = 14", f"min_age_days = {AGE_DAYS}")
    text = text.replace("min_age_days = 30", f"min_age_days = {AGE_DAYS}")
    text += '\n[remote]\nurl = "file:remote"\nsite = "soak"\nkeep_local_days = 0\n' + JOBS
    config.write_text(text)
    subprocess.run(
        [COLDKEEP, "hold", "add", "--unit", "unit-0001", "--reason", "soak", "--ahead",
         "--config", str(config)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return config


def sample(site: Path, pid: int, at: float) -> Sample:
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    kib = {k: int(status[k].split()[0]) * 1024 for k in ("VmRSS", "RssAnon")}
    return Sample(
        at,
        pid,
        kib["VmRSS"],
        kib["RssAnon"],
        len(os.listdir(f"/proc/{pid}/fd")),
        len(os.listdir(f"/proc/{pid}/task")),
        size_of(site / "state.db-wal"),
        size_of(site / "archive" / "coldkeep.db") + size_of(site / "archive" / "coldkeep.db-wal"),
        archive_data(site),
        size_of(site / "remote" / "soak" / "files") + size_of(site / "remote" / "soak" / "events"),
    )


def archive_data(site: Path) -> int:
    """The archive's files (each gzip once: kept here, or shipped and dropped)
    and its event months, as this host holds them."""
    archive = site / "archive"
    shipped = 0
    if (archive / "coldkeep.db").exists():
        with sqlite3.connect(f"file:{archive / 'coldkeep.db'}?mode=ro", uri=True) as db:
            [(shipped,)] = db.execute(
                "SELECT coalesce(sum(coalesce(plain_bytes, bytes)), 0) FROM remote_objects "
                "WHERE month IS NULL AND local_gone_at IS NOT NULL"
            )
    return size_of(archive / "files") + size_of(archive / "events") + int(shipped)


def slope_per_hour(points: list[tuple[float, int]]) -> float:
    """Least squares: bytes an hour."""
    n = len(points)
    if n < 2:
        return float("nan")
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return sum((t - mx) * (v - my) for t, v in points) / var * 3600 if var else float("nan")


def accounted(site: Path, written: int) -> tuple[int, int]:
    """(rows of the writer's found once, found more than once) live or archived."""
    seen: dict[str, int] = {}
    dbs = [site / "state.db", *sorted((site / "archive" / "events").glob("*.db"))]
    for path in dbs:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            for (payload,) in db.execute("SELECT payload FROM events WHERE payload LIKE 'soak:%'"):
                seen[payload] = seen.get(payload, 0) + 1
    return len(seen), sum(1 for n in seen.values() if n > 1)


def mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20.0)
    ap.add_argument("--rows-per-s", type=float, default=100.0)
    ap.add_argument("--files-per-s", type=float, default=2.0)
    ap.add_argument("--sample-s", type=float, default=60.0)
    ap.add_argument("--clashes-per-s", type=float, default=0.0)
    ap.add_argument("--kills", action="store_true", help="SIGKILL at 1/3, SIGTERM at 2/3")
    ap.add_argument("--dir", type=Path, help="keep the site here (default: a temp dir)")
    args = ap.parse_args()
    base = args.dir or Path(tempfile.mkdtemp(prefix="coldkeep-soak-"))
    site = base / "site"
    config = setup(site)
    log = (base / "daemon.log").open("ab")
    writer = Writer(site, args.rows_per_s, args.files_per_s, args.clashes_per_s)
    loops = [writer.rows_loop, writer.files_loop]
    if args.clashes_per_s:
        loops.append(writer.clashes_loop)
    threads = [threading.Thread(target=f, daemon=True) for f in loops]
    for t in threads:
        t.start()

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen([COLDKEEP, "run", "--config", str(config)], stderr=log)

    daemon = start()
    total = args.minutes * 60
    stops = [(total / 3, signal.SIGKILL), (2 * total / 3, signal.SIGTERM)] if args.kills else []
    samples: list[Sample] = []
    t0 = time.monotonic()
    while (at := time.monotonic() - t0) < total:
        if stops and at >= stops[0][0]:
            daemon.send_signal(stops.pop(0)[1])
            daemon.wait()
            daemon = start()
        if daemon.poll() is not None:
            sys.exit(f"the daemon ended by itself ({daemon.returncode}): see {base}/daemon.log")
        samples.append(sample(site, daemon.pid, at))
        time.sleep(min(args.sample_s, max(0.0, total - (time.monotonic() - t0))))
    writer.stop.set()
    for t in threads:
        t.join()
    daemon.send_signal(signal.SIGTERM)
    code = daemon.wait()
    found, twice = accounted(site, writer.rows)

    wrote = f"{writer.rows:,} rows, {writer.clashes:,} clashing, {writer.files:,} files written"
    print(f"soak: {args.minutes:g} min, {wrote}; {base}")
    cols = ("min", "pid", "RSS MB", "anon MB", "fds", "threads", "live WAL MB",
            "manifest MB", "archive MB", "remote MB")  # fmt: skip
    print("  ".join(f"{c:>11}" for c in cols))
    for s in samples:
        vals = (f"{s.at / 60:.0f}", str(s.pid), mb(s.rss), mb(s.anon), str(s.fds),
                str(s.threads), mb(s.live_wal), mb(s.manifest), mb(s.archive),
                mb(s.remote))  # fmt: skip
        print("  ".join(f"{v:>11}" for v in vals))
    last = [s for s in samples if s.pid == samples[-1].pid]
    warm = [s for s in last if s.at - last[0].at >= min(WARM_UP_S, total / 3)]
    growth = slope_per_hour([(s.at, s.rss) for s in warm])
    anon_growth = slope_per_hour([(s.at, s.anon) for s in warm])
    ratio = samples[-1].remote / max(1, samples[-1].archive)
    p99 = pct(writer.commits, 99) * 1000
    rows: list[Row] = [
        ("RSS growth after warm-up (MB/h)", f"{growth / 1e6:.1f}", "", "", "< 5",
         met(growth < 5e6)),
        ("  of it the anonymous pages' (MB/h)", f"{anon_growth / 1e6:.1f}", "", "", "", ""),
        ("remote bytes vs the archive's", f"{ratio:.2f}x", "", "", "<= 1.2x", met(ratio <= 1.2)),
        ("the writer's commit p99 (ms)", f"{p99:.1f}", "", "", "", ""),
        ("writer errors", str(len(writer.errors)), "", "", "0", met(not writer.errors)),
        ("rows written, found once", f"{found:,} of {writer.rows:,}", "", "", "all",
         met(found == writer.rows and not twice)),
        ("daemon exit on SIGTERM", str(code), "", "", "0", met(code == 0)),
    ]  # fmt: skip
    print()
    print_table(rows)
    if args.dir is None:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
