"""The ship's local drops: local copies shipped more than ``keep_local_days``
ago and held by no legal hold, dropped (the remote copy re-checked by HEAD, the
drop recorded, the file unlinked if it is still the one shipped, its
directory fsynced); a drop recorded and not done, done by the next ship.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

from ..base.errors import RemoteError
from ..base.fsutil import FileIdentity, fsync_dir, identity_or_none, unlink_if_identity
from ..base.times import DAY_MS
from ..store.legalholds import Hold, active, held_paths
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject
from .objectstore import RemoteFatal
from .shiprun import ShipRun


async def held_back(manifest: Manifest, objs: list[RemoteObject], now: int) -> dict[str, Hold]:
    """Which of ``objs`` a legal hold keeps local."""
    return await held_paths(manifest, await active(manifest, now), [o.path for o in objs])


class ShipDrops(ShipRun):
    """The drop phase of a ship, and the settling of drops a crash left."""

    async def drop_local(self) -> None:
        if self.remote.keeps_local:
            return
        before = self.clock() - int(self.remote.keep_local_days * DAY_MS)
        droppable = await self.objects.droppable(before)
        held = await held_back(self.manifest, droppable, self.clock())
        self.report.held = len(held)
        for obj in droppable:
            if obj.path in held:
                continue
            self.cancel.check()
            await self._drop(obj)

    async def _drop(self, obj: RemoteObject) -> None:
        root = self.layout.root
        local = self.layout.abs(obj.path)
        ident = await asyncio.to_thread(identity_or_none, local, root=root)
        if ident is None or not ident.is_regular or ident.size != obj.local_bytes:
            what = "gone" if ident is None else f"not the {obj.local_bytes} bytes shipped"
            self.report.problems.append(
                f"{local}: {what}; its remote copy is kept, nothing dropped"
            )
            return
        why = await self._still_remote(obj)
        if why is not None:
            # Held back from every drop until verify --remote ships it again.
            await self.objects.mark_verified(obj.path, self.clock(), why)
            self.report.problems.append(f"{why}; the local copy {local} is kept")
            return
        await self.objects.mark_local_gone(obj.path, self.clock())
        await self._announce("local_drop_recorded", obj.path)
        await self._unlink(obj.path, local, ident)

    async def _still_remote(self, obj: RemoteObject) -> str | None:
        """The remote copy re-checked right before its local copy goes (it may
        have been deleted or replaced since it was shipped): None when the
        server still holds its size and SHA-256, else why not."""
        key = self.key(obj.key)
        try:
            info = await self.store.head(key)
        except RemoteFatal:
            raise
        except RemoteError as err:
            return str(err)
        if info is None:
            return f"{self.store.where(key)}: no longer there (run coldkeep verify --remote)"
        if info.size != obj.bytes or info.sha256 not in (obj.sha256, None):
            return (
                f"{self.store.where(key)}: now {info.size} bytes, sha256 {info.sha256}, not "
                "what was shipped (run coldkeep verify --remote)"
            )
        return None

    async def _unlink(self, path: str, local: Path, ident: FileIdentity) -> None:
        root = self.layout.root
        outcome = await asyncio.to_thread(
            functools.partial(unlink_if_identity, local, ident, root=root, durably="local.dropped")
        )
        if outcome == "changed":
            self._problem(
                path, f"{local} changed before its drop; left in place (its remote copy restores)"
            )
        await self.objects.confirm_local_gone(path)
        await self._announce("local_dropped", path)
        if outcome == "removed":
            self.report.dropped += 1
            self.report.dropped_bytes += ident.size

    async def settle_drops(self) -> None:
        """Drops a crash interrupted between the record and the unlink."""
        root = self.layout.root
        for path in await self.objects.unconfirmed_drops():
            local = self.layout.abs(path)
            ident = await asyncio.to_thread(identity_or_none, local, root=root)
            if ident is not None:
                await self._unlink(path, local, ident)
                continue
            await asyncio.to_thread(
                fsync_dir, local.parent, root=root, site="local.settled"
            )  # the unlink, durable
            await self.objects.confirm_local_gone(path)
