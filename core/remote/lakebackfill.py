"""``coldkeep lake export``: the fleet's lake given the months shipped before it
was enabled, or whose export failed, without waiting for them to change.

Which months (``lake_plan``, read without the lock): each month whose newest
snapshot in the bucket has no current lake file made from the same database,
in the range asked. Each is written from its database here when that is still
the one shipped (a consistent copy taken as a ship takes it), else from the
snapshot in the bucket (downloaded, checked against what ship recorded), then
put as a ship puts it (shiplake.py). A month whose database changed since its
last ship is left to the next ship, which snapshots it and writes both.

Invariants:
- Resumable: a month is recorded once its file is read back; run again, an
  export goes on with the months still behind, and what a kill left in the
  bucket is deleted as a ship deletes it.
- The same checks as a ship before anything is written, and what earlier
  ships left settled (``Shipper.prepare``), and a manifest snapshot after, so
  that a rebuild from the bucket knows the new files.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..base.config import Settings
from ..base.errors import RemoteError
from ..base.layout import Layout
from ..events.query import TimeRange
from ..store.lakeobjects import LakeObjects, behind
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from .fetch import remove_scratch
from .months import local_months
from .objectstore import RemoteFatal
from .rebuild import RemoteRebuild
from .sealing import Identities, SealError
from .ship import Shipper
from .shiprun import ShipReport


@dataclass(frozen=True)
class LakeMonth:
    """A month the lake lacks: its newest snapshot's rows, and whether its
    database here is read (else the snapshot in the bucket)."""

    month: str
    rows: int | None
    here: bool


@dataclass(frozen=True)
class LakePlan:
    months: list[LakeMonth]
    current: int  # months in range whose lake file is made from their newest snapshot

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def lake_plan(settings: Settings, manifest: Manifest, within: TimeRange) -> LakePlan:
    """The shipped months (those ``within`` holds) the lake lacks."""
    latest = await RemoteObjects(manifest).latest_months()
    current = await LakeObjects(manifest).current()
    local = await asyncio.to_thread(local_months, Layout(settings.archive_root))
    wanted = sorted(m for m in latest if within.holds_month(m))
    due = [m for m in wanted if behind(current, m, latest[m].local_sha256)]
    return LakePlan(
        [LakeMonth(m, latest[m].row_count, m in local) for m in due], len(wanted) - len(due)
    )


class LakeBackfill(Shipper):
    """The months a plan named, written into the lake."""

    async def backfill(
        self, months: Sequence[str], identities: Identities | None = None
    ) -> ShipReport:
        """``months`` written (those still behind); ``identities`` open a sealed
        snapshot of one only the bucket holds."""
        await self.prepare()
        latest = await self.objects.latest_months()
        local = await asyncio.to_thread(local_months, self.layout)
        for month in months:
            self.cancel.check()
            last = latest.get(month)
            if last is None or not await self.lake_due(month, last):
                continue
            db = local.get(month)
            if db is None:
                await self._from_bucket(last, identities)
                continue
            async with self._month_snapshot(month, db) as taken:
                if taken.got.sha256 != last.local_sha256:
                    self._notice(
                        "info",
                        f"{month}: changed since its last ship; the next ship writes it to "
                        "the lake with its new snapshot",
                    )
                    continue
                await self.ship_lake_month(month, taken.db, last.local_sha256)
        if self.report.lake:
            await self.ship_manifest()
        return self.report

    async def _from_bucket(self, last: RemoteObject, identities: Identities | None) -> None:
        """A month only the bucket holds, written from its newest snapshot there."""
        month = last.month or ""
        tmp = self.layout.scratch(f"lake-fetch-{month}")
        fetcher = RemoteRebuild(
            self.layout, self.store, self.remote.site, stream=self.stream,
            limiter=self.placer.limiter, cancel=self.cancel, identities=identities,
        )  # fmt: skip
        try:
            await fetcher.fetch_object(last, tmp)
            await self.ship_lake_month(month, tmp, last.local_sha256)
        except RemoteFatal:
            raise
        except (RemoteError, SealError) as err:
            self._problem(f"lake/{month}", f"{month}: its snapshot cannot be read: {err}")
        finally:
            await asyncio.to_thread(remove_scratch, tmp, self.layout)
