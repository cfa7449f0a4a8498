"""Doctor's check of the room on archive_root: the backlog counted as a pass would
count it (``plan.make_plan``), against the free space and the reserve.
"""

from __future__ import annotations

import os
import sqlite3

from ..base.config import Settings
from ..base.layout import Layout
from ..base.space import RESERVE_BYTES, free_bytes, human_bytes, mount_of
from ..files.scan import ScanError
from ..store.connection import ManifestError
from ..store.manifest import Manifest
from .doctorfinding import Finding
from .doctorfs import filesystem_of, nearest_existing
from .plan import Plan, make_plan


async def count_backlog(settings: Settings) -> tuple[Plan | None, str | None]:
    """The plan a pass would work through, read-only; or why it could not be counted."""
    try:
        manifest = await Manifest.open(Layout(settings.archive_root).manifest, readonly=True)
    except (ManifestError, sqlite3.Error):
        # None yet (before the first pass) or not readable as it is: without its
        # holds the count only errs high, which is the safe side for free space.
        manifest = None
    try:
        if manifest is None:
            return await make_plan(settings), None
        async with manifest:
            return await make_plan(settings, manifest), None
    except (ScanError, OSError, sqlite3.Error) as err:
        return None, str(err)


def check_space(settings: Settings, plan: Plan | None, error: str | None) -> Finding:
    archive = settings.archive_root
    if plan is None:
        return Finding(
            "space",
            "fail",
            f"the backlog could not be counted: {error}",
            "fix what it names (coldkeep plan says the same)",
        )
    rows = plan.events.rows if plan.events else 0
    event_bytes = plan.events.approx_bytes if plan.events else 0
    backlog = plan.bytes + event_bytes
    what = f"{plan.files} files ({human_bytes(plan.bytes)})"
    if rows:
        what += f" and {rows:,} event rows (~{human_bytes(event_bytes)})"
    free = free_bytes(archive)
    if free is None:
        return Finding("space", "warn", f"the backlog is {what}; free space on {archive} unknown")
    room = f"{human_bytes(free)} free on {mount_of(archive)}; the backlog is {what}"
    if free < RESERVE_BYTES:
        return Finding(
            "space", "fail", f"{room}: the filesystem is full", "free space on archive_root"
        )
    if free >= backlog + RESERVE_BYTES:
        return Finding("space", "ok", f"{room} before compression: it fits")
    same = filesystem_of(archive).device == os.stat(nearest_existing(settings.live_root)).st_dev
    return Finding(
        "space",
        "warn",
        f"{room} before compression: it fits only if it compresses to "
        f"{100 * (free - RESERVE_BYTES) / backlog:.0f} % or less"
        + ("; each archived source is removed from the same filesystem" if same else ""),
        "free space on archive_root, or let the passes go in steps: a pass that fills the "
        "disk stops cleanly and says so",
    )
