"""Legal holds placed and released on a site (store/legalholds.py keeps them and
audits each change).

Invariants: no archive lock is taken, so a hold goes on even while a long pass or
an expiry runs (the expiry checks each item before it deletes); a hold refused
on a site no pass has run on creates nothing there; the months a hold may cover
are those archived here or shipped, less those already expired.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

from ..base.fsutil import ensure_dir
from ..store import expiry, legalholds
from ..store.legalholds import Hold
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects
from .session import Sessions, open_manifest


async def place(
    sessions: Sessions, scope: str, target: str, reason: str, until: int | None, ahead: bool
) -> Hold:
    """A hold placed; a unit or path hold that covers nothing archived now is
    refused unless placed ``ahead``."""
    settings, layout = sessions.settings, sessions.layout
    put = partial(legalholds.place, scope=scope, target=target, reason=reason, until=until)
    at, origin = sessions.clock(), sessions.origin
    local = await asyncio.to_thread(layout.event_months)
    if await sessions.nothing_archived():
        # A refusal is made on an empty manifest in memory, and creates nothing.
        async with await Manifest.open(Path(":memory:")) as empty:
            await put(empty, at=at, origin=origin, months=local, ahead=ahead)
        root = settings.archive_root
        await asyncio.to_thread(ensure_dir, root, root=root)  # made on first use
    async with await open_manifest(layout, settings.live_root) as manifest:
        shipped = await RemoteObjects(manifest).latest_months()
        candidates = sorted(local.keys() | shipped.keys())
        gone = {m for m, _ in await expiry.expired_months(manifest, candidates)}
        kept = [m for m in candidates if m not in gone]
        return await put(manifest, at=at, origin=origin, months=kept, ahead=ahead)


async def release(sessions: Sessions, hold_id: int) -> Hold:
    """A hold lifted (its row kept, ended now)."""
    if await sessions.nothing_archived():  # no hold was placed: nothing to create
        raise legalholds.HoldError(f"there is no hold {hold_id} (no hold was ever placed here)")
    async with await open_manifest(sessions.layout, sessions.settings.live_root) as manifest:
        return await legalholds.release(
            manifest, hold_id, at=sessions.clock(), origin=sessions.origin
        )
