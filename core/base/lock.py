"""The archive mutex: ``flock`` on ``archive_root/.lock``.

Every mutating operation (pass, recover, adopt, sweep, restore, verify's marks,
rebuild) holds it; ``status`` and ``plan`` never take it. The holder writes its
pid, host, command and start time into the file so a second taker can say who
is in the way.

Invariants:
- The kernel owns the lock: a holder that dies (even by SIGKILL) releases it with
  its last file descriptor, so a dead holder's lock is free by construction and
  nothing has to guess whether a pid is stale.
- The file is never unlinked: unlinking a flocked file lets a second process lock
  a new inode at the same name while the first still holds the old one.
- The holder record is advisory text, read without taking the lock; it may be
  stale (a holder that crashed), and ``read_holder`` says when its pid is dead.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import EXIT_LOCKED, ColdkeepError
from .fsutil import ensure_dir
from .layout import Layout


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (one of another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class Holder:
    pid: int
    host: str
    command: str
    started_at: float  # seconds since the epoch

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        return f"pid {self.pid} on {self.host} ({self.command!r}, since {since})"

    @property
    def alive(self) -> bool:
        """Best effort: only a holder on this host can be checked."""
        return self.host != socket.gethostname() or pid_alive(self.pid)


class LockHeld(ColdkeepError):
    exit_code = EXIT_LOCKED

    """Another process holds the archive lock."""

    def __init__(self, path: Path, holder: Holder | None) -> None:
        who = holder.describe() if holder else "an unknown process"
        super().__init__(f"the archive is locked by {who} ({path})")
        self.path = path
        self.holder = holder


def _parse_holder(text: str) -> Holder | None:
    try:
        data = json.loads(text)
        return Holder(
            int(data["pid"]), str(data["host"]), str(data["command"]), float(data["started_at"])
        )
    except (ValueError, KeyError, TypeError):
        return None


def read_holder(path: Path) -> Holder | None:
    """What the lock file says about its holder, without touching the lock."""
    try:
        return _parse_holder(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, UnicodeDecodeError):
        return None


def default_command() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200]


class ArchiveLock:
    """The held lock; release with ``release()`` or as a context manager."""

    def __init__(self, path: Path, fd: int, holder: Holder) -> None:
        self.path = path
        self.holder = holder
        self._fd: int | None = fd

    @classmethod
    def try_acquire(cls, archive_root: Path, command: str | None = None) -> ArchiveLock:
        """Take the lock now or raise ``LockHeld`` naming the holder."""
        ensure_dir(archive_root, root=archive_root)  # made on first use
        path = Layout(archive_root).lock
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        # Its holder record names commands and hosts: owner-only, even for a file
        # an older version (or someone's umask) left wider.
        os.fchmod(fd, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockHeld(path, read_holder(path)) from None
        except BaseException:
            os.close(fd)
            raise
        holder = Holder(
            os.getpid(), socket.gethostname(), command or default_command(), time.time()
        )
        os.ftruncate(fd, 0)
        # Not fsynced: the record is read only while a live process holds the
        # flock, and that process wrote it in this boot (the page cache has it).
        # After a power cut the lock is free and the record, stale or empty, is
        # advisory text ``read_holder`` parses to None at worst.
        os.pwrite(fd, json.dumps(asdict(holder)).encode(), 0)
        return cls(path, fd, holder)

    @classmethod
    async def acquire(
        cls, archive_root: Path, command: str | None = None, *, wait: float = 0.0
    ) -> ArchiveLock:
        """Take the lock, waiting up to ``wait`` seconds for a holder to let go."""
        deadline = time.monotonic() + wait
        delay = 0.05
        while True:
            try:
                return await asyncio.to_thread(cls.try_acquire, archive_root, command)
            except LockHeld:
                if time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # no stale holder record once it is free
        finally:
            os.close(fd)

    def __enter__(self) -> ArchiveLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
