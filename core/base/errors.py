"""The one base of every error coldkeep raises on purpose, and what a client
makes of any error: its exit code and its one line.

Invariants:
- Every exception class of the core derives from ``ColdkeepError``; its
  ``str()`` is the whole story for the operator (what, where, what to do), on
  one line, never a credential.
- ``explain`` is the one list of what a client reports as a refusal or a
  failure rather than a crash; the CLI and the console both read it.
"""

from __future__ import annotations

import sqlite3
from typing import ClassVar

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED = 0, 1, 2, 3


class ColdkeepError(Exception):
    """An error an operator is told in one line. ``exit_code``: how the CLI ends
    (1 failed, 2 bad usage or config, 3 the archive lock is held)."""

    exit_code: ClassVar[int] = EXIT_FAILED


class UsageError(ColdkeepError):
    """A request or a config that cannot be used as given; fixed by the operator."""

    exit_code = EXIT_USAGE


class RemoteError(ColdkeepError):
    """A remote operation failed; ``str()`` is the operator's one line."""


def explain(err: BaseException) -> tuple[int, str] | None:
    """The exit code and the one line for an error a client reports as such,
    or None for one it must not hide (a bug: let it show its traceback). I/O
    that proves nothing about the data (a full disk, EIO, a database error)
    is a failure, named by its path."""
    if isinstance(err, ColdkeepError):
        return err.exit_code, str(err)
    if isinstance(err, OSError | sqlite3.Error):
        return EXIT_FAILED, str(err)
    return None
