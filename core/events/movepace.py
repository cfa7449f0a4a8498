"""The event mover's pace: each delete's id span sized so that it holds live's
write lock about LOCK_TARGET_S, live then left free until every writer it
refused has retried (``writer_gap_s``, from SQLite's busy handler's retry
schedule), and a delete held, once the live WAL reaches
``events.wal_restart_bytes``, until the checkpoints copy all of it (so the log
starts over), for CATCH_UP_S at most.
"""

from __future__ import annotations

import itertools
import time

from .moverun import MoverState, MoveRun

# A delete holds live's write lock about LOCK_TARGET_S; live is then left free
# long enough for every writer refused meanwhile to get in at its next retry
# (``writer_gap_s``). Steps 1 and 2 of the next batch usually fill that gap.
# Under 3 ms, the retry of SQLite's busy handler a writer refused at the lock's
# start makes: a hold past it costs that writer 5 ms more (the next retry is at
# 8 ms). With the rows per batch at 2600 the span shrinks to it as the table
# grows (docs/performance.md, "Batches sized to the hold").
LOCK_TARGET_S = 0.0025


# SQLite's default busy handler (the one an application's busy_timeout installs)
# retries a refused writer this long after its first try, then every 100 ms.
BUSY_RETRIES_MS = (0, 1, 3, 8, 18, 33, 53, 78, 103, 128, 178, 228)


GAP_MARGIN_S = 0.0005


MIN_IDS = 64


# How long a delete waits for the checkpoints to catch up with the live WAL
# (``MovePace._catch_up``) before it goes on without.
CATCH_UP_S = 0.1


def writer_gap_s(locked_s: float) -> float:
    """How long live must stay free after its write lock was taken for
    ``locked_s`` for every writer it refused to find it free at its next retry.
    A writer refused at x ms into a lock of H ms retries at x + 1, x + 3, x + 8,
    …; the first of those past H comes at most one step of that schedule after
    H, and the longest such step is the one H falls in (from x = 0): 5 ms for
    locks up to 8 ms, 10 ms up to 18 ms, and so on. A writer waits at most that
    step past the lock."""
    locked_ms = locked_s * 1000
    for before, after in itertools.pairwise(BUSY_RETRIES_MS):
        if locked_ms <= after:
            return (after - before) / 1000 + GAP_MARGIN_S
    return 0.1 + GAP_MARGIN_S


class MovePace(MoverState):
    """How long a delete holds live, and how long live is left free after it."""

    def _let_go(self, locked_at: float) -> float:
        """Note that live's write lock, taken at ``locked_at``, is released now;
        returns how long it was held."""
        self._released = time.monotonic()
        locked_s = self._released - locked_at
        self._gap = writer_gap_s(locked_s)
        return locked_s

    def _catch_up(self, run: MoveRun) -> None:
        """Hold the next delete, once the WAL reaches ``wal_restart_bytes`` into
        its file, until checkpoints have copied all of it: the next write (the
        delete's or the application's) then starts the log over from the
        file's beginning. The checkpoints alone fall behind the deletes: each
        ends behind the ones made while it ran, and the log starts over only
        when one finds nothing written since it began. Given up after
        CATCH_UP_S (an old snapshot a reader holds keeps any checkpoint from
        finishing), then tried again once the WAL has grown by half as much."""
        cp, limit = run.checkpointer, self.cfg.wal_restart_bytes
        if cp is None or not limit:
            return
        index = self._wal_index
        written = index.written_bytes()
        if written < limit:
            self._catch_up_at = limit
            return
        if written < self._catch_up_at:
            return
        deadline = time.monotonic() + CATCH_UP_S
        before = None  # the frames left to copy after the last round
        while (left := index.pending_bytes()) and index.written_bytes() >= limit:
            if time.monotonic() >= deadline or cp.dead:
                self._catch_up_at = written + limit // 2
                return
            if before is not None and left >= before:
                # No progress: the application's own checkpoint was running,
                # or a reader holds the frames. Not a busy loop.
                time.sleep(0.001)
            before = left
            cp.request()  # refused while one runs: waited for all the same
            cp.wait_idle(max(0.0, deadline - time.monotonic()))

    def _pause(self) -> None:
        """Leave live unlocked after each delete until every writer it refused
        has retried (``writer_gap_s``)."""
        wait = self._released + self._gap - time.monotonic()
        if wait > 0:
            time.sleep(wait)

    def _resize(self, ids: int, locked_s: float) -> None:
        """Size the next batch's id span so that its delete holds the lock about
        LOCK_TARGET_S (growing at most twofold at a time: the rows may get
        denser)."""
        if locked_s > 0:
            want = ids * LOCK_TARGET_S / locked_s
            self._ids = int(max(MIN_IDS, min((self._ids + want) / 2, 2 * self._ids)))
