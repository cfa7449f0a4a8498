"""The ship's manifest snapshot: the manifest copied, of a new generation, as
``manifest/g<generation>-<hex>.db`` with its statement signed by the site key
beside it (``.sig``), read back; the newest KEEP_SNAPSHOTS of the site's own
kept, the older ones pruned; then the event month snapshots neither of the
two newest names let go.
"""

from __future__ import annotations

import asyncio
import hashlib

from ..base.errors import RemoteError
from ..base.signing import SiteKey
from ..store import sitestate
from .bucketclock import bucket_now
from .bucketlock import lock_for, snapshot_retain_until
from .fetch import remove_scratch
from .identity import site_key
from .months import snapshot_db
from .objectstore import ObjectLock, RemoteFatal
from .shipdrops import held_back
from .shiprun import ShipRun
from .snapshots import (
    SIG,
    Statement,
    Trust,
    generation_of,
    prune,
    sign,
    snapshot_key,
    statement_for,
)

KEEP_SNAPSHOTS = 10


class ShipSnapshot(ShipRun):
    """The manifest snapshot phase of a ship."""

    async def signing_key(self) -> SiteKey | str:
        """The site's signing key (made on a site that has none), or why there
        is none to sign snapshots with: found once a ship."""
        if self._key is None:
            self._key = await site_key(self.manifest, self.layout.root, self.clock())
        return self._key

    async def own_trust(self) -> Trust:
        """This site's own snapshots: its id, every key it ever signed with."""
        state = await sitestate.read_state(self.manifest)
        keys = frozenset(k.fingerprint for k in await sitestate.keys(self.manifest))
        return Trust(state.site_id, keys, "this site's own keys")

    async def ship_manifest(self) -> None:
        """A snapshot of the manifest, of a new generation, shipped with its
        statement signed by the site key beside it; then the site's old
        snapshots pruned."""
        # Bumped and committed first: the snapshot holds its own generation, and
        # one stays owed (its generation not shipped) until one ships.
        generation = await sitestate.next_generation(self.manifest)
        key = await self.signing_key()
        if isinstance(key, str):
            self._problem("manifest", f"no manifest snapshot shipped: {key}")
            return
        state = await sitestate.read_state(self.manifest)
        path = snapshot_key(generation, self.seal.fingerprint if self.seal else None)
        # Before the copy, so that it says so too (a manifest placed from it
        # keeps what its snapshot names): the copy each month's newest is.
        await self.objects.name_newest_months(generation)
        tmp = self.layout.scratch("ship-manifest")
        try:
            await asyncio.to_thread(snapshot_db, self.layout.manifest, tmp)
            # Written down after the copy (the snapshot does not name itself as
            # loose) and before the upload: a stop leaves nothing unsettled.
            await self.objects.loose(path, path, self.clock())
            taken = await bucket_now(self.store, self.clock())
            until = snapshot_retain_until(self.settings.retention, taken)
            lock = lock_for(self.remote, until, False, taken)
            stored = await self.placer.put_as(path, tmp, lock)
            size, sha = stored.bytes, stored.sha256
            why = await self._snapshot_read_back(path, size, sha, lock)
            if why is None:
                await self._announce("snapshot_uploaded", path)
                statement = statement_for(
                    self.remote.site, state.site_id, generation, taken, path, size, sha,
                    key.fingerprint,
                )  # fmt: skip
                body = sign(key, statement)
                await self.store.put_bytes(
                    self.key(path + SIG), body, scratch=self.layout.scratch("sig"),
                    root=self.layout.root, lock=lock,
                )  # fmt: skip
                body_sha = hashlib.sha256(body).hexdigest()
                why = await self._snapshot_read_back(path + SIG, len(body), body_sha, lock)
        except RemoteFatal:
            raise
        except RemoteError as err:
            why = str(err)
        finally:
            await asyncio.to_thread(remove_scratch, tmp, self.layout)
        if why is not None:
            self._problem(path, why)
            return
        await sitestate.shipped(self.manifest, path)
        self.report.snapshot = self.key(path)
        await self._announce("manifest_shipped", path)
        await self._prune_snapshots(path)
        await self._let_superseded_go(generation, state.snapshot)

    async def _let_superseded_go(self, generation: int, last: str | None) -> None:
        """The event month snapshots that neither this manifest snapshot nor
        the one shipped from here before it (``last``) names as its month's
        newest, and no legal hold keeps, let go: their rows gone and their keys
        loose, then deleted, or tracked while the bucket's lock keeps them. A
        month that changes at every ship is held about twice in the bucket,
        not once a ship; a rebuild from either snapshot finds each month's
        copy it names."""
        before = generation if last is None else generation_of(last)
        if before is None:
            return  # a snapshot name of no generation: nothing is known superseded
        found = await self.objects.superseded_months(min(before, generation))
        held = await held_back(self.manifest, found, self.clock())
        gone = [obj for obj in found if obj.path not in held]
        if not gone:
            return
        await self.objects.supersede(gone, self.clock())
        self.report.superseded += len(gone)
        await self._announce("months_superseded", gone[-1].path)
        await self.settle_loose()

    async def _snapshot_read_back(
        self, path: str, size: int, sha: str, lock: ObjectLock | None
    ) -> str | None:
        """Why the object just put at ``path`` is not held whole and locked as
        asked (None: it is)."""
        key = self.key(path)
        info = await self.store.head(key)
        if info is None or info.size != size or info.sha256 not in (sha, None):
            return f"{self.store.where(key)}: did not read back whole"
        if lock is not None and not lock.satisfied_by(info.lock):
            return f"{self.store.where(key)}: stored with {info.lock}, not {lock}"
        return None

    async def _prune_snapshots(self, written: str) -> None:
        """All but the newest KEEP_SNAPSHOTS of the site's own snapshots deleted
        (never ``written``), less those the bucket's lock keeps (told by the
        time their statements sign, so none is asked for in vain); what is not
        the site's own is left, and said."""
        now = await bucket_now(self.store, self.clock())

        def locked(statement: Statement) -> bool:
            until = snapshot_retain_until(self.settings.retention, statement.taken_at)
            return self.remote.locks is not None and until is not None and until > now

        done = await prune(
            self.store, self.remote.site, await self.own_trust(), now,
            keep=KEEP_SNAPSHOTS, written=written, locked=locked,
        )  # fmt: skip
        self.report.snapshots_kept += done.kept
        for problem in done.problems:
            self._notice("warning", f"{problem}: an old snapshot is left for the next ship")
        if done.foreign:
            self._notice(
                "info",
                f"{len(done.foreign)} objects under {self.store.where(self.key('manifest/'))} "
                f"are not this site's own snapshots, left in place (the first: "
                f"{done.foreign[0]}); rebuild-manifest --from-remote --list names them",
            )
