"""I/O errors as an operator reads them: one line naming the path they happened on.

An ``OSError`` from a read, a write or an fsync on an open descriptor carries no
file name (``[Errno 5] Input/output error``), and SQLite's errors never say which
database (``disk I/O error``). An operator who reads either knows that something
failed, not what: which disk to check, which file to look at.

- ``naming(path)`` gives an ``OSError`` raised inside it the path it happened on,
  unless an inner ``naming`` (or the OS) already did; the error stays the same
  object, of the same class, with the same errno.
- ``DatabaseFailed`` is a SQLite error that names its database and what was being
  done. It is a ``sqlite3.OperationalError`` carrying the original's
  ``sqlite_errorcode`` and ``sqlite_errorname``, so every handler that catches
  ``sqlite3.Error`` (or asks ``space.out_of_space``) treats it as before.
  ``naming_db(path, doing)`` turns a SQLite error about the file raised inside
  it (``OperationalError``, ``DatabaseError``) into one.
- SQLite reports EIO from a read as "database disk image is malformed"
  (SQLITE_CORRUPT): ``describe`` says so wherever that text reaches an operator.

Neither decides anything: an I/O error proves nothing about the data, and the
callers' rule stands (raise it; never delete anything because of it).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ColdkeepError

# SQLite's primary result codes (extended codes keep them in the low byte).
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
# SQLite turns EIO from a read into SQLITE_CORRUPT, "database disk image is
# malformed" (os_unix.c: SQLITE_IOERR_CORRUPTFS, reported as CORRUPT): from here
# a failing disk and a damaged file look the same. Said so, before anybody
# "repairs" a database that is whole on a disk that failed one read.
_MAYBE_EIO = (
    "; SQLite says this after a read error (EIO) too: check the kernel log for I/O "
    "errors on that disk before repairing or replacing anything"
)


@contextmanager
def naming(path: Path | str) -> Iterator[None]:
    """An ``OSError`` raised inside names ``path`` (if nothing named it already, or
    only by a name relative to a directory descriptor: an ``*at`` call's)."""
    try:
        yield
    except OSError as err:
        named = err.filename
        if not isinstance(named, str | bytes) or not os.path.isabs(os.fsdecode(named)):
            err.filename = os.fspath(path)
        raise


def _primary(err: BaseException) -> int | None:
    code = getattr(err, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_io_error(err: BaseException) -> bool:
    """A SQLite error that is an I/O error (SQLITE_IOERR and its extended codes)."""
    return _primary(err) == _SQLITE_IOERR


def describe(err: sqlite3.Error) -> str:
    """A SQLite error's text; "malformed" says that it may be a read error."""
    return f"{err}{_MAYBE_EIO}" if _primary(err) == _SQLITE_CORRUPT else str(err)


class DatabaseFailed(ColdkeepError, sqlite3.OperationalError):
    """A SQLite error on the database at ``path``, said with the path and what was
    being done: ``<path>: disk I/O error (while <doing>)``."""

    def __init__(self, path: Path, cause: sqlite3.Error, doing: str = "") -> None:
        text = f"{path}: {describe(cause)}" + (f" (while {doing})" if doing else "")
        super().__init__(text)
        self.path = path
        self.doing = doing
        # What out_of_space and any other reader of the code look at.
        # (An error raised by SQLite has both; one made in Python may have neither.)
        self.sqlite_errorcode = int(getattr(cause, "sqlite_errorcode", -1))
        self.sqlite_errorname = str(getattr(cause, "sqlite_errorname", ""))


@contextmanager
def naming_db(path: Path, doing: str = "") -> Iterator[None]:
    """A SQLite error raised inside becomes a ``DatabaseFailed`` naming ``path``
    (one that names its database already passes through, given ``doing`` if an
    inner statement did not say what it was for)."""
    try:
        yield
    except DatabaseFailed as failed:
        cause = failed.__cause__
        if doing and not failed.doing and failed.path == path and isinstance(cause, sqlite3.Error):
            raise DatabaseFailed(path, cause, doing) from cause
        raise
    except sqlite3.Error as err:
        # Only what the file did (I/O, full, locked, malformed): a constraint or a
        # misuse is the caller's to catch by its own class.
        if type(err) not in (sqlite3.OperationalError, sqlite3.DatabaseError):
            raise
        raise DatabaseFailed(path, err, doing) from err
