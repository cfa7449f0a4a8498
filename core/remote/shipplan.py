"""What a ship would do now, read without the lock (the console's confirm, the
CLI's ``ship --plan``): pending files and their bytes, local copies it would
drop or that legal holds keep, event months changed since their last snapshot,
and those shipped before the fleet's lake had them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..base.config import Settings
from ..base.layout import Layout
from ..base.times import DAY_MS
from ..store.lakeobjects import LakeObjects, behind
from ..store.legalholds import Hold
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from .months import is_due, local_months
from .shipdrops import held_back


@dataclass(frozen=True)
class ShipPlan:
    """What a ship would do now, read without the lock: the console's confirm."""

    url: str
    pending_files: int
    pending_entries: int
    pending_bytes: int
    drops: int  # local copies past keep_local_days that it would drop
    drop_bytes: int
    keep_local_days: float
    months: int = 0  # event months changed since their last snapshot
    held: int = 0  # local copies past keep_local_days that legal holds keep
    lake: int = 0  # shipped event months not yet in the fleet's lake ([lake])


async def ship_plan(settings: Settings, manifest: Manifest | None, now: int) -> ShipPlan:
    """What a ship would do now (``manifest`` None: there is none yet, nothing to
    ship)."""
    remote = settings.remote
    assert remote is not None
    if manifest is None:
        return ShipPlan(f"{remote.url}/{remote.site}", 0, 0, 0, 0, 0, remote.keep_local_days)
    objects = RemoteObjects(manifest)
    totals = await objects.totals()
    drops: list[RemoteObject] = []
    held: dict[str, Hold] = {}
    if not remote.keeps_local:
        drops = await objects.droppable(now - int(remote.keep_local_days * DAY_MS))
        held = await held_back(manifest, drops, now)
        drops = [o for o in drops if o.path not in held]
    layout = Layout(settings.archive_root)
    latest = await objects.latest_months()
    local = await asyncio.to_thread(local_months, layout)
    months = [m for m, month in local.items() if is_due(month, latest.get(m))]
    lake = 0
    if settings.lake.enabled:
        current = await LakeObjects(manifest).current()
        lake = sum(
            m not in months and behind(current, m, latest[m].local_sha256)
            for m in local
            if m in latest
        )
    return ShipPlan(
        f"{remote.url}/{remote.site}",
        totals.pending_files,
        totals.pending_entries,
        totals.pending_bytes,
        len(drops),
        sum(o.bytes for o in drops),
        remote.keep_local_days,
        len(months),
        len(held),
        lake,
    )
