"""The ship's event months: each month whose database changed since its last
snapshot (and the month passes still add rows to) copied consistently
(SQLite's backup API), shipped under a new name each time it changed
(``events/<YYYY-MM>.<sha12>.db.gz``, packed with seek points: monthgz.py; a
sealed site's ``events/<YYYY-MM>.<sha12>.db``, sealed), its rows counted and
recorded for the manifest snapshot.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ..base.codec import CorruptGzip, Digest
from ..store.remoteobjects import MonthCount, RemoteObject
from . import monthgz
from .fetch import remove_scratch
from .months import LocalMonth, count_rows, is_due, local_months, snapshot_db
from .shiplake import ShipLake
from .shiprun import MonthSnap, draft_row


def month_path(month: str, sha256: str, packed: bool) -> str:
    """Where a snapshot of event month ``month`` whose database has that sha256
    is shipped (``packed``: as a gzip): a new name each time its content
    changed."""
    return f"events/{month}.{sha256[:12]}.db" + (monthgz.SUFFIX if packed else "")


@dataclass(frozen=True)
class MonthTaken:
    """A consistent copy of a month's database in a scratch file (``db``), its
    size and sha256 (``got``), its rows; ``gz`` names the scratch it is packed
    into, if it is."""

    snap: MonthSnap
    db: Path
    got: Digest
    gz: Path


@dataclass(frozen=True)
class Upload:
    """What a copy ships as: the file sent and its size and sha256; a packed
    month, the database's too and the gzip's points."""

    local: Path
    sent: Digest
    plain: Digest | None = None
    points: str | None = None

    def draft(self, path: str, now: int, snap: MonthSnap) -> RemoteObject:
        return replace(draft_row(path, now, snap), seek_points=self.points)


class ShipMonths(ShipLake):
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
            if is_due(db, last) or await self.lake_due(month, last):
                await self._ship_month(month, db, last, count)
            elif count is None or count.sig != db.sig:
                await self._count_month(month, db, last, count)

    async def _ship_month(
        self, month: str, db: LocalMonth, last: RemoteObject | None, counted: MonthCount | None
    ) -> None:
        try:
            async with self._month_snapshot(month, db) as taken:
                snap = taken.snap
                # Counted before it ships: a snapshot the server refuses still leaves
                # the manifest snapshot knowing what the month holds.
                await self._record_count(snap, counted)
                if last is not None and last.local_sha256 == taken.got.sha256:
                    await self.objects.set_source_sig(last.path, db.sig, snap.rows)
                    if await self.lake_due(month, last):
                        await self.ship_lake_month(month, taken.db, taken.got.sha256)
                    return
                up = await self._upload_of(taken, packed=self.seal is None)
                path = month_path(month, taken.got.sha256, up.plain is not None)
                lock = await self.placer.month_lock(month)
                placed = await self.placer.place(
                    path, up.local, up.draft(path, self.clock(), snap), lock,
                    got=up.sent, plain=up.plain,
                )  # fmt: skip
                if isinstance(placed, str):
                    self._problem(path, placed)
                    return
                self._accepted(*placed)
                self.report.months += 1
                if self.settings.lake.enabled:
                    await self.ship_lake_month(month, taken.db, taken.got.sha256)
        except (OSError, sqlite3.Error, CorruptGzip) as err:
            self._problem(f"events/{month}.db", f"{db.db}: cannot be snapshotted: {err}")

    @asynccontextmanager
    async def _month_snapshot(self, month: str, db: LocalMonth) -> AsyncIterator[MonthTaken]:
        """A consistent copy of ``month``'s database in a scratch file, its rows
        counted, its size and sha256; the scratch (and its gzip) removed after
        the block."""
        tmp = self.layout.scratch(f"ship-{month}")
        gz = self.layout.scratch(f"ship-{month}-gz")
        try:
            await asyncio.to_thread(snapshot_db, db.db, tmp)
            snap = MonthSnap(month, db.sig, await asyncio.to_thread(count_rows, tmp))
            yield MonthTaken(snap, tmp, await self.placer.digest(tmp), gz)
        finally:
            await asyncio.to_thread(remove_scratch, tmp, self.layout)
            await asyncio.to_thread(remove_scratch, gz, self.layout)

    async def _upload_of(self, taken: MonthTaken, *, packed: bool) -> Upload:
        """What ``taken`` ships as: packed into its gzip, checked (monthgz.py),
        or the database itself (sealed on its way)."""
        if not packed:
            return Upload(taken.db, taken.got)
        gz = await asyncio.to_thread(
            monthgz.pack, taken.db, taken.gz, root=self.layout.root, cancel=self.cancel,
            limiter=self.placer.reads,
        )  # fmt: skip
        if gz.plain != taken.got:
            raise OSError(f"{taken.db}: changed while it was packed (a scratch file: report it)")
        return Upload(taken.gz, gz.packed, gz.plain, gz.points)

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
