"""The ship's event months: each month whose database changed since its last
snapshot (and the month passes still add rows to) copied consistently
(SQLite's backup API), shipped under a new name each time it changed
(``events/<YYYY-MM>.<sha12>.db``), its rows counted and recorded for the
manifest snapshot.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from ..base.codec import Digest
from ..store.remoteobjects import MonthCount, RemoteObject
from .fetch import remove_scratch
from .months import LocalMonth, count_rows, is_due, local_months, snapshot_db
from .shiprun import MonthSnap, ShipRun, draft_row


def month_path(month: str, sha256: str) -> str:
    """Where a snapshot of event month ``month`` with that sha256 is shipped: a
    new name each time its content changed."""
    return f"events/{month}.{sha256[:12]}.db"


class ShipMonths(ShipRun):
    """The months phase of a ship."""

    async def ship_months(self) -> None:
        """Every month whose database changed since its newest snapshot, then the
        counts of the others where none is recorded for what they hold now."""
        latest = await self.objects.latest_months()
        counted = await self.objects.month_counts()
        local = await asyncio.to_thread(local_months, self.layout)
        for month, db in local.items():
            self.cancel.check()
            last, count = latest.get(month), counted.get(month)
            if is_due(db, last):
                await self._ship_month(month, db, last, count)
            elif count is None or count.sig != db.sig:
                await self._count_month(month, db, last, count)

    async def _ship_month(
        self, month: str, db: LocalMonth, last: RemoteObject | None, counted: MonthCount | None
    ) -> None:
        try:
            async with self._month_snapshot(month, db) as (tmp, snap, got):
                # Counted before it ships: a snapshot the server refuses still leaves
                # the manifest snapshot knowing what the month holds.
                await self._record_count(snap, counted)
                if last is not None and last.local_sha256 == got.sha256:
                    await self.objects.set_source_sig(last.path, db.sig, snap.rows)
                    return
                path = month_path(month, got.sha256)
                lock = await self.placer.month_lock(month)
                placed = await self.placer.place(
                    path, tmp, draft_row(path, self.clock(), snap), lock, got=got
                )
                if isinstance(placed, str):
                    self._problem(path, placed)
                    return
                self._accepted(*placed)
                self.report.months += 1
        except (OSError, sqlite3.Error) as err:
            self._problem(f"events/{month}.db", f"{db.db}: cannot be snapshotted: {err}")

    @asynccontextmanager
    async def _month_snapshot(
        self, month: str, db: LocalMonth
    ) -> AsyncIterator[tuple[Path, MonthSnap, Digest]]:
        """A consistent copy of ``month``'s database in a scratch file, its rows
        counted, its size and sha256; the scratch removed after the block."""
        tmp = self.layout.scratch(f"ship-{month}")
        try:
            await asyncio.to_thread(snapshot_db, db.db, tmp)
            snap = MonthSnap(month, db.sig, await asyncio.to_thread(count_rows, tmp))
            yield tmp, snap, await self.placer.digest(tmp)
        finally:
            await asyncio.to_thread(remove_scratch, tmp, self.layout)

    async def _count_month(
        self, month: str, db: LocalMonth, last: RemoteObject | None, counted: MonthCount | None
    ) -> None:
        """A month unchanged since its newest snapshot whose rows are not recorded
        for what it holds now (it shipped before ships counted rows): counted,
        and its snapshot's count filled in (the same content)."""
        try:
            snap = MonthSnap(month, db.sig, await asyncio.to_thread(count_rows, db.db))
        except (OSError, sqlite3.Error) as err:
            self._problem(f"events/{month}.db", f"{db.db}: its rows cannot be counted: {err}")
            return
        await self._record_count(snap, counted)
        if last is not None and last.row_count is None:
            await self.objects.set_source_sig(last.path, db.sig, snap.rows)

    async def _record_count(self, snap: MonthSnap, counted: MonthCount | None) -> None:
        await self.objects.count_month(snap.month, snap.rows, snap.sig, self.clock())
        if counted is None or counted.rows != snap.rows:
            self._counted = True
