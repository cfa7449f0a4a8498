"""``coldkeep ship``: the archive copied to the remote tier, then local copies
dropped once their remote copy is proven and old enough.

One ship, under the archive lock:

    identity   with object_lock, this host's clock within 5 minutes of the
               bucket's (bucketclock.py); the site's prefix its own (the oldest
               claim there this site's: identity.py), and no later snapshot of
               this very site there that it did not ship (a clone: snapshots.py)
    settle     local copies recorded as dropped but still there (a crash
               between the record and the unlink) are unlinked; what uploads
               cut short left on the remote is removed; copies no row records
               any more are deleted once the bucket's lock lets them go, and
               tracked until then (remote/place.py); lake objects a kill left
               unrecorded, and superseded ones, deleted as the lock allows
    files      each archive file with kept entries and no remote copy (a bundle
               once, for all its members): placed (remote/place.py: sealed
               where asked, locked and held as it must be, uploaded
               create-only, read back, recorded from what the bucket said)
    events     each event month whose database changed since its last snapshot,
               the month passes still add rows to as well: a consistent copy
               (SQLite's backup API) shipped as ``events/<YYYY-MM>.<sha12>.db``
               (a new name each time it changed), its rows counted and
               recorded for the manifest snapshot (``remote/months.py``); with
               ``[lake]``, each month snapshotted also written as Parquet into
               the fleet's lake (shiplake.py), the objects it replaced deleted
    drop       local copies shipped more than ``keep_local_days`` ago: the remote
               copy re-checked (HEAD), the drop recorded, the file unlinked
               (identity re-checked), its directory fsynced
    manifest   a snapshot of the manifest, of a new generation, as
               ``manifest/g<generation>-<hex>.db`` with its statement signed by the
               site key beside it (``.sig``), when anything changed or one is owed;
               the newest KEEP_SNAPSHOTS of the site's own kept. It records each
               month's rows as counted: a rebuild from the bucket names what it
               cannot give back. Then the month snapshots that neither it nor
               the snapshot shipped before it names as its month's newest are
               let go as copies no row records (shipsnapshot.py)

Every object lives at ``<prefix>/<site>/<path>``, ``path`` being its place under
``archive_root``. Every object goes in, and every copy no row records comes
out, through the placer (remote/place.py), which holds the upload's invariants:

Invariants:
- Nothing is recorded as remote until the server's own size and SHA-256 equal
  the local file's. An object already at its key counts as shipped only if its
  bytes are the same; different bytes are a problem to report, never replaced.
- With ``[remote] object_lock``, nothing is recorded until a HEAD shows it
  locked at least as asked (bucketlock.py: until its expiry, by the bucket's
  clock; the legal holds in force); one already at its key with a shorter lock
  or none has its retention extended first (a retention can always grow), one
  just uploaded without it is a problem.
- A local copy is dropped only when its row says it was shipped and verified,
  ``keep_local_days`` have passed, its last remote verify did not fail, no
  legal hold covers it, and the server, asked right before, still holds its
  size and SHA-256.
- Read back means: the size and SHA-256 by HEAD (the bytes themselves where the
  server keeps no checksum), or, for a group of uploads whose PUT answers gave
  the SHA-256 sent, their sizes by one listing where that is fewer requests.
- Every step is announced (``object_uploaded``, ``object_recorded``,
  ``manifest_shipped``, ``months_superseded``, ``local_drop_recorded``,
  ``local_dropped``; the placer's ``loose_*``); a crash anywhere is settled by
  the next ship: an uploaded object not recorded is found at its key (same
  bytes) and recorded, or deleted (a sealed one: its key is new each time); a
  superseded month snapshot is deleted as a loose key; a drop recorded and not
  done is done.
- A remote that cannot be used at all (``RemoteFatal``: unreachable,
  credentials, no bucket) stops the ship at the first object that meets it, in
  one line; what was not shipped stays pending, nothing is recorded for it.
- Nothing is written, read back or dropped until the remote marker says the
  remote is the one this site shipped to (remote/marker.py); the first ship
  writes it.
- A copy ``verify --remote`` proved bad is replaced through the same upload
  and read-back (``reship``: from the local copy; ``reship_month``: from a
  snapshot of the month's database taken then); a bad row goes only once what
  replaces it is recorded.
- Cancelled, it stops between objects.
"""

from __future__ import annotations

import asyncio

from ..base.errors import RemoteError
from ..base.signing import SiteKey
from ..base.stream import Phase
from ..store import sitestate
from ..store.remoteobjects import RemoteObject
from ..store.sitestate import SiteState
from .bucketclock import bucket_now, check_clock
from .bucketlock import mirror_holds
from .fetch import clear_scratch
from .identity import check_claim, keep_key
from .marker import MARKER_KEY, check_marker
from .objectstore import RemoteFatal
from .place import Sent
from .sealing import SealError
from .shipdrops import ShipDrops
from .shipreplace import ShipReplace
from .shiprun import ShipReport, draft_row
from .shipsnapshot import ShipSnapshot
from .snapshots import check_lineage

# Objects in flight at once: a remote's latency, not the CPU, is what they wait on.
IN_FLIGHT = 8
# Uploads whose sizes one listing reads back together: at most a listing's page
# of keys, and no more bytes than a stop should leave unrecorded.
GROUP_OBJECTS = 1000
GROUP_BYTES = 1 << 30


class Shipper(ShipReplace, ShipSnapshot, ShipDrops):
    """One ship, its phases in the order the module says."""

    async def run(self) -> ShipReport:
        state, signer = await self.prepare()
        if signer is not None and self.seal is not None:
            for problem in await keep_key(
                self.store, self.remote.site, signer, self.seal, self.layout
            ):
                self.report.problems.append(problem)
        await self.ship_files()
        await self.ship_months()
        await self.mirror_holds()
        for notice in self.store.take_notices():
            self._notice("warning", notice)
        await self.drop_local()
        r = self.report
        changed = r.uploaded or r.already or r.months or r.lake or r.dropped or self._counted
        if changed or state.owed:
            await self.ship_manifest()
        r.pending = len(await self.objects.pending_files())
        return r

    async def prepare(self) -> tuple[SiteState, SiteKey | None]:
        """The checks before anything is written, and what earlier ships left
        settled: the site's state and its signing key (None: none to sign with)."""
        # Before anything is written, read or dropped: the remote is the one
        # this site shipped to (a folder whose disk is not mounted is not), and
        # its prefix is this site's (not another host's of the same name).
        if self.remote.locks is not None:
            await check_clock(self.store, self.clock(), "a ship that locks what it uploads")
        await check_marker(self.store, self.objects, self.remote.site, self.layout, may_write=True)
        state = await sitestate.read_state(self.manifest)
        key = await self.signing_key()
        signer = key if isinstance(key, SiteKey) else None
        for notice in await check_claim(
            self.store, self.remote.site, state.site_id, signer, self.layout
        ):
            self._notice("warning", notice)
        await self.settle_drops()
        await asyncio.to_thread(clear_scratch, self.layout)
        await self.store.clear_incomplete(self.key(""))
        # The marker is every site's: once it is there, its first write cut
        # short is no one's upload under way.
        await self.store.clear_incomplete(MARKER_KEY)
        await self.settle_loose()
        # A later snapshot of this very site that this host did not ship: a
        # clone ships as it. Both writing one prefix would lose one's files.
        trust = await self.own_trust()
        now = await bucket_now(self.store, self.clock())
        went_on = await check_lineage(self.store, self.remote.site, state, trust, now)
        if went_on is not None and went_on.statement is not None:
            # A manifest rebuilt from the gzips: the site's snapshots go on.
            await sitestate.recovered(self.manifest, went_on.statement.generation, went_on.key)
            state = await sitestate.read_state(self.manifest)
            self._notice(
                "info",
                f"this manifest was rebuilt here: its snapshots go on after generation "
                f"{went_on.statement.generation}, the site's newest in the bucket",
            )
        # After the lineage: what it lists under the site's lake folder and no
        # row records is deleted, so it must be this site's to settle.
        await self.settle_lake()
        return state, signer

    async def mirror_holds(self) -> None:
        """The bucket's legal holds made to match the site's: what a hold placed
        or released while the bucket could not be told, or during this ship,
        left undone."""
        if self.remote.locks is None and not await self.objects.any_legal_hold():
            return
        done = await mirror_holds(self.manifest, self.store, self.remote, self.clock())
        self.report.holds_placed += done.placed
        self.report.holds_lifted += done.lifted
        for problem in done.problems:
            self.report.problems.append(problem)

    async def ship_files(self) -> None:
        pending = await self.objects.pending_files()
        self.stream.emit(Phase("ship", len(pending), await self.objects.pending_bytes()))
        gate = asyncio.Semaphore(IN_FLIGHT)
        waiting: list[tuple[Sent, RemoteObject]] = []
        waiting_bytes = 0

        async def one(path: str) -> None:
            nonlocal waiting, waiting_bytes
            async with gate:
                self.cancel.check()
                sent = await self._upload_file(path)
                if sent is None:
                    return
                draft = draft_row(path, self.clock())
                if not self.placer.listable(sent):
                    self._accepted(sent, await self.placer.confirm(sent, draft))
                    return
            waiting.append((sent, draft))
            waiting_bytes += sent.size
            if len(waiting) >= GROUP_OBJECTS or waiting_bytes >= GROUP_BYTES:
                group, waiting, waiting_bytes = waiting, [], 0
                await self._confirm_group(group)

        tasks = [asyncio.ensure_future(one(p)) for p in pending]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # Stopped (or failed): the uploads in flight stop too, before the
            # session that holds the lock and the manifest ends under them.
            # What was uploaded and not yet read back is found at its key by
            # the next ship, read back and recorded then.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        await self._confirm_group(waiting)

    async def _upload_file(self, path: str) -> Sent | None:
        try:
            local = self.layout.abs(path)
            lock = await self.placer.file_lock(path)
            # Only a sealed bundle needs its members: each is a stream of its own.
            spans = await self.placer.spans_of(path) if self.seal is not None else None
            return await self.placer.upload(path, local, lock, spans=spans)
        except RemoteFatal:
            raise
        except RemoteError as err:
            self._problem(path, str(err))
        except (OSError, ValueError, SealError) as err:
            self._problem(
                path, f"{path}: the local copy cannot be read: {err} (run coldkeep verify)"
            )
        return None

    async def _confirm_group(self, group: list[tuple[Sent, RemoteObject]]) -> None:
        for sent, row in await self.placer.confirm_group(group):
            self._accepted(sent, row)
