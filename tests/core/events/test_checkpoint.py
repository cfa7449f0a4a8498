"""The live checkpointer on a real WAL database, with a real reader in the way."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from coldkeep.core.base.configevents import CheckpointMode
from coldkeep.core.base.stream import CheckpointRan
from coldkeep.core.events.checkpoint import (
    LiveCheckpointer,
    WalIndex,
    wal_bytes,
    wal_pending_bytes,
)


def wal_db(path: Path, rows: int = 2000) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")
    db.execute("CREATE TABLE t (x TEXT)")
    db.executemany("INSERT INTO t VALUES (?)", [("x" * 200,)] * rows)
    return db


class Results:
    def __init__(self) -> None:
        self.items: list[CheckpointRan] = []
        self.arrived = threading.Semaphore(0)

    def __call__(self, r: CheckpointRan) -> None:
        self.items.append(r)
        self.arrived.release()

    def next(self) -> CheckpointRan:
        assert self.arrived.acquire(timeout=30), "no checkpoint result arrived"
        return self.items[-1]


def checkpointer(path: Path, results: Results, **kw: object) -> LiveCheckpointer:
    return LiveCheckpointer(path, results, **kw)  # type: ignore[arg-type]


def test_a_passive_checkpoint_copies_the_wal_and_reports_it(tmp_path: Path) -> None:
    db = wal_db(tmp_path / "live.db")
    results = Results()
    cp = checkpointer(tmp_path / "live.db", results)
    try:
        assert cp.dead is None
        assert cp.request()
        r = results.next()
        assert (r.busy, r.error, r.mode) == (0, None, "PASSIVE")
        assert r.log > 0 and r.checkpointed == r.log
        assert r.wal_before == wal_bytes(tmp_path / "live.db") > 0
    finally:
        cp.close()
        db.close()


def test_a_reader_makes_restart_busy_which_is_recorded_not_an_error(tmp_path: Path) -> None:
    db = wal_db(tmp_path / "live.db")
    reader = sqlite3.connect(tmp_path / "live.db", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchall()
    db.execute("INSERT INTO t VALUES ('after the reader began')")
    results = Results()
    mode: CheckpointMode = "RESTART"
    cp = checkpointer(tmp_path / "live.db", results, mode=mode, busy_timeout_s=0.05)
    try:
        assert cp.request()
        r = results.next()
        assert r.busy == 1 and r.error is None and r.checkpointed < r.log
        reader.execute("COMMIT")
        assert cp.wait_idle(30)
        assert cp.request(), "busy is a retry: the next request runs"
        assert results.next().busy == 0
    finally:
        cp.close()
        reader.close()
        db.close()


def test_a_checkpoint_past_its_timeout_is_given_up(tmp_path: Path) -> None:
    db = wal_db(tmp_path / "live.db")
    reader = sqlite3.connect(tmp_path / "live.db", isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchall()
    db.execute("INSERT INTO t VALUES ('after the reader began')")
    results = Results()
    # RESTART waits for the reader for up to 5 s; the checkpointer gives it 0.2 s.
    mode: CheckpointMode = "RESTART"
    cp = checkpointer(tmp_path / "live.db", results, mode=mode, busy_timeout_s=5, timeout_s=0.2)
    try:
        assert cp.request()
        r = results.next()
        assert r.error is not None and "did not finish within 0.2 s" in r.error
        assert cp.dead == r.error
        assert not cp.request(), "no more checkpoints this phase"
    finally:
        reader.execute("COMMIT")
        cp.close()
        reader.close()
        db.close()
    assert len(results.items) == 1, "reported once"


@pytest.mark.parametrize("journal", ["delete", "truncate"])
def test_not_applicable_without_wal(tmp_path: Path, journal: str) -> None:
    with sqlite3.connect(tmp_path / "live.db") as db:
        db.execute(f"PRAGMA journal_mode = {journal}")
        db.execute("CREATE TABLE t (x)")
    results = Results()
    cp = checkpointer(tmp_path / "live.db", results)
    try:
        assert cp.dead is not None and "not in WAL mode" in cp.dead
        assert not cp.request()
    finally:
        cp.close()


def test_pending_bytes_count_frames_not_yet_checkpointed_not_the_file(tmp_path: Path) -> None:
    path = tmp_path / "live.db"
    db = wal_db(path)
    try:
        assert wal_pending_bytes(path) > 0
        assert db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0] == 0
        assert wal_pending_bytes(path) == 0 < wal_bytes(path), "the file keeps its size"
        reader = sqlite3.connect(path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchone()  # a snapshot: the WAL cannot restart
        db.executemany("INSERT INTO t VALUES (?)", [("y" * 200,)] * 100)
        _busy, log, done = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        page = db.execute("PRAGMA page_size").fetchone()[0]
        assert wal_pending_bytes(path) == (log - done) * (page + 24) > 0
        reader.close()
    finally:
        db.close()
    assert wal_pending_bytes(tmp_path / "none.db") == 0


def test_reading_the_wal_index_keeps_this_process_s_locks(tmp_path: Path) -> None:
    """Closing a descriptor of the -shm drops every POSIX lock the process holds
    on it: a reader's snapshot would then no longer keep another process from
    resetting the WAL under it. WalIndex keeps its descriptor until closed."""
    path = tmp_path / "live.db"
    db = wal_db(path)
    reader = sqlite3.connect(path, isolation_level=None)
    index = WalIndex(path)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM t").fetchone()  # holds a read mark
        db.execute("INSERT INTO t VALUES ('z')")
        for _ in range(3):
            assert index.pending_bytes() > 0
        other = (
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "print(c.execute('PRAGMA wal_checkpoint(TRUNCATE)').fetchone()[0])"
        )
        busy = subprocess.run(
            [sys.executable, "-c", other, str(path)], capture_output=True, text=True, check=True
        )
        assert busy.stdout.strip() == "1", "another process truncated the WAL under a reader"
    finally:
        reader.close()
        db.close()
        index.close()
