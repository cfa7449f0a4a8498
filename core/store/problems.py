"""The quarantine: live files a pass could not settle (``file_problems``, one row
per relpath), each with the reason and the remedy, for status, the console's
findings and the metrics.

A per-file failure (an I/O error reading it, a failed verify, a source whose
removal the filesystem refuses, a recovery item that could not be settled, a
name that cannot be archived) is never a pass failure: it is recorded here and
the pass goes on with every other file.

Invariants:
- ``record`` upserts: a file met again keeps its first sighting, moves its last
  and counts the passes that met it.
- A row goes when its file is settled (archived, gone, no longer eligible):
  ``clear``; the pass that settles a file clears it.
- ``relpath`` is the live path as the rest of the manifest stores it (TEXT).
"""

from __future__ import annotations

import dataclasses
import errno
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .manifest import Manifest

# What failed, and what the operator does about each kind.
REMEDIES: dict[str, str] = {
    "io_error": (
        "reading it or writing its gzip failed: check the disks (dmesg) and the file's "
        "permissions; the next pass tries again"
    ),
    "verify_failed": "check the archive's disk (dmesg) and memory; the next pass tries again",
    "unlink_refused": (
        "the file is archived but its removal is refused (chattr +i / +a, or a read-only "
        "mount): clear the attribute (chattr -i -a) or remove it by hand"
    ),
    "unsettled": "the next pass's recovery tries again; check the disk (dmesg) if it stays",
    "displaced": (
        "a newer file took this name while coldkeep checked it: the older file is kept "
        "under the name shown; move it where it belongs"
    ),
    "unarchivable": "rename the file, or exclude it in the config",
    "recovery": "the next pass's recovery tries again; check the disk (dmesg) if it stays",
}


# The kinds a pass's file phase settles: a row of one goes once its file is no
# longer offered by the scan (the others are recovery's to settle).
PASS_KINDS = ("io_error", "verify_failed", "unarchivable")
# The kinds recovery meets again at every pass while they last (a leftover, a
# committed source not yet removed): a row of one it did not meet again goes.
RECOVERY_KINDS = ("recovery", "unlink_refused", "unsettled")


def unlink_kind(code: int | None) -> str:
    """A source's removal that failed: refused by the filesystem (an immutable or
    append-only file, a read-only mount), or failing (EIO)."""
    refused = code in (errno.EPERM, errno.EACCES, errno.EROFS)
    return "unlink_refused" if refused else "unsettled"


@dataclass(frozen=True)
class NewProblem:
    relpath: str
    kind: str  # a key of REMEDIES
    reason: str  # the error, one line

    @property
    def remedy(self) -> str:
        return REMEDIES.get(self.kind, REMEDIES["recovery"])


@dataclass(frozen=True)
class FileProblem:
    relpath: str
    kind: str
    reason: str
    remedy: str
    first_seen: int  # ms since the epoch
    last_seen: int
    first_pass: int | None
    last_pass: int | None
    times: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line(self) -> str:
        """One line for a terminal: the file, why, what to do."""
        return f"{self.relpath}: {self.reason} ({self.kind}; {self.remedy})"


_COLUMNS = "relpath, kind, reason, remedy, first_seen, last_seen, first_pass, last_pass, times"


def _one_line(text: str) -> str:
    return " ".join(text.split())


async def record(
    manifest: Manifest, problems: Iterable[NewProblem], *, at: int, pass_id: int | None
) -> None:
    """Each problem upserted (a file met again: its last sighting and count move)."""
    rows = [
        (p.relpath, p.kind, _one_line(p.reason), p.remedy, at, at, pass_id, pass_id)
        for p in problems
    ]
    if not rows:
        return
    await manifest.run_many(
        f"INSERT INTO file_problems ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1) "
        "ON CONFLICT (relpath) DO UPDATE SET kind = excluded.kind, reason = excluded.reason, "
        "remedy = excluded.remedy, last_seen = excluded.last_seen, "
        "last_pass = excluded.last_pass, times = file_problems.times + 1",
        rows,
    )


async def clear(manifest: Manifest, relpaths: Iterable[str]) -> None:
    """The files settled: their rows go (a file never listed is nothing to do)."""
    rows = [(r,) for r in relpaths]
    if rows:
        await manifest.run_many("DELETE FROM file_problems WHERE relpath = ?", rows)


async def clear_except(manifest: Manifest, kinds: Iterable[str], keep: Iterable[str]) -> None:
    """The rows of ``kinds`` whose file is not in ``keep`` go: a pass that looked at
    every eligible file knows which of its problems are gone."""
    keep_set = set(keep)
    stale = [p.relpath for p in await listing(manifest, kinds) if p.relpath not in keep_set]
    await clear(manifest, stale)


async def listing(manifest: Manifest, kinds: Iterable[str] | None = None) -> list[FileProblem]:
    """Every problem (of ``kinds``), the most recent first."""
    rows = await manifest.rows(
        f"SELECT {_COLUMNS} FROM file_problems ORDER BY last_seen DESC, relpath"
    )
    wanted = None if kinds is None else set(kinds)
    return [FileProblem(*r) for r in rows if wanted is None or r[1] in wanted]


async def count(manifest: Manifest) -> int:
    [(n,)] = await manifest.rows("SELECT count(*) FROM file_problems")
    return int(n)
