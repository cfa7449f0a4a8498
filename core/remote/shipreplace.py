"""Remote copies ``verify --remote`` proved bad, replaced through the ship's own
upload and read-back: a file from its local copy (``reship``), a month from a
snapshot of its database taken then (``reship_month``).

Invariant: a bad row goes only once what replaces it is recorded.
"""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import dataclass, replace

from ..base.codec import CorruptGzip, Digest, Span
from ..base.errors import RemoteError
from ..store.remoteobjects import RemoteObject
from .months import local_months
from .objectstore import ObjectLock, RemoteFatal, RemoteLocked
from .shipmonths import ShipMonths, Upload, month_path
from .shiprun import MonthSnap, draft_row


@dataclass(frozen=True)
class MonthReshipped:
    """A bad month snapshot replaced (``Shipper.reship_month``): ``path`` is the
    snapshot that now holds the month's database (the bad one's own path when
    its bytes were the same), ``shipped`` whether it was uploaded now, or was
    recorded already (a newer snapshot held them)."""

    path: str
    shipped: bool


class ShipReplace(ShipMonths):
    """Bad remote copies replaced, for verify --remote."""

    async def reship(self, obj: RemoteObject) -> str | None:
        """A remote copy proven bad or gone, replaced from the local copy: the bad
        object deleted, the local one sent create-only and read back, its row
        renewed. None when done, else why not (the row keeps its failure)."""
        local = self.layout.abs(obj.path)
        try:
            got = await self.placer.digest(local)
        except OSError as err:
            return f"{local}: the local copy cannot be read: {err}"
        if got != Digest(obj.local_bytes, obj.local_sha256):
            return f"{local}: the local copy is not what was shipped either (run coldkeep verify)"
        lock = await self.placer.lock_of(obj)
        spans = await self.placer.spans_of(obj.path)
        return await self._replace(obj, Upload(local, got), lock, spans, None)

    async def reship_month(self, obj: RemoteObject) -> MonthReshipped | str:
        """Event month snapshot ``obj``, proven bad or gone, replaced from the
        month's database here: a snapshot of it taken now. The same bytes as
        ``obj``: the bad object deleted, the new one sent create-only in its
        place, read back, its row renewed. Other bytes (rows came since ``obj``
        was taken): shipped as the month's new snapshot unless one recorded
        holds them already, and only then the bad object deleted and its row
        forgotten. Else why not: the bad row stays, with its failure."""
        assert obj.month is not None
        db = (await asyncio.to_thread(local_months, self.layout)).get(obj.month)
        if db is None:
            return f"no database of {obj.month} is here to snapshot"
        counted = (await self.objects.month_counts()).get(obj.month)
        try:
            async with self._month_snapshot(obj.month, db) as taken:
                snap = taken.snap
                await self._record_count(snap, counted)
                lock = await self.placer.lock_of(obj)
                if taken.got == Digest(obj.local_bytes, obj.local_sha256):
                    # In its own place: packed as it was (a month shipped before
                    # months were packed, or sealed, is the database itself), but
                    # sealed as the database where the site seals now.
                    packed = obj.seek_points is not None and self.seal is None
                    up = await self._upload_of(taken, packed=packed)
                    why = await self._replace(obj, up, lock, None, snap)
                    return MonthReshipped(obj.path, True) if why is None else why
                up = await self._upload_of(taken, packed=self.seal is None)
                path = month_path(obj.month, taken.got.sha256, up.plain is not None)
                shipped = await self.objects.get(path) is None
                why = await self._place(path, up, lock, snap) if shipped else None
        except (OSError, sqlite3.Error, CorruptGzip) as err:
            return f"{db.db}: cannot be snapshotted: {err}"
        if why is not None:
            return why
        try:
            await self.store.delete(self.key(obj.key))
        except RemoteLocked as err:
            return f"{path} holds {db.db} now, but {err}: the bad copy's row stays until it goes"
        except RemoteFatal:
            raise
        except RemoteError as err:
            return f"{path} holds {db.db} now, but the bad copy was not deleted: {err}"
        await self.objects.forget(obj.path)
        return MonthReshipped(path, shipped)

    async def _place(
        self, path: str, up: Upload, lock: ObjectLock | None, month: MonthSnap
    ) -> str | None:
        """Event month snapshot ``up`` sent create-only for ``path``, read back
        and recorded (verified now); None when done, else why not."""
        now = self.clock()
        draft = replace(up.draft(path, now, month), verified_at=now)
        placed = await self.placer.place(path, up.local, draft, lock, got=up.sent, plain=up.plain)
        return placed if isinstance(placed, str) else None

    async def _replace(
        self,
        obj: RemoteObject,
        up: Upload,
        lock: ObjectLock | None,
        spans: list[Span] | None,
        month: MonthSnap | None,
    ) -> str | None:
        """``obj``'s bad object deleted and ``up`` sent create-only in its place,
        read back, its row renewed; None when done, else why not (the row
        keeps its failure)."""
        try:
            await self.store.delete(self.key(obj.key))
        except RemoteLocked as err:
            return f"{err}: the bad copy stays until the bucket lets it go; the local copy is kept"
        except RemoteFatal:
            raise
        except RemoteError as err:
            return str(err)
        now = self.clock()
        draft = replace(
            draft_row(obj.path, now, month),
            local_gone_at=obj.local_gone_at,
            local_present=obj.local_present,
            verified_at=now,
            seek_points=up.points,
        )
        placed = await self.placer.place(
            obj.path, up.local, draft, lock, spans=spans, got=up.sent, plain=up.plain, instead=True
        )
        if isinstance(placed, str):
            return placed
        await self.objects.settled(obj.key)  # deleted above
        return None
