"""The fleet's lake as an operation: which shipped months it lacks (read
without the lock) and their export (``coldkeep lake export``), under the
archive lock as a ship is, recorded in the site's history.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..base.cancel import CancelToken
from ..base.configremote import RemoteSettings
from ..base.errors import UsageError
from ..events.query import TimeRange
from ..remote.connect import connected
from ..remote.lakebackfill import LakeBackfill, LakePlan, lake_plan
from ..remote.shiprun import ShipReport
from ..store.manifest import Manifest
from .session import Sessions


def _enabled(sessions: Sessions) -> None:
    if not sessions.settings.lake.enabled:
        raise UsageError(
            f"{sessions.settings.config_path}: [lake] enabled is not set: nothing is written "
            "to the lake (set it, then run this again)"
        )


async def plan(sessions: Sessions, within: TimeRange) -> LakePlan:
    """The shipped months in ``within`` the lake lacks."""
    _enabled(sessions)
    manifest = await Manifest.open_existing(sessions.layout.manifest)
    if manifest is None:
        return LakePlan([], 0)
    async with manifest:
        return await lake_plan(sessions.settings, manifest, within)


async def export(
    sessions: Sessions, remote: RemoteSettings, months: Sequence[str], cancel: CancelToken | None
) -> ShipReport:
    """``months`` written into the lake (those still behind when it runs)."""
    _enabled(sessions)
    async with sessions.open("lake-export", {"months": list(months)}, cancel) as current:
        current.start(f"{len(months)} months to {remote.url}/lake/")
        async with connected(remote) as store:
            report = await LakeBackfill(
                sessions.settings, current.manifest, store, stream=sessions.stream,
                step=sessions.steps.hook(), clock=sessions.clock, reads=sessions.limiter,
                cancel=cancel,
            ).backfill(months, sessions.identities)  # fmt: skip
        current.finish("failed" if report.failed else "ok", report.to_dict())
        return report
