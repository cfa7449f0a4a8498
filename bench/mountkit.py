"""What the read-path benches share: a FUSE server spawned and timed until its
mount is made, its peak RSS, and a manifest grown by synthetic rows.

Nothing of coldkeep is imported here: bench/mount.py imports this at its top,
and the servers of the bindings it compares run that file, so they must start
as lightly as they can.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Mounted:
    """A FUSE server process and its mount point, with how long it took to mount."""

    def __init__(self, cmd: list[str], mnt: Path, log: Path) -> None:
        mnt.mkdir(exist_ok=True)
        self.mnt = mnt
        t0 = time.perf_counter()
        with log.open("w") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        while not os.path.ismount(mnt):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{cmd[0]} exited {self.proc.returncode}: see {log}")
            time.sleep(0.002)
        self.ready = time.perf_counter() - t0

    def rss_mb(self) -> float:
        return hwm_mb(self.proc.pid)

    def stop(self) -> None:
        subprocess.run(["fusermount3", "-u", str(self.mnt)], check=False)
        self.proc.wait(timeout=60)


@contextmanager
def mounted(cmd: list[str], mnt: Path, log: Path) -> Iterator[Mounted]:
    m = Mounted(cmd, mnt, log)
    try:
        yield m
    finally:
        m.stop()


def add_rows(db: Path, n: int) -> None:
    """``n`` more manifest rows: copies of entry 1 at ``many/dNNNNN/fNNN``, 100 to a
    folder (their gzips are never read)."""
    with sqlite3.connect(db) as con:
        cols = [r[1] for r in con.execute("PRAGMA table_info(entries)") if r[1] != "id"]
        picked = ", ".join(
            {
                "relpath": "printf('many/d%05d/f%03d', n / 100, n % 100)",
                "gz_path": "'synthetic/' || n",
            }.get(c, c)
            for c in cols
        )
        con.execute(
            f"INSERT INTO entries ({', '.join(cols)}) "
            f"WITH RECURSIVE seq(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM seq "
            f"WHERE n + 1 < {n}) SELECT {picked} FROM seq, entries WHERE entries.id = 1"
        )
    with sqlite3.connect(db) as con:
        # As a pass leaves it: a read-only reader never walks a WAL of a million rows.
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
