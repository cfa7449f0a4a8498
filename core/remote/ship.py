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
               tracked until then (remote/place.py)
    files      each archive file with kept entries and no remote copy (a bundle
               once, for all its members): placed (remote/place.py: sealed
               where asked, locked and held as it must be, uploaded
               create-only, read back, recorded from what the bucket said)
    events     each event month whose database changed since its last snapshot,
               the month passes still add rows to as well: a consistent copy
               (SQLite's backup API) shipped as ``events/<YYYY-MM>.<sha12>.db``
               (a new name each time it changed; earlier snapshots stay until
               the month expires), its rows counted and recorded for the
               manifest snapshot (``remote/months.py``)
    drop       local copies shipped more than ``keep_local_days`` ago: the remote
               copy re-checked (HEAD), the drop recorded, the file unlinked
               (identity re-checked), its directory fsynced
    manifest   a snapshot of the manifest, of a new generation, as
               ``manifest/g<generation>-<hex>.db`` with its statement signed by the
               site key beside it (``.sig``), when anything changed or one is owed;
               the newest KEEP_SNAPSHOTS of the site's own kept. It records each
               month's rows as counted: a rebuild from the bucket names what it
               cannot give back

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
  ``manifest_shipped``, ``local_drop_recorded``, ``local_dropped``; the
  placer's ``loose_*``); a crash anywhere is settled by the next ship: an
  uploaded object not recorded is found at its key (same bytes) and recorded,
  or deleted (a sealed one: its key is new each time); a drop recorded and not
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
import functools
import hashlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.cancel import CancelToken
from ..base.codec import Digest, Span
from ..base.config import Settings
from ..base.errors import RemoteError
from ..base.fsutil import (
    FileIdentity,
    fsync_dir,
    identity_or_none,
    unlink_if_identity,
)
from ..base.layout import Layout
from ..base.ratelimit import UNLIMITED, RateLimiter
from ..base.signing import SiteKey
from ..base.steps import StepHook, StepName, no_step
from ..base.stream import EventStream, FileDone, Level, Phase
from ..base.times import DAY_MS, now_ms
from ..store import sitestate
from ..store.legalholds import Hold, active, held_paths
from ..store.manifest import Manifest
from ..store.remoteobjects import MonthCount, RemoteObject, RemoteObjects
from .bucketclock import bucket_now, check_clock
from .bucketlock import lock_for, mirror_holds, snapshot_retain_until
from .fetch import clear_scratch, remove_scratch
from .identity import check_claim, keep_key, site_key
from .marker import check_marker
from .months import LocalMonth, count_rows, is_due, local_months, snapshot_db
from .objectstore import ObjectLock, ObjectStore, RemoteFatal, RemoteLocked
from .place import Placer, Sent
from .sealing import SealError
from .snapshots import (
    SIG,
    Statement,
    Trust,
    check_lineage,
    prune,
    sign,
    snapshot_key,
    statement_for,
)

KEEP_SNAPSHOTS = 10
# Objects in flight at once: a remote's latency, not the CPU, is what they wait on.
IN_FLIGHT = 8
# Uploads whose sizes one listing reads back together: at most a listing's page
# of keys, and no more bytes than a stop should leave unrecorded.
GROUP_OBJECTS = 1000
GROUP_BYTES = 1 << 30


@dataclass
class ShipReport:
    uploaded: int = 0  # objects sent
    already: int = 0  # objects found at their key with the same bytes, recorded
    bytes: int = 0  # sent
    months: int = 0  # event month snapshots shipped
    snapshot: str | None = None  # the manifest snapshot's key
    dropped: int = 0  # local copies removed
    dropped_bytes: int = 0
    held: int = 0  # local copies a legal hold keeps
    pending: int = 0  # archive files still to ship (after a problem or a stop)
    locked: int = 0  # objects shipped with a retain-until (object_lock)
    holds_placed: int = 0  # S3 legal holds placed on objects shipped before
    holds_lifted: int = 0
    snapshots_kept: int = 0  # old manifest snapshots the bucket's lock still keeps
    loose_deleted: int = 0  # copies no row records (a stopped upload's, rekey's old ones) deleted
    loose_kept: int = 0  # of those, the ones the bucket's lock still keeps (tracked)
    problems: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # about the server, said once

    @property
    def failed(self) -> bool:
        return bool(self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "uploaded": self.uploaded,
            "already": self.already,
            "bytes": self.bytes,
            "months": self.months,
            "snapshot": self.snapshot,
            "dropped": self.dropped,
            "dropped_bytes": self.dropped_bytes,
            "held": self.held,
            "pending": self.pending,
            "locked": self.locked,
            "holds_placed": self.holds_placed,
            "holds_lifted": self.holds_lifted,
            "snapshots_kept": self.snapshots_kept,
            "loose_deleted": self.loose_deleted,
            "loose_kept": self.loose_kept,
            "problems": self.problems,
            "notices": self.notices,
        }


@dataclass(frozen=True)
class _Month:
    """An event month's snapshot: its month, its database's signature when taken,
    its rows."""

    month: str
    sig: str
    rows: int


@dataclass(frozen=True)
class MonthReshipped:
    """A bad month snapshot replaced (``Shipper.reship_month``): ``path`` is the
    snapshot that now holds the month's database (the bad one's own path when
    its bytes were the same), ``shipped`` whether it was uploaded now, or was
    recorded already (a newer snapshot held them)."""

    path: str
    shipped: bool


def month_path(month: str, sha256: str) -> str:
    """Where a snapshot of event month ``month`` with that sha256 is shipped: a
    new name each time its content changed."""
    return f"events/{month}.{sha256[:12]}.db"


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
        held = await _held(manifest, drops, now)
        drops = [o for o in drops if o.path not in held]
    layout = Layout(settings.archive_root)
    latest = await objects.latest_months()
    local = await asyncio.to_thread(local_months, layout)
    months = [m for m, month in local.items() if is_due(month, latest.get(m))]
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
    )


def _draft(path: str, now: int, month: _Month | None = None) -> RemoteObject:
    """The row of ``path`` shipped at ``now`` (``month``: the event month whose
    snapshot it is) before the bucket confirms it: the placer fills in the
    object's place, size, sha256, lock and version from what it said."""
    return RemoteObject(
        path,
        0,
        "",
        now,
        month=month.month if month else None,
        source_sig=month.sig if month else None,
        row_count=month.rows if month else None,
    )


async def _held(manifest: Manifest, objs: list[RemoteObject], now: int) -> dict[str, Hold]:
    """Which of ``objs`` a legal hold keeps local."""
    return await held_paths(manifest, await active(manifest, now), [o.path for o in objs])


class Shipper:
    def __init__(
        self,
        settings: Settings,
        manifest: Manifest,
        store: ObjectStore,
        *,
        stream: EventStream,
        step: StepHook = no_step,
        clock: Callable[[], int] = now_ms,
        reads: RateLimiter = UNLIMITED,
        cancel: CancelToken | None = None,
    ) -> None:
        # Every object goes into the bucket, and every copy no row records
        # leaves it, through the placer; the ship shares its view of the site.
        self.placer = placer = Placer(
            settings, manifest, store, step=step, clock=clock, reads=reads, cancel=cancel
        )
        self.settings, self.remote, self.layout = settings, placer.remote, placer.layout
        self.manifest, self.objects, self.store = manifest, placer.objects, store
        self.step, self.clock, self.cancel = step, clock, placer.cancel
        self.seal = placer.seal
        self.stream = stream
        self.report = ShipReport()
        self._counted = False  # a month's row count changed: the manifest snapshot says it
        self._key: SiteKey | str | None = None  # signing_key's answer, once asked

    def key(self, path: str) -> str:
        return self.placer.key(path)

    async def run(self) -> ShipReport:
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
        changed = r.uploaded or r.already or r.months or r.dropped or self._counted
        if changed or state.owed:
            await self.ship_manifest()
        r.pending = len(await self.objects.pending_files())
        return r

    def _notice(self, level: Level, notice: str) -> None:
        self.report.notices.append(notice)
        self.stream.notice(level, notice)

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

    async def settle_loose(self) -> None:
        """What a ship or rekey stopped partway left in the bucket at a key no
        row records (a sealed upload never read back, an object sealed again and
        its old copy not yet deleted): deleted, or tracked while the bucket's
        lock keeps it (``Placer.settle_loose``)."""
        done = await self.placer.settle_loose()
        self.report.loose_deleted += done.deleted
        self.report.loose_kept += done.kept
        self.report.problems += done.problems

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

    async def _announce(self, name: StepName, path: str) -> None:
        await self.step(name, {"label": path})

    # files -------------------------------------------------------------------

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
                draft = _draft(path, self.clock())
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

    def _accepted(self, sent: Sent, row: RemoteObject | str) -> None:
        """An upload read back and recorded as ``row`` (else why not), counted."""
        if isinstance(row, str):
            self._problem(sent.path, row)
            return
        self.report.locked += row.retain_until is not None
        if sent.created:
            self.report.uploaded += 1
            self.report.bytes += sent.size
        else:
            self.report.already += 1
        how = "shipped" if sent.created else "exists"
        self.stream.emit(FileDone("ship", sent.path, how, sent.size))

    async def reship(self, obj: RemoteObject) -> str | None:
        """A remote copy proven bad or gone, replaced from the local copy: the bad
        object deleted, the local one sent create-only and read back, its row
        renewed. None when done, else why not (the row keeps its failure)."""
        local = self.layout.abs(obj.path)
        try:
            got = await self.placer.digest(local)
        except OSError as err:
            return f"{local}: the local copy cannot be read: {err}"
        if got != Digest(obj.local_bytes, obj.local_sha256):
            return f"{local}: the local copy is not what was shipped either (run coldkeep verify)"
        lock = await self.placer.lock_of(obj)
        spans = await self.placer.spans_of(obj.path)
        return await self._replace(obj, local, got, lock, spans, None)

    async def reship_month(self, obj: RemoteObject) -> MonthReshipped | str:
        """Event month snapshot ``obj``, proven bad or gone, replaced from the
        month's database here: a snapshot of it taken now. The same bytes as
        ``obj``: the bad object deleted, the new one sent create-only in its
        place, read back, its row renewed. Other bytes (rows came since ``obj``
        was taken): shipped as the month's new snapshot unless one recorded
        holds them already, and only then the bad object deleted and its row
        forgotten. Else why not: the bad row stays, with its failure."""
        assert obj.month is not None
        db = (await asyncio.to_thread(local_months, self.layout)).get(obj.month)
        if db is None:
            return f"no database of {obj.month} is here to snapshot"
        counted = (await self.objects.month_counts()).get(obj.month)
        try:
            async with self._month_snapshot(obj.month, db) as (tmp, snap, got):
                await self._record_count(snap, counted)
                lock = await self.placer.lock_of(obj)
                if got == Digest(obj.local_bytes, obj.local_sha256):
                    why = await self._replace(obj, tmp, got, lock, None, snap)
                    return MonthReshipped(obj.path, True) if why is None else why
                path = month_path(obj.month, got.sha256)
                shipped = await self.objects.get(path) is None
                why = await self._place(path, tmp, got, lock, snap) if shipped else None
        except (OSError, sqlite3.Error) as err:
            return f"{db.db}: cannot be snapshotted: {err}"
        if why is not None:
            return why
        try:
            await self.store.delete(self.key(obj.key))
        except RemoteLocked as err:
            return f"{path} holds {db.db} now, but {err}: the bad copy's row stays until it goes"
        except RemoteFatal:
            raise
        except RemoteError as err:
            return f"{path} holds {db.db} now, but the bad copy was not deleted: {err}"
        await self.objects.forget(obj.path)
        return MonthReshipped(path, shipped)

    async def _place(
        self, path: str, local: Path, got: Digest, lock: ObjectLock | None, month: _Month
    ) -> str | None:
        """Event month snapshot ``local`` sent create-only for ``path``, read back
        and recorded (verified now); None when done, else why not."""
        now = self.clock()
        draft = replace(_draft(path, now, month), verified_at=now)
        placed = await self.placer.place(path, local, draft, lock, got=got)
        return placed if isinstance(placed, str) else None

    async def _replace(
        self,
        obj: RemoteObject,
        local: Path,
        got: Digest,
        lock: ObjectLock | None,
        spans: list[Span] | None,
        month: _Month | None,
    ) -> str | None:
        """``obj``'s bad object deleted and ``local`` (``got``: the bytes shipped)
        sent create-only in its place, read back, its row renewed; None when
        done, else why not (the row keeps its failure)."""
        try:
            await self.store.delete(self.key(obj.key))
        except RemoteLocked as err:
            return f"{err}: the bad copy stays until the bucket lets it go; the local copy is kept"
        except RemoteFatal:
            raise
        except RemoteError as err:
            return str(err)
        now = self.clock()
        draft = replace(
            _draft(obj.path, now, month),
            local_gone_at=obj.local_gone_at,
            local_present=obj.local_present,
            verified_at=now,
        )
        placed = await self.placer.place(
            obj.path, local, draft, lock, spans=spans, got=got, instead=True
        )
        if isinstance(placed, str):
            return placed
        await self.objects.settled(obj.key)  # deleted above
        return None

    def _problem(self, path: str, message: str) -> None:
        self.report.problems.append(message)
        self.stream.emit(FileDone("ship", path, "error", detail=message))

    # event months -------------------------------------------------------------

    async def ship_months(self) -> None:
        """Every month whose database changed since its newest snapshot, then the
        counts of the others where none is recorded for what they hold now."""
        latest = await self.objects.latest_months()
        counted = await self.objects.month_counts()
        local = await asyncio.to_thread(local_months, self.layout)
        for month, db in local.items():
            self.cancel.check()
            last, count = latest.get(month), counted.get(month)
            if is_due(db, last):
                await self._ship_month(month, db, last, count)
            elif count is None or count.sig != db.sig:
                await self._count_month(month, db, last, count)

    async def _ship_month(
        self, month: str, db: LocalMonth, last: RemoteObject | None, counted: MonthCount | None
    ) -> None:
        try:
            async with self._month_snapshot(month, db) as (tmp, snap, got):
                # Counted before it ships: a snapshot the server refuses still leaves
                # the manifest snapshot knowing what the month holds.
                await self._record_count(snap, counted)
                if last is not None and last.local_sha256 == got.sha256:
                    await self.objects.set_source_sig(last.path, db.sig, snap.rows)
                    return
                path = month_path(month, got.sha256)
                lock = await self.placer.month_lock(month)
                placed = await self.placer.place(
                    path, tmp, _draft(path, self.clock(), snap), lock, got=got
                )
                if isinstance(placed, str):
                    self._problem(path, placed)
                    return
                self._accepted(*placed)
                self.report.months += 1
        except (OSError, sqlite3.Error) as err:
            self._problem(f"events/{month}.db", f"{db.db}: cannot be snapshotted: {err}")

    @asynccontextmanager
    async def _month_snapshot(
        self, month: str, db: LocalMonth
    ) -> AsyncIterator[tuple[Path, _Month, Digest]]:
        """A consistent copy of ``month``'s database in a scratch file, its rows
        counted, its size and sha256; the scratch removed after the block."""
        tmp = self.layout.scratch(f"ship-{month}")
        try:
            await asyncio.to_thread(snapshot_db, db.db, tmp)
            snap = _Month(month, db.sig, await asyncio.to_thread(count_rows, tmp))
            yield tmp, snap, await self.placer.digest(tmp)
        finally:
            await asyncio.to_thread(remove_scratch, tmp, self.layout)

    async def _count_month(
        self, month: str, db: LocalMonth, last: RemoteObject | None, counted: MonthCount | None
    ) -> None:
        """A month unchanged since its newest snapshot whose rows are not recorded
        for what it holds now (it shipped before ships counted rows): counted,
        and its snapshot's count filled in (the same content)."""
        try:
            snap = _Month(month, db.sig, await asyncio.to_thread(count_rows, db.db))
        except (OSError, sqlite3.Error) as err:
            self._problem(f"events/{month}.db", f"{db.db}: its rows cannot be counted: {err}")
            return
        await self._record_count(snap, counted)
        if last is not None and last.row_count is None:
            await self.objects.set_source_sig(last.path, db.sig, snap.rows)

    async def _record_count(self, snap: _Month, counted: MonthCount | None) -> None:
        await self.objects.count_month(snap.month, snap.rows, snap.sig, self.clock())
        if counted is None or counted.rows != snap.rows:
            self._counted = True

    # the manifest snapshot ------------------------------------------------------

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

    # dropping local copies --------------------------------------------------------

    async def drop_local(self) -> None:
        if self.remote.keeps_local:
            return
        before = self.clock() - int(self.remote.keep_local_days * DAY_MS)
        droppable = await self.objects.droppable(before)
        held = await _held(self.manifest, droppable, self.clock())
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
