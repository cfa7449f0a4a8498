"""Restore intents (``restore_intents``): what a restore is about to write in a
live directory, recorded before it writes and cleared after, and the
``Manifest``'s methods for them (``RestoreIntents``).

Invariants:
- A restore intent is committed before a restore writes anything in a live
  directory, and cleared after, so a crash mid-restore leaves only names the
  intent lists (``<target>.restore-partial``), removed by recovery.
- A restore's change to an entry's status and restore grace is committed in the
  same transaction as the intent it goes with (``IntentChange``): the entry is
  never marked restored without the intent that undoes it, nor given back while
  the intent stays.
- Changes sent while a commit of them is in flight go into the next one together
  (one transaction, one fsync: a restore's workers record and clear their
  intents this way), all of them or none; an intent's id is the next free one,
  taken inside the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aiosqlite

from ..base.grouped import Grouped
from ..base.times import now_ms
from .connection import ManifestConnection
from .entries import EntryStatus

EntryGrace = tuple[EntryStatus, int | None]  # an entry's status and restore grace (hold_until)

_ADD_INTENT = "INSERT INTO restore_intents (entry_id, target, created_at) VALUES (?, ?, ?)"
_ADD_INTENTS = "INSERT INTO restore_intents (id, entry_id, target, created_at) VALUES (?, ?, ?, ?)"
_CLEAR_INTENT = "DELETE FROM restore_intents WHERE id = ?"


@dataclass(frozen=True)
class RestoreIntent:
    id: int
    entry_id: int | None
    target: Path
    created_at: int


@dataclass(frozen=True)
class IntentChange:
    """One restore's change to the intents, committed as a whole: an intent added
    (entry id, target, created at), or one cleared (its id), and an entry's
    status and restore grace set with it (entry id, status, hold_until)."""

    add: tuple[int | None, str, int] | None = None
    clear: int | None = None
    grace: tuple[int, EntryStatus, int | None] | None = None


class RestoreIntents(ManifestConnection):
    """The ``Manifest``'s restore intents: recorded, cleared (each with the
    entry's status and grace when asked), listed."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        super().__init__(db, path)
        # Intent changes waiting for the commit after the one in flight.
        self._intents = Grouped(self._intents_transaction)

    async def add_restore_intent(
        self, entry_id: int | None, target: Path, *, grace: EntryGrace | None = None
    ) -> RestoreIntent:
        """The intent committed, and with ``grace`` the entry's status and restore
        grace set in the same transaction (``change_intents``)."""
        created = now_ms()
        change = IntentChange(
            add=(entry_id, str(target), created),
            grace=None if entry_id is None or grace is None else (entry_id, *grace),
        )
        row_id = await self.change_intents(change)
        assert row_id is not None
        return RestoreIntent(row_id, entry_id, target, created)

    async def clear_restore_intent(
        self, intent_id: int, *, entry_id: int | None = None, grace: EntryGrace | None = None
    ) -> None:
        """The intent gone, and with ``grace`` the entry's status and restore
        grace given back in the same transaction (``change_intents``)."""
        back = None if entry_id is None or grace is None else (entry_id, *grace)
        await self.change_intents(IntentChange(clear=intent_id, grace=back))

    async def change_intents(self, change: IntentChange) -> int | None:
        """``change`` committed, durable on return; the new intent's id when it
        adds one. Changes sent while a commit of them is in flight go into the
        next one together (one transaction, one fsync, a few trips to the
        connection whatever their number; all of them or none): the restore's
        workers record and clear their intents this way."""
        return await self._intents.submit(change)

    async def _intents_transaction(self, changes: Sequence[IntentChange]) -> list[int | None]:
        """Every change in one transaction, each kind of statement in one trip; the
        ids of the intents added (the next free ones, taken inside it)."""
        async with self._gate:
            if len(changes) == 1 and changes[0].grace is None:
                return [await self._one_intent_change(changes[0])]
            async with self._transaction():
                return await self._intent_statements(changes)

    async def _one_intent_change(self, change: IntentChange) -> int | None:
        """A lone add or clear: one statement, its own transaction, one trip."""
        if change.add is not None:
            return await self._insert(_ADD_INTENT, change.add)
        await self._run(_CLEAR_INTENT, (change.clear,))
        return None

    async def _intent_statements(self, changes: Sequence[IntentChange]) -> list[int | None]:
        row_ids: list[int | None] = [None] * len(changes)
        adds = [i for i, c in enumerate(changes) if c.add is not None]
        if adds:
            [(last,)] = await self._rows("SELECT coalesce(max(id), 0) FROM restore_intents")
            for n, i in enumerate(adds):
                row_ids[i] = last + 1 + n
            rows = [(row_ids[i], *(changes[i].add or ())) for i in adds]
            await self._run_many(_ADD_INTENTS, rows)
        clears = [(c.clear,) for c in changes if c.clear is not None]
        if clears:
            await self._run_many(_CLEAR_INTENT, clears)
        graces = [(g[1], g[2], g[0]) for c in changes if (g := c.grace) is not None]
        if graces:
            await self._run_many(
                "UPDATE entries SET status = ?, hold_until = ? WHERE id = ?", graces
            )
        return row_ids

    async def restore_intents(self) -> list[RestoreIntent]:
        rows = await self.rows(
            "SELECT id, entry_id, target, created_at FROM restore_intents ORDER BY id"
        )
        return [RestoreIntent(r[0], r[1], Path(r[2]), r[3]) for r in rows]
