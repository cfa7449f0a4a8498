"""The local verify's state in the manifest: each entry's mark from its last
verify (``entries.verified_at``, ``entries.verify_error``), the cursor a
time-boxed verify resumes from (``verify_state``), which entries a verify reads,
and the ``Manifest``'s methods for them (``VerifyState``).

Invariants:
- A verify reads the kept entries whose gzip has a local copy (not one dropped
  once it was shipped), told by the copies mark the schema keeps (``remote``:
  2 is remote only), not by a list of every remote-only path; those it leaves
  out are counted for ``verify --remote``, which reads them.
- A mark is the last verify's: ``verified_at`` with the error it found, or with
  none (a gzip found good clears its earlier failure).
- The cursor is the last entry id checked and when its round began, one row,
  none between rounds: a verify that runs out of time resumes after it, and one
  that reaches the end removes it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .entries import HAS_GZIP, Entries, Entry

# The entries a verify reads: kept, with a local copy.
_VERIFIABLE = f"{HAS_GZIP} AND remote < 2"
# The same, read from the schema's partial index of them (its WHERE is this one).
_VERIFIABLE_ENTRIES = f"entries INDEXED BY entries_local WHERE {_VERIFIABLE}"


class VerifyState(Entries):
    """The ``Manifest``'s verify marks, its cursor, and the entries a verify
    reads, failed, or leaves to ``verify --remote``."""

    async def mark_verified(self, ids: Iterable[int], at: int) -> None:
        await self._update_ids(
            "UPDATE entries SET verified_at = ?, verify_error = NULL WHERE id IN", [at], ids
        )

    async def mark_verify_failed(self, entry_id: int, at: int, error: str) -> None:
        await self.run(
            "UPDATE entries SET verified_at = ?, verify_error = ? WHERE id = ?",
            (at, error, entry_id),
        )

    async def verify_cursor(self) -> tuple[int, int] | None:
        """(last entry id checked, when the round began), or None between rounds."""
        rows = await self.rows("SELECT cursor, round_started FROM verify_state")
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    async def set_verify_cursor(self, cursor: int | None, round_started: int = 0) -> None:
        if cursor is None:
            await self.run("DELETE FROM verify_state")
        else:
            await self.run(
                "INSERT INTO verify_state (id, cursor, round_started) VALUES (1, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET cursor = excluded.cursor, "
                "round_started = excluded.round_started",
                (cursor, round_started),
            )

    async def verifiable_entries(self, *, after_id: int = 0, limit: int) -> list[Entry]:
        """Up to ``limit`` entries whose gzip should be in the archive to verify
        (kept, and not dropped for its remote copy), after ``after_id``, in id
        order."""
        # In id order from the cursor by the rowid (the status index would cost
        # a lookup per kept entry before the first row).
        return await self._select(
            f"NOT INDEXED WHERE {_VERIFIABLE} AND id > ?", (after_id,), limit=limit
        )

    async def verifiable_ids(self) -> list[int]:
        """The ids of every entry ``verifiable_entries`` gives (a sample's pool)."""
        return [r[0] for r in await self.rows(f"SELECT id FROM {_VERIFIABLE_ENTRIES}")]

    async def verifiable_totals(self, *, after_id: int = 0) -> tuple[int, int]:
        """(how many, their bytes) of the verifiable entries after ``after_id``."""
        [(n, size)] = await self.rows(
            f"SELECT count(*), coalesce(sum(bytes), 0) FROM {_VERIFIABLE_ENTRIES} AND id > ?",
            [after_id],
        )
        return int(n), int(size)

    async def remote_only_count(self, *, after_id: int = 0) -> int:
        """The entries ``verifiable_entries`` leaves out because their gzip's local
        copy was dropped once it was shipped (``verify --remote`` reads those)."""
        if not after_id:
            [(n,)] = await self.rows(
                "SELECT coalesce(sum(entries), 0) FROM entry_totals "
                f"WHERE remote = 2 AND {HAS_GZIP}"
            )
        else:
            [(n,)] = await self.rows(
                f"SELECT count(*) FROM entries NOT INDEXED WHERE {HAS_GZIP} AND remote = 2 "
                "AND id > ?",
                [after_id],
            )
        return int(n)

    async def entries_failed_verify(self, limit: int) -> list[Entry]:
        return await self._select("WHERE verify_error IS NOT NULL", (), limit=limit)

    async def verify_failure_count(self) -> int:
        [(n,)] = await self.rows("SELECT count(*) FROM entries WHERE verify_error IS NOT NULL")
        return int(n)
