"""Legal holds placed and released on a site (store/legalholds.py keeps them and
audits each change).

Invariants: no archive lock is taken, so a hold goes on even while a long pass or
an expiry runs (the expiry checks each item before it deletes); a hold refused
on a site no pass has run on creates nothing there; the months a hold may cover
are those archived here or shipped, less those already expired.

With the bucket's Object Lock on (``[remote] object_lock``), each change is then
mirrored to the bucket's S3 legal holds (remote/bucketlock.py): the hold is in
the manifest first, whatever the bucket answers; what it could not be told is
said, and the next ship tells it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..base.errors import RemoteError
from ..base.fsutil import ensure_dir
from ..remote.bucketlock import mirror_holds
from ..remote.connect import connected
from ..store import expiry, legalholds
from ..store.legalholds import Hold
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects
from .session import Sessions, open_manifest


@dataclass(frozen=True)
class HoldChange:
    """A hold placed or released, and what the bucket's legal holds became."""

    hold: Hold
    placed: int = 0  # S3 legal holds placed on shipped objects
    lifted: int = 0
    problems: list[str] = field(default_factory=list)  # what the bucket was not told

    def to_dict(self) -> dict[str, Any]:
        bucket = {"placed": self.placed, "lifted": self.lifted, "problems": self.problems}
        return {**self.hold.to_dict(), "bucket": bucket}


async def _mirrored(sessions: Sessions, manifest: Manifest, hold: Hold) -> HoldChange:
    remote = sessions.settings.remote
    objects = RemoteObjects(manifest)
    if remote is None or (remote.locks is None and not await objects.any_legal_hold()):
        return HoldChange(hold)
    try:
        async with connected(remote) as store:
            done = await mirror_holds(manifest, store, remote, sessions.clock())
    except RemoteError as err:
        return HoldChange(hold, problems=[f"{err}; the next ship tells the bucket"])
    return HoldChange(hold, done.placed, done.lifted, done.problems)


async def place(
    sessions: Sessions, scope: str, target: str, reason: str, until: int | None, ahead: bool
) -> HoldChange:
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
        hold = await put(manifest, at=at, origin=origin, months=kept, ahead=ahead)
        return await _mirrored(sessions, manifest, hold)


async def release(sessions: Sessions, hold_id: int) -> HoldChange:
    """A hold lifted (its row kept, ended now)."""
    if await sessions.nothing_archived():  # no hold was placed: nothing to create
        raise legalholds.HoldError(f"there is no hold {hold_id} (no hold was ever placed here)")
    async with await open_manifest(sessions.layout, sessions.settings.live_root) as manifest:
        hold = await legalholds.release(
            manifest, hold_id, at=sessions.clock(), origin=sessions.origin
        )
        return await _mirrored(sessions, manifest, hold)
