"""``coldkeep expire``: archived data past its retention deleted, locally and on
the remote tier; never what a legal hold covers.

What is past its retention (``[retention]``; nothing without it):

    an archive file    a gzip, or a bundle, when every entry in it is: a file's
                       age counts from its mtime, ``files_days`` (or its unit's
                       own) long. A bundle with one member still young, or one
                       member held, stays whole.
    an event month     its database (and its snapshots on the remote, and its
                       Parquet in the fleet's lake) when the month ended
                       ``events_days`` ago: then every row in it is.

One expiry, under the archive lock:

    settle     expiries a crash interrupted (recorded, files not all gone) are
               finished first
    each       recorded: its entries become tombstones (status ``expired``,
               with when; sha256 and paths kept), the path noted in
               ``expiring``, an audit row naming it, in one transaction; then
               its remote copies deleted (their rows after); then its local
               file unlinked (identity re-checked) and its directory fsynced;
               then the note cleared, once no remote copy is left

Invariants:
- The manifest changes first, the files after: a crash leaves tombstones whose
  files are still there (recovery neither adopts nor misses them; restore no
  longer offers them) and the next expiry deletes them.
- Nothing held by an active legal hold is recorded, whatever its age; a hold
  placed while an expiry runs is seen by the next item it checks.
- A name that expired stays taken: a later file never gets it (``taken_names``).
- A remote copy the bucket's Object Lock keeps (its recorded retain-until not
  reached, or the bucket refusing the delete: a retention or a legal hold) is
  left with its row and the item's note: the expiry is said to be waiting on
  the bucket, never failed, and the next expiry whose time has come deletes it.
  Nothing is asked of the bucket before the recorded retain-until, by the
  bucket's clock.
- An item with remote copies is expired only once the bucket's clock too says
  it is past its retention (remote/bucketclock.py): a host whose clock runs
  ahead deletes nothing of it, anywhere, and says so (``not_due``).
- Cancelled, it stops between items; what is recorded is finished first.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..base.cancel import CancelToken
from ..base.codec import digest_path
from ..base.config import Settings
from ..base.fsutil import fsync_dir, identity_or_none, unlink_if_identity
from ..base.layout import Layout
from ..base.steps import StepHook, StepName, no_step
from ..base.times import DAY_MS, NS_PER_MS, day_of
from ..events.eventschema import month_end_ms
from ..remote.bucketclock import apart, bucket_now
from ..remote.cold import MIN_DAYS
from ..remote.connect import connected
from ..remote.objectstore import ObjectStore, RemoteLocked
from ..remote.shiplake import retire_lake
from ..store import audit, expiry
from ..store.entries import tombstone
from ..store.lakeobjects import LakeObject, LakeObjects
from ..store.legalholds import active, held_paths
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from .session import Sessions

Kind = Literal["gzip", "bundle", "month"]


@dataclass(frozen=True)
class ExpireItem:
    kind: Kind
    path: str  # under archive_root: a gzip, a bundle, events/<YYYY-MM>.db
    files: int  # entries in it (0 for a month)
    bytes: int  # archived bytes (compressed; a month: its database)
    past_since: int  # ms: when the newest thing in it passed its retention
    local: bool  # a local copy is there
    remote: int  # copies on the remote tier
    held: str | None = None  # the hold that keeps it, described
    locked_until: int | None = None  # ms: the bucket's lock keeps its remote copies until then
    shipped_at: int | None = None  # ms: its remote copy's (an archive file's)

    @property
    def copies(self) -> str:
        """Where it is: local, remote, local + remote (none: only a tombstone)."""
        where = [w for w, on in (("local", self.local), ("remote", self.remote)) if on]
        return " + ".join(where) or "none"

    @property
    def month(self) -> str | None:
        return Path(self.path).stem if self.kind == "month" else None


@dataclass(frozen=True)
class ExpirePlan:
    """What an expiry would delete now, and what holds keep: the confirm."""

    files_days: float | None
    events_days: float | None
    items: list[ExpireItem] = field(default_factory=list)  # would go
    held: list[ExpireItem] = field(default_factory=list)  # past retention, held
    # Of the remote copies that would go, those in a cold class deleted before
    # its minimum stay, and what S3 charges for the rest of it (list prices).
    early: int = 0
    early_usd: float = 0.0

    @property
    def configured(self) -> bool:
        return self.files_days is not None or self.events_days is not None or bool(self.items)

    @property
    def bytes(self) -> int:
        return sum(i.bytes for i in self.items)

    @property
    def files(self) -> int:
        return sum(i.files for i in self.items)

    @property
    def locked(self) -> list[ExpireItem]:
        """The items whose remote copies the bucket's lock keeps past their
        expiry: they stay in the bucket until ``locked_until``."""
        return [i for i in self.items if i.locked_until is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "files_days": self.files_days,
            "events_days": self.events_days,
            "items": [asdict(i) for i in self.items],
            "held": [asdict(i) for i in self.held],
            "files": self.files,
            "bytes": self.bytes,
            "remote_locked": len(self.locked),
            "early_deletions": self.early,
            "early_deletion_usd": self.early_usd,
        }


@dataclass
class ExpireReport:
    expired: list[str] = field(default_factory=list)  # paths, each gone everywhere
    files: int = 0  # entries made tombstones
    bytes: int = 0
    months: int = 0
    held: int = 0  # past retention, kept by a hold
    settled: int = 0  # interrupted expiries finished
    locked: list[str] = field(default_factory=list)  # remote copies the bucket keeps, said
    # Due by this host's clock, not by the bucket's: nothing of them deleted, said.
    not_due: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Something was left undone: a problem, or a clock to set right."""
        return bool(self.problems or self.not_due)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def expire_plan(settings: Settings, manifest: Manifest, now: int) -> ExpirePlan:
    """What is past its retention at ``now``, found in the manifest's SQL with
    the remote copies of what is due: never every object shipped."""
    retention = settings.retention
    holds = await active(manifest, now)
    objects = RemoteObjects(manifest)
    candidates = await _file_items(settings, manifest, now)
    layout = Layout(settings.archive_root)
    candidates += await _month_items(settings, objects, layout, now)
    # Recorded already, its remote copies waiting on the bucket's lock: the next
    # expiry finishes it, nothing to plan (a month's snapshots still list it).
    waiting = set(await expiry.interrupted(manifest))
    candidates = [i for i in candidates if i.path not in waiting]
    held = await held_paths(manifest, holds, [i.path for i in candidates if i.month is None])
    items, kept = [], []
    for item in candidates:
        hold = held.get(item.path) if item.month is None else holds.for_month(item.month)
        if hold is None:
            items.append(item)
        else:
            kept.append(replace(item, held=hold.describe()))
    early, early_usd = _early_deletions(settings, items, now)
    return ExpirePlan(retention.files_days, retention.events_days, items, kept, early, early_usd)


def _early_deletions(settings: Settings, items: list[ExpireItem], now: int) -> tuple[int, float]:
    """The remote copies of ``items`` in a cold class younger than its minimum
    stay, and the charge for the rest of it: S3 bills it as if stored."""
    remote = settings.remote
    if remote is None or not remote.cold:
        return 0, 0.0
    stay = MIN_DAYS[remote.storage_class]
    count, usd = 0, 0.0
    for item in items:
        if not item.remote or item.shipped_at is None:
            continue
        left = stay - (now - item.shipped_at) / DAY_MS
        if left > 0:
            count += 1
            usd += remote.prices.storage_usd(remote.storage_class, item.bytes, left / 30)
    return count, usd


def _cutoff_ns(days: float, now: int) -> int:
    """The newest mtime (ns) a file ``days`` old at ``now`` (ms) can have: one
    whose millisecond is at or before ``now - days``."""
    return (now - int(days * DAY_MS) + 1) * NS_PER_MS - 1


async def _file_items(settings: Settings, manifest: Manifest, now: int) -> list[ExpireItem]:
    retention = settings.retention
    if retention.files_days is None and not retention.units:
        return []
    due = await manifest.past_retention(
        {unit: _cutoff_ns(days, now) for unit, days in retention.units.items()},
        None if retention.files_days is None else _cutoff_ns(retention.files_days, now),
    )
    items = []
    for f in due:
        days = retention.files_days_for(f.unit) or 0.0
        items.append(
            ExpireItem(
                "bundle" if f.bundled else "gzip",
                f.gz_path,
                f.entries,
                f.gz_bytes if f.shipped_bytes is None else f.shipped_bytes,
                f.newest_mtime_ns // NS_PER_MS + int(days * DAY_MS),
                local=not f.dropped,
                remote=int(f.shipped_bytes is not None),
                locked_until=_later(f.retain_until, now),
                shipped_at=f.shipped_at,
            )
        )
    return items


async def _month_items(
    settings: Settings, objects: RemoteObjects, layout: Layout, now: int
) -> list[ExpireItem]:
    days = settings.retention.events_days
    if days is None:
        return []
    local = await asyncio.to_thread(layout.event_months)
    snapshots = await objects.month_sizes()
    items = []
    for month in sorted(local.keys() | snapshots.keys()):
        past_since = month_end_ms(month) + int(days * DAY_MS)
        if past_since > now:
            continue
        db = local.get(month)
        size = (await asyncio.to_thread(db.stat)).st_size if db is not None else 0
        remote = snapshots.get(month, [])
        until = max((o.retain_until or 0 for o in await objects.of_month(month)), default=0)
        items.append(
            ExpireItem(
                "month",
                f"events/{month}.db",
                0,
                size or max(remote, default=0),
                past_since,
                local=db is not None,
                remote=len(remote),
                locked_until=_later(until, now),
            )
        )
    return items


def _later(until: int | None, now: int) -> int | None:
    return until if until is not None and until > now else None


async def expire_archive(
    sessions: Sessions, cancel: CancelToken | None, only: frozenset[str] | None
) -> ExpireReport:
    """One expiry, in its own session of the archiver's, over the store
    ``[remote]`` names, open for it (none: remote copies are left, and said).
    ``only``: of what is due, the paths an operator was shown and confirmed."""
    settings = sessions.settings
    async with sessions.open("expire", {}, cancel) as current:
        current.start("archived data past its retention")
        remote = settings.remote
        async with connected(remote) if remote is not None else nullcontext() as store:
            expirer = Expirer(
                settings,
                current.manifest,
                store,
                step=sessions.steps.hook(),
                clock=sessions.clock,
                origin=sessions.origin,
                cancel=cancel,
                only=only,
            )
            report = await expirer.run()
        current.finish("failed" if report.failed else "ok", report.to_dict())
        return report


class Expirer:
    def __init__(
        self,
        settings: Settings,
        manifest: Manifest,
        store: ObjectStore | None,
        *,
        step: StepHook = no_step,
        clock: Callable[[], int],
        origin: str,
        cancel: CancelToken | None = None,
        only: frozenset[str] | None = None,
    ) -> None:
        self.settings = settings
        self.manifest = manifest
        self.store = store
        self.layout = Layout(settings.archive_root)
        self.objects = RemoteObjects(manifest)
        self.step = step
        self.clock = clock
        self.origin = origin
        self.cancel = cancel or CancelToken()
        # The paths an operator confirmed (None: whatever is due): what came due
        # since the question was asked waits for the next expiry.
        self.only = only
        self.report = ExpireReport()
        self.bucket = 0  # the bucket's time as this expiry began (ms): remote copies go by it

    async def run(self) -> ExpireReport:
        now = self.clock()
        self.bucket = now if self.store is None else await bucket_now(self.store, now)
        for path in await expiry.interrupted(self.manifest):
            if await self._finish(path):
                self.report.settled += 1
        plan = await expire_plan(self.settings, self.manifest, now)
        self.report.held = len(plan.held)
        for item in plan.items:
            self.cancel.check()
            if self.only is not None and item.path not in self.only:
                continue
            if item.remote and item.past_since > self.bucket:
                # This host's clock may be wrong; the bucket's enforces the lock.
                self.report.not_due.append(
                    f"{item.path}: past its retention by this host's clock, which is "
                    f"{apart(now, self.bucket)} the bucket's; not by the bucket's until "
                    f"{day_of(item.past_since)}: kept, everywhere"
                )
                continue
            if await self._still_unheld(item):
                await self._expire(item)
        return self.report

    async def _still_unheld(self, item: ExpireItem) -> bool:
        """A hold placed since the plan was read keeps the item."""
        holds = await active(self.manifest, self.clock())
        if item.month is not None:
            hold = holds.for_month(item.month)
        else:
            hold = (await held_paths(self.manifest, holds, [item.path])).get(item.path)
        if hold is not None:
            self.report.held += 1
        return hold is None

    async def _announce(self, name: StepName, path: str) -> None:
        await self.step(name, {"label": path})

    async def _expire(self, item: ExpireItem) -> None:
        now = self.clock()
        if item.month is not None:
            sha = await self._month_sha(item)
            dead = expiry.month_tombstone(item.month, item.bytes, sha, now)
        else:
            dead = tombstone(item.path, now)
        args = {"path": item.path, "kind": item.kind, "files": item.files, "bytes": item.bytes}
        why = f"past its retention since {day_of(item.past_since)}"
        await self.manifest.transaction(
            [
                dead,
                expiry.begun(item.path),
                audit.expired(at=now, origin=self.origin, args=args, detail=why),
            ]
        )
        await self._announce("expire_recorded", item.path)
        await self._finish(item.path)
        self.report.expired.append(item.path)
        self.report.files += item.files
        self.report.bytes += item.bytes
        self.report.months += item.kind == "month"

    async def _month_sha(self, item: ExpireItem) -> str:
        """The month database's sha256 for its tombstone (its newest snapshot's
        when only the remote holds it)."""
        if item.local:
            digest = await asyncio.to_thread(
                digest_path, self.layout.abs(item.path), root=self.layout.root, cancel=self.cancel
            )
            return digest.sha256
        latest = (await self.objects.latest_months()).get(item.month or "")
        return latest.local_sha256 if latest is not None else ""

    async def _finish(self, path: str) -> bool:
        """An expiry recorded: its remote copies and its local file deleted; True
        when nothing of it is left (else its note stays for the next expiry)."""
        lake: list[LakeObject] = []
        if path.startswith("events/"):
            remote = await self.objects.of_month(Path(path).stem)
            lake = await LakeObjects(self.manifest).of_month(Path(path).stem)
        else:
            remote = [o for o in [await self.objects.get(path)] if o is not None]
        kept: list[RemoteObject | LakeObject] = []
        if remote or lake:
            site = self.settings.remote.site if self.settings.remote is not None else None
            if self.store is None or site is None:
                self.report.problems.append(
                    f"{path}: its remote copies stay until an expiry runs with [remote] configured"
                )
                return False
            kept = [*await self._delete_remote(self.store, site, remote)]
            kept += await self._delete_lake(self.store, lake)
            if len(kept) < len(remote) + len(lake):
                await self._announce("expire_remote_deleted", path)
        await self._delete_local(path)
        if kept:
            self._said_locked(path, kept)
            return False
        await expiry.finished(self.manifest, path)
        await self._announce("expire_local_deleted", path)
        return True

    async def _delete_remote(
        self, store: ObjectStore, site: str, remote: list[RemoteObject]
    ) -> list[RemoteObject]:
        """Each copy deleted and its row forgotten, but those the bucket's lock
        keeps: returned, asked of the bucket only once their retain-until is past."""
        kept = []
        for obj in remote:
            if obj.retain_until is not None and obj.retain_until > self.bucket:
                kept.append(obj)
                continue
            try:
                await store.delete(f"{site}/{obj.key}")
            except RemoteLocked:
                kept.append(obj)
                continue
            await self.objects.forget(obj.path)
        return kept

    async def _delete_lake(self, store: ObjectStore, files: list[LakeObject]) -> list[LakeObject]:
        """A month's Parquet files in the fleet's lake deleted, but those the
        bucket's lock keeps: returned, superseded (deleted by an expiry or a
        ship once it lets them go)."""
        if not files:
            return []
        lake = LakeObjects(self.manifest)
        await lake.supersede_month(files[0].month, self.clock())
        return [o for o in files if not await retire_lake(store, lake, o, self.bucket)]

    def _said_locked(self, path: str, kept: Sequence[RemoteObject | LakeObject]) -> None:
        until = max(o.retain_until or 0 for o in kept)
        when = f"until {day_of(until)}" if until > self.bucket else "by its lock or a legal hold"
        self.report.locked.append(
            f"{path}: its remote copies are kept by the bucket's lock {when}; "
            "an expiry after that deletes them"
        )

    async def _delete_local(self, path: str) -> None:
        local = self.layout.abs(path)
        root = self.layout.root
        for target in (local, *(local.with_name(local.name + s) for s in ("-wal", "-shm"))):
            ident = await asyncio.to_thread(identity_or_none, target, root=root)
            if ident is None:
                continue
            if not ident.is_regular:
                self.report.problems.append(f"{target}: not a regular file; left in place")
                continue
            # The directory is fsynced once, below, for these unlinks and for
            # any a killed expiry made before its own fsync.
            await asyncio.to_thread(
                functools.partial(unlink_if_identity, target, ident, root=root, durably=None)
            )
        await asyncio.to_thread(fsync_dir, local.parent, root=root, site="expire.unlinked")
