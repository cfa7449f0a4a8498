"""A full filesystem as an outcome, not a crash.

ENOSPC and EDQUOT from a write, and SQLITE_FULL from a database, all mean the same
thing to an operator: the filesystem under that path has no room left.
``out_of_space`` recognises them and ``OutOfSpace`` says it in one line: which
filesystem, what was being written, how much is free there, how much the
operation still needed, and what to do. The operation stops at the first one
(the next file would only fail the same way) after settling what was in flight.

The reserve: every mutating session keeps ``archive_root/.reserve``, 1 MiB of
zeros written and fsynced while there is room. When the archive's filesystem
fills up, ``release_reserve`` deletes it, so the manifest (on the same
filesystem) still has the room to record that the operation failed, and why,
and the audit to say so; the next session with room writes it again.

Everything here is synchronous (a statvfs, a small write): callers run it in a
thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path
from typing import Any

from .durable import fsync
from .errors import ColdkeepError
from .fsutil import fsync_dir
from .layout import Layout

RESERVE_BYTES = 1 << 20
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def out_of_space(err: BaseException) -> bool:
    """ENOSPC or EDQUOT from the OS, or SQLITE_FULL from SQLite."""
    if isinstance(err, OSError):
        return err.errno in _FULL_ERRNOS
    if isinstance(err, sqlite3.Error):
        return getattr(err, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
    return False


def mount_of(path: Path) -> Path:
    """The mount point of the filesystem that holds ``path`` (or would hold it:
    the nearest existing ancestor is asked)."""
    here = path.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    dev = here.stat().st_dev
    while here != here.parent and here.parent.stat().st_dev == dev:
        here = here.parent
    return here


def free_bytes(path: Path) -> int | None:
    """What an unprivileged writer can still put on ``path``'s filesystem."""
    try:
        st = os.statvfs(mount_of(path))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def human_bytes(n: float) -> str:
    """Bytes as an operator reads them (``3.2 GiB``), for messages said in the core."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


class OutOfSpace(ColdkeepError, OSError):
    """A filesystem coldkeep writes to is full (or the writer is over quota).

    An ``OSError`` (errno ENOSPC or EDQUOT), so code that stops on I/O errors
    stops on it too; its text is the whole story for the operator."""

    def __init__(
        self,
        path: Path,
        cause: BaseException,
        *,
        doing: str,
        needed: int | None = None,
        remedy: str = "free space there",
    ) -> None:
        code = cause.errno if isinstance(cause, OSError) and cause.errno else errno.ENOSPC
        self.path = path
        self.mount = mount_of(path)
        self.free = free_bytes(path)
        self.needed = needed
        self.doing = doing
        what = "over quota" if code == errno.EDQUOT else "full"
        free = f"{human_bytes(self.free)} free" if self.free is not None else "free space unknown"
        still = f"; it still needed about {human_bytes(needed)}" if needed else ""
        text = (
            f"out of space: the filesystem at {self.mount} is {what} ({free}) while "
            f"{doing} {path}{still}; {remedy}, then run it again"
        )
        super().__init__(code, text)
        self.text = text

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        return {
            "filesystem": str(self.mount),
            "path": str(self.path),
            "free": self.free,
            "needed": self.needed,
            "doing": self.doing,
        }


def ensure_reserve(archive_root: Path) -> None:
    """Write the reserve if it is missing and there is room for it (a failure is
    not an error: the reserve is a margin, not a requirement)."""
    path = Layout(archive_root).reserve
    try:
        if path.stat().st_size == RESERVE_BYTES:
            return
    except FileNotFoundError:
        pass
    tmp = path.with_name(f"{path.name}.tmp")
    try:
        # O_EXCL: a leftover of ours goes first; nothing there is truncated.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            except OSError as err:
                if err.errno not in (errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                os.write(fd, bytes(RESERVE_BYTES))  # no fallocate here (FUSE, ZFS)
            fsync(fd, "reserve.data")
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(archive_root, root=archive_root, site="reserve.placed")
    except OSError:
        _unlink(tmp)


def release_reserve(archive_root: Path) -> bool:
    """Delete the reserve, so what is needed to record a failure has room."""
    return _unlink(Layout(archive_root).reserve)


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
