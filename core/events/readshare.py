"""The share between the reads of event rows (``coldkeep query``, the console's
Events screen) and the changes that move rows between the live table and the
month databases (a pass's copies and deletes, restore-events' inserts):
``flock`` on ``archive_root/.events-read``.

A query's DuckDB engine scans the live table and each month on connections of
its own, at moments of their own: a batch deleted from live between the scan of
live and the scan of its month is counted nowhere, one copied into its month
after live's ids were read is counted twice. So such a read holds the share
(``LOCK_SH``) from its first row to its last, and every change takes it
exclusively (``LOCK_EX``) around its transaction: a read sees all of a change
or none of it. (The SQLite engine needs none of this: it reads every database
in one snapshot, query.py.)

A change waits for the readers at most ``READERS_WAIT_S`` at a time, and over
the changer's life no longer than it has worked besides, plus that: readers one
after another can make a pass take twice as long (and 5 s), never stop it. Past
its wait a change goes ahead without the share, and says so: it makes the
counter at the start of the file odd before it commits and even after. A read
that finds the counter odd when it begins, or other than it was when it ends,
overlapped such a change: it raced, and its answer is not used. Once a change
has gone ahead, the next ones wait no more until one finds no reader in the way
(the reader that held it may still be there): a reader that never lets go costs
a pass one wait, not one per batch.

Invariants:
- The file is never unlinked or truncated (see base/lock.py): it is made once,
  by whichever side comes first, readable by all (a reader may be another user).
- The counter is written only by a change that went ahead without the share,
  and read only under ``LOCK_SH``; it is not made durable: no read outlives a
  power cut.
- A change holds ``LOCK_EX`` before it takes any SQLite lock and lets go after
  it commits, so a reader waits at most for one transaction (and its busy
  timeout), and a change never holds the live database's write lock while it
  waits for readers.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..base.errors import ColdkeepError
from ..base.fsutil import ensure_dir
from ..base.layout import Layout

# How long a change waits for the readers in its way before it goes ahead.
READERS_WAIT_S = 5.0
_COUNTER = struct.Struct("<Q")


class ShareUnavailable(ColdkeepError):
    """The share's file can be neither opened nor made."""


def _open(archive_root: Path, flags: int) -> int | None:
    """The share's file opened (made if missing); None when the archive root is
    not there yet: no move has run."""
    path = Layout(archive_root).events_read
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise ShareUnavailable(
            f"{path}: cannot be opened ({err.strerror or err}); a read of event rows and a "
            "pass share it: let this user read it (the first pass makes it)"
        ) from None
    return fd


def _counter(fd: int) -> int:
    data = os.pread(fd, _COUNTER.size, 0)
    return _COUNTER.unpack(data)[0] if len(data) == _COUNTER.size else 0


class ReadShare:
    """A reader's side: ``begin`` before the first row is read, ``end`` after
    the last (whether it raced). Before the archive root exists there is no
    file to share: a read then raced if one exists when it ends (a first pass
    makes it before its first change)."""

    def __init__(self, archive_root: Path) -> None:
        self.archive_root = archive_root
        self._fd: int | None = None
        self._at: int | None = None  # the counter when the read began; -1: no file

    def begin(self) -> None:
        assert self._at is None, "one read at a time"
        if self._fd is None:
            self._fd = _open(self.archive_root, os.O_RDONLY)
        if self._fd is None:
            self._at = -1
            return
        fcntl.flock(self._fd, fcntl.LOCK_SH)  # waits for one change's transaction at most
        self._at = _counter(self._fd)

    def end(self) -> bool:
        """The read let go; True when a change went ahead while it read."""
        if self._at is None:
            return False
        at, self._at = self._at, None
        if self._fd is None:
            return Layout(self.archive_root).events_read.exists()
        try:
            now = _counter(self._fd)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        return at % 2 == 1 or now != at

    def close(self) -> None:
        self.end()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class ChangeShare:
    """A changer's side (the mover, restore-events): ``changing()`` around each
    transaction that moves rows between live and the months."""

    def __init__(self, archive_root: Path, wait_s: float = READERS_WAIT_S) -> None:
        ensure_dir(archive_root, root=archive_root)  # made on first use, as the lock's
        self._fd: int | None = _open(archive_root, os.O_RDWR)
        self.wait_s = wait_s
        self._since = time.monotonic()
        self._patient = True  # False once a change went ahead past a reader
        self.waited_s = 0.0  # for readers, over this share's life
        self.overtaken = 0  # changes that went ahead while a reader read

    @contextmanager
    def changing(self) -> Iterator[None]:
        """The block runs with no reader reading, or, past the wait, marked in
        the counter for the readers it overtook."""
        assert self._fd is not None, "closed"
        fd = self._fd
        if self._take(fd):
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            return
        self.overtaken += 1
        self._bump(fd)  # odd: a read beginning now has raced already
        try:
            yield
        finally:
            self._bump(fd)

    def _take(self, fd: int) -> bool:
        """``LOCK_EX``, waiting for the readers up to ``wait_s``, and no longer
        than the time worked besides allows (not at all while the last wait ran
        out and no free moment has come since)."""
        t0 = time.monotonic()
        worked = t0 - self._since - self.waited_s
        wait_s = min(self.wait_s, self.wait_s + worked - self.waited_s)
        pause = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waited = time.monotonic() - t0
                if not self._patient or waited >= wait_s:
                    self.waited_s += waited
                    self._patient = False
                    return False
                # Polled: flock has no timeout, and a reader's read takes
                # milliseconds to seconds.
                time.sleep(max(0.0, min(pause, wait_s - waited)))
                pause = min(pause * 2, 0.05)
                continue
            self.waited_s += time.monotonic() - t0
            self._patient = True
            return True

    def _bump(self, fd: int) -> None:
        os.pwrite(fd, _COUNTER.pack(_counter(fd) + 1), 0)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
