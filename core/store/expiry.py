"""What expiry records besides the entries' own tombstones (status ``expired``,
the manifest's): an event month's tombstone (``expired_months``), and each expiry
begun and not yet finished (``expiring``: recorded, its files not all gone); and
what a file's tombstone says to whoever asks for its bytes (``expired_detail``).

Invariants:
- A month's tombstone and the note of its expiry are written in the expiry's
  one transaction (with its audit row), before anything is deleted; the note is
  cleared only once the files are gone, so an interrupted expiry is finished by
  the next.
"""

from __future__ import annotations

from ..base.times import day_of
from .connection import Statement
from .entries import Entry
from .manifest import Manifest
from .remoteobjects import RemoteObject


def month_tombstone(month: str, size: int, sha256: str, at: int) -> Statement:
    """Event month ``month`` (its database ``size`` bytes, ``sha256``) expired at
    ``at``: the statement, for the expiry's transaction."""
    return (
        "INSERT OR REPLACE INTO expired_months (month, bytes, sha256, expired_at) "
        "VALUES (?, ?, ?, ?)",
        [month, size, sha256, at],
    )


def begun(path: str) -> Statement:
    """The expiry of ``path`` (under archive_root) recorded, its files not yet gone:
    the statement, for the expiry's transaction."""
    return ("INSERT OR IGNORE INTO expiring (path) VALUES (?)", [path])


async def interrupted(manifest: Manifest) -> list[str]:
    """The paths whose expiry was recorded and not finished, in path order."""
    return [r[0] for r in await manifest.rows("SELECT path FROM expiring ORDER BY path")]


async def finished(manifest: Manifest, path: str) -> None:
    await manifest.run("DELETE FROM expiring WHERE path = ?", [path])


async def expired_months(manifest: Manifest, months: list[str]) -> list[tuple[str, int]]:
    """Which of ``months`` expired, and when (ms), in month order."""
    marks = ",".join("?" * len(months))
    rows = await manifest.rows(
        f"SELECT month, expired_at FROM expired_months WHERE month IN ({marks}) ORDER BY month",
        months,
    )
    return [(str(m), int(at)) for m, at in rows]


async def month_count(manifest: Manifest) -> int:
    """How many event months have expired."""
    [(n,)] = await manifest.rows("SELECT count(*) FROM expired_months")
    return int(n)


def expired_detail(entry: Entry, kept: RemoteObject | None = None, now: int = 0) -> str:
    """Why a tombstone cannot be restored, when it became one, and what the
    bucket still keeps of it: ``kept``, its gzip's remote copy, which expiry
    left because the bucket's lock kept it (``now``: to tell whether the lock
    still runs)."""
    when = "" if entry.expired_at is None else f" on {day_of(entry.expired_at)}"
    if kept is None:
        return (
            f"expired{when} (past [retention]): no copy is left anywhere; its sha256 was "
            f"{entry.sha256}"
        )
    until = kept.retain_until
    keeps = (
        f"the bucket's lock keeps its remote copy until {day_of(until)}"
        if until is not None and until > now
        else "its remote copy is still in the bucket, until the next expiry deletes it"
    )
    return (
        f"expired{when} (past [retention]), not restored; {keeps}: coldkeep cat --expired "
        f"reads entry {entry.id} from it until then; its sha256 is {entry.sha256}"
    )
