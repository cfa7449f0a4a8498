"""The live database's WAL checkpoint, on a thread and a connection of its own.

While the event phase deletes rows, coldkeep's mover connection runs with
``wal_autocheckpoint = 0``: otherwise whichever of its commits crosses the
threshold would checkpoint inline, fsyncing the WAL and the database inside a
batch. Instead this checkpointer runs ``PRAGMA wal_checkpoint(PASSIVE)`` every N
batches and whenever the WAL grows past a size, on ONE worker thread holding its
own connection. That is SQLite's own protocol, unchanged (the WAL synced before
any page is copied, the database synced before the WAL may restart), only on
another thread. PASSIVE never waits on a reader or a writer: the application
keeps reading and committing while it runs.

Invariants:
- Never RESTART or TRUNCATE unless asked: those wait on the application's readers
  and writers, an outage dressed as a clean-up.
- A checkpoint that does not finish within the timeout is reported as failed, the
  checkpointer gives up for the phase and nobody waits for it any more (it is
  interrupted too, which SQLite honours between steps but not inside a busy wait
  or a blocked fsync): a hung disk must not hold the archive lock forever.
- A busy answer (SQLite returns busy=1 and log=-1 while another checkpoint runs)
  is recorded as busy and retried at the next request, never an error.
- Requests coalesce: one checkpoint at a time, never a queue of them.
- It never writes a row; it opens, checkpoints when asked, and closes.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..base.configevents import CheckpointMode, EventsSettings
from ..base.stream import CheckpointRan, EventStream
from ..base.times import now_ms
from ..store.checkpointlog import record_checkpoint
from ..store.manifest import Manifest
from .eventschema import EventsError


def wal_path(db: Path) -> Path:
    return db.with_name(db.name + "-wal")


def wal_bytes(db: Path) -> int:
    """The WAL file's size. A PASSIVE checkpoint never shrinks it: it says how big
    the log once grew, not how much of it is still to copy (``wal_pending_bytes``)."""
    try:
        return os.stat(wal_path(db)).st_size
    except FileNotFoundError:
        return 0


# The wal-index (the ``-shm`` file) starts with two copies of a 48-byte header,
# then the checkpoint info, all in the machine's byte order (SQLite's file-format
# documentation, "WAL-index format"): mxFrame, the last valid frame, at 16;
# szPage at 14; nBackfill, the frames already copied into the database, at 96.
_WAL_INDEX = struct.Struct("=12xBBHI76xI")  # isInit, bigEndCksum, szPage, mxFrame, nBackfill
_WAL_FRAME_HEADER = 24


def wal_pending_bytes(db: Path) -> int:
    """The bytes of WAL frames not yet copied into the database: what the next
    checkpoint would have to do. Only where this process has no connection to
    ``db`` (closing the descriptor drops its locks: ``WalIndex``)."""
    index = WalIndex(db)
    try:
        return index.pending_bytes()
    finally:
        index.close()


class WalIndex:
    """The wal-index (the ``-shm`` file) of a database this process has
    connections to, read through one descriptor kept open until ``close``, to be
    called only once those connections are closed: closing any descriptor of a
    file drops every POSIX lock the process holds on it, SQLite's read marks and
    write lock on the ``-shm`` among them; another process could then reset the
    WAL under this one's reader, or write beside its writer."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._fd: int | None = None

    def pending_bytes(self) -> int:
        """The bytes of WAL frames not yet copied into the database: what the
        next checkpoint would have to do. Read without taking any lock (a torn
        read only misjudges one trigger); the WAL file's size when there is no
        readable index."""
        frames = self._frames()
        if frames is None:
            return wal_bytes(self.db)
        written, backfilled, frame_bytes = frames
        return max(0, written - backfilled) * frame_bytes

    def written_bytes(self) -> int:
        """The bytes of WAL frames written since the log last started over
        (copied into the database or not): how far into the file the next
        commit writes. The file never shrinks, so the furthest this ever
        reaches is the file's size. Read as ``pending_bytes`` is."""
        frames = self._frames()
        if frames is None:
            return wal_bytes(self.db)
        return frames[0] * frames[2]

    def _frames(self) -> tuple[int, int, int] | None:
        """The last valid frame, the frames already copied, and a frame's size
        in bytes; None when there is no readable index."""
        if self._fd is None:
            try:
                self._fd = os.open(
                    self.db.with_name(self.db.name + "-shm"), os.O_RDONLY | os.O_CLOEXEC
                )
            except FileNotFoundError:
                return None
        head = os.pread(self._fd, _WAL_INDEX.size, 0)
        if len(head) < _WAL_INDEX.size or head[:48] != head[48:96]:
            return None  # no index yet, or a writer is updating it right now
        is_init, _, page, frames, backfilled = _WAL_INDEX.unpack(head)
        if not is_init:
            return None
        page_size = 65536 if page == 1 else int(page)
        return int(frames), int(backfilled), page_size + _WAL_FRAME_HEADER

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LiveCheckpointer:
    """One thread, one connection, one checkpoint at a time. ``request`` returns at
    once; results arrive through ``on_result`` (called on the checkpointer's
    thread)."""

    def __init__(
        self,
        db: Path,
        on_result: Callable[[CheckpointRan], None],
        *,
        timeout_s: float = 30.0,
        busy_timeout_s: float = 2.0,
        mode: CheckpointMode = "PASSIVE",
    ) -> None:
        self.db = db
        self.on_result = on_result
        self.timeout_s = timeout_s
        self.mode = mode
        self._busy_timeout_s = busy_timeout_s
        self._wake = threading.Condition()
        self._pending = False
        self._closing = False
        self._idle = threading.Event()
        self._idle.set()
        self._verdict = threading.Lock()  # one report per checkpoint: result or give-up
        self.dead: str | None = None
        self._conn: sqlite3.Connection | None = None
        self._thread = threading.Thread(target=self._run, name="live-checkpoint", daemon=True)
        self._opened = threading.Event()
        self._thread.start()
        self._opened.wait(timeout_s)
        if not self._opened.is_set():
            self.dead = f"the checkpoint connection to {db} did not open within {timeout_s:.0f} s"

    @classmethod
    def configured(
        cls, db: Path, cfg: EventsSettings, on_result: Callable[[CheckpointRan], None]
    ) -> LiveCheckpointer:
        """A checkpointer as ``[events]`` says (timeout, busy timeout, mode)."""
        return cls(
            db,
            on_result,
            timeout_s=cfg.checkpoint_timeout_s,
            busy_timeout_s=cfg.busy_timeout_ms / 1000,
            mode=cfg.checkpoint_mode,
        )

    def _open(self) -> None:
        try:
            conn = sqlite3.connect(
                f"file:{self.db}?mode=rw",
                uri=True,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,  # interrupt() comes from the watchdog
            )
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
            if mode != "wal":
                conn.close()
                self.dead = f"{self.db} is not in WAL mode ({mode}): no checkpoint to run"
            else:
                self._conn = conn
        except sqlite3.Error as err:
            self.dead = f"the checkpoint connection to {self.db} failed: {err}"
        finally:
            self._opened.set()

    def request(self) -> bool:
        """Ask for a checkpoint; False if one is already pending or running, or the
        checkpointer is gone."""
        with self._wake:
            if self.dead or self._closing or self._pending or not self._idle.is_set():
                return False
            self._pending = True
            self._idle.clear()
            self._wake.notify()
        return True

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for the running checkpoint (if any) to finish."""
        return self._idle.wait(timeout)

    def _run(self) -> None:
        self._open()
        while True:
            with self._wake:
                while not self._pending and not self._closing:
                    self._wake.wait()
                if self._closing and not self._pending:
                    break
                self._pending = False
            try:
                if self._conn is not None and not self.dead:
                    result = self._checkpoint(self._conn)
                    if result is not None:
                        self.on_result(result)
            finally:
                self._idle.set()
        if self._conn is not None:
            self._conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> CheckpointRan | None:
        before = wal_bytes(self.db)
        at = now_ms()
        t0 = time.perf_counter()
        finished = threading.Event()
        watchdog = threading.Timer(self.timeout_s, self._give_up, (conn, at, before, finished))
        watchdog.daemon = True
        watchdog.start()
        try:
            busy, log, done = conn.execute(f"PRAGMA wal_checkpoint({self.mode})").fetchone()
            error = None
        except sqlite3.OperationalError as err:
            # SQLITE_BUSY from a concurrent checkpoint: the same verdict as busy=1.
            busy, log, done, error = 1, -1, -1, str(err)
        finally:
            watchdog.cancel()
        with self._verdict:
            finished.set()
            if self.dead:
                return None  # given up on and already reported
        ms = (time.perf_counter() - t0) * 1000
        return CheckpointRan(
            at, int(busy), int(log), int(done), ms, before, wal_bytes(self.db), self.mode, error
        )

    def _give_up(
        self, conn: sqlite3.Connection, at: int, before: int, finished: threading.Event
    ) -> None:
        """The checkpoint is past its time: report it, stop asking for more, and try
        to interrupt it. A thread blocked in the kernel (a hung disk) cannot be
        stopped; it is a daemon thread and no one waits for it any more."""
        with self._verdict:
            if finished.is_set():
                return  # it made it after all
            self.dead = (
                f"the checkpoint of {self.db} did not finish within {self.timeout_s:g} s; "
                "no more checkpoints this phase"
            )
        conn.interrupt()
        ms = self.timeout_s * 1000
        self.on_result(
            CheckpointRan(at, 1, -1, -1, ms, before, wal_bytes(self.db), self.mode, self.dead)
        )
        self._idle.set()

    def close(self, timeout: float = 5.0) -> None:
        """Stop; waits at most ``timeout`` for a checkpoint in flight."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout)


async def checkpoint_now(db: Path, cfg: EventsSettings) -> CheckpointRan:
    """One checkpoint of ``db`` now, on a checkpointer of its own (the
    ``checkpoint`` command); EventsError when it cannot run."""
    results: list[CheckpointRan] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def arrived(r: CheckpointRan) -> None:
        results.append(r)
        loop.call_soon_threadsafe(done.set)

    cp = await asyncio.to_thread(LiveCheckpointer.configured, db, cfg, arrived)
    try:
        if cp.dead or not cp.request():
            raise EventsError(cp.dead or "the checkpointer is busy")
        await done.wait()
    finally:
        await asyncio.to_thread(cp.close)
    return results[0]


async def checkpoint_recorded(
    db: Path, cfg: EventsSettings, manifest: Manifest, stream: EventStream
) -> CheckpointRan:
    """``checkpoint_now``, written to the checkpoint log and told to ``stream``
    (the ``checkpoint`` command and the scheduler's ``checkpoint`` job)."""
    result = await checkpoint_now(db, cfg)
    await record_checkpoint(manifest, result)
    stream.emit(result)
    return result
