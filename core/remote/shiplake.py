"""The ship's lake phase (``[lake] enabled``): each event month the ship takes a
snapshot of is also written as Parquet (events/lakeexport.py) and put at a new
key in the fleet's lake (lakelayout.py), read back, recorded
(store/lakeobjects.py); the month's older objects are then deleted once the
bucket's lock lets them go.

Invariants:
- A lake object is recorded only once the bucket gave back its size and
  SHA-256 equal to the file written; it is put create-only, locked and held as
  the month's snapshots are (``Placer.month_lock``), in the class event months
  go to.
- A month's objects are replaced, never overwritten: the new one at a key of a
  greater generation, the old ones deleted after the new one is recorded. A
  reader taking the greatest generation of each month never reads a month
  twice, nor half of one, whenever it reads.
- What a kill between the upload and the record leaves (an object no row
  records under the site's lake folder) is recorded as superseded by the next
  ship and deleted as the others are; so is what a manifest rebuilt from an
  older snapshot does not know. A key that is not a lake file's name is left
  alone: it is not coldkeep's.
- Expiry deletes a month's lake objects with its snapshots (ops/expire.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.errors import RemoteError
from ..base.lazy import lazy
from ..events.laketypes import ExportFailed
from ..store.lakeobjects import LakeObject, LakeObjects, behind
from ..store.remoteobjects import RemoteObject
from .fetch import remove_scratch
from .lakelayout import lake_key, parse, site_prefix
from .objectstore import ObjectInfo, ObjectStore, RemoteFatal, RemoteLocked, RemoteMissing
from .shiprun import ShipRun

# Imported when a month is first written: a ship without a lake never loads DuckDB.
if TYPE_CHECKING:
    from ..events import lakeexport
else:
    globals().update(lazy("coldkeep.core", lakeexport="events.lakeexport"))


async def retire_lake(store: ObjectStore, lake: LakeObjects, obj: LakeObject, now: int) -> bool:
    """``obj`` deleted from the bucket and its row forgotten, unless the
    bucket's lock keeps it (its recorded retain-until not reached by the
    bucket's clock ``now``, or the bucket refusing): True once it is gone."""
    if obj.retain_until is not None and obj.retain_until > now:
        return False
    try:
        await store.delete(obj.key)
    except RemoteLocked:
        return False
    except RemoteMissing:
        pass  # already gone: nothing left to track
    await lake.forget(obj.key)
    return True


class ShipLake(ShipRun):
    """The lake phase of a ship."""

    _lake_now: dict[str, LakeObject] | None = None

    @property
    def lake(self) -> LakeObjects:
        return LakeObjects(self.manifest)

    async def lake_due(self, month: str, last: RemoteObject | None) -> bool:
        """Whether ``month``'s newest snapshot has no current lake object made
        from the same database (the lake enabled since it shipped, or its
        export failed)."""
        if not self.settings.lake.enabled or last is None:
            return False
        if self._lake_now is None:
            self._lake_now = await self.lake.current()
        return behind(self._lake_now, month, last.local_sha256)

    async def settle_lake(self) -> None:
        """Objects under the site's lake folder that no row records, recorded as
        superseded; every superseded one deleted that the bucket lets go."""
        if self.settings.lake.enabled:
            await self._adopt_unrecorded()
        await self._retire(await self.lake.superseded())

    async def _retire(self, superseded: list[LakeObject]) -> None:
        """Each of ``superseded`` deleted and forgotten where the bucket lets it go."""
        if not superseded:
            return
        now = await self.placer.bucket_now()
        for obj in superseded:
            self.cancel.check()
            if await retire_lake(self.store, self.lake, obj, now):
                self.report.lake_deleted += 1
                await self._announce("lake_deleted", obj.key)

    async def _adopt_unrecorded(self) -> None:
        site = self.remote.site
        await self.store.clear_incomplete(site_prefix(site))
        known = await self.lake.keys()
        at = self.clock()
        async for info in self.store.list_objects(site_prefix(site)):
            name = parse(info.key)
            if info.key in known or name is None or name.site != site:
                continue
            await self.lake.adopt(
                LakeObject(info.key, name.month, "", 0, info.size, info.sha256 or "", at),
                superseded_at=at,
            )

    async def ship_lake_month(self, month: str, db: Path, sha256: str) -> None:
        """``month``'s snapshot ``db`` (whose database has that sha256) written
        as Parquet, put in the lake, read back and recorded; the month's older
        objects then deleted where the bucket lets them go."""
        out = self.layout.scratch(f"lake-{month}")
        rows_scratch = self.layout.scratch(f"lake-{month}-rows")
        try:
            rows = await asyncio.to_thread(
                lakeexport.write_parquet, db, self.settings.events.table, out, rows_scratch
            )
            placed = await self._place_lake(month, out, sha256, rows)
        except ExportFailed as err:
            placed = str(err)
        except OSError as err:
            placed = f"{db}: cannot be written as Parquet for the lake: {err}"
        finally:
            await asyncio.to_thread(remove_scratch, out, self.layout)
            await asyncio.to_thread(remove_scratch, rows_scratch, self.layout)
        if isinstance(placed, str):
            self._problem(f"lake/{month}", placed)
            return
        if self._lake_now is not None:
            self._lake_now[month] = placed
        self.report.lake += 1
        await self._retire([o for o in await self.lake.of_month(month) if not o.current])

    async def _place_lake(self, month: str, out: Path, sha256: str, rows: int) -> LakeObject | str:
        got = await self.placer.digest(out)
        generation = await self._generation(month)
        key = lake_key(self.remote.site, month, generation, sha256)
        lock = await self.placer.month_lock(month)
        try:
            await asyncio.to_thread(self.placer.limiter.take, got.bytes, self.cancel)
            put = await self.store.put_new(
                key, out, got.bytes, got.sha256, lock,
                storage_class=self.placer.class_of(f"events/{month}.db"),
            )  # fmt: skip
            await self._announce("lake_uploaded", key)
            info = await self.placer.check_at(key, got.bytes, got.sha256, put.created, lock)
        except RemoteFatal:
            raise
        except RemoteError as err:
            return str(err)
        if isinstance(info, str):
            return info
        obj = _recorded(key, month, sha256, rows, info, self.clock())
        await self.lake.record(obj)
        await self._announce("lake_recorded", key)
        return obj

    async def _generation(self, month: str) -> int:
        """A generation greater than any this site wrote for ``month``: the
        bucket's clock, unless a lake object of the month says a later one (a
        clock set back)."""
        newest = max(
            (n.generation for o in await self.lake.of_month(month) if (n := parse(o.key))),
            default=0,
        )
        return max(await self.placer.bucket_now(), newest + 1)


def _recorded(
    key: str, month: str, source: str, rows: int, info: ObjectInfo, at: int
) -> LakeObject:
    return LakeObject(
        key, month, source, rows, info.size, info.sha256 or "", at,
        retain_until=info.lock.retain_until, legal_hold=info.lock.legal_hold,
        version=info.version,
    )  # fmt: skip
