"""The bucket's Object Lock (``[remote] object_lock``): how long each shipped
object is retained, and the S3 legal holds mirrored from the site's own.

Retain-until is the moment expiry would delete the object:

    an archive file      its entries' newest mtime plus their unit's files_days
    an event month       the month's end plus events_days
    a manifest snapshot  its time plus the shortest retention (files_days,
                         events_days, any unit's): it describes objects that
                         may go by then, and newer snapshots replace it

Invariants:
- The lock never ends before expiry would delete the object: the retain-until
  comes from the retention and the times expiry reads, rounded up to the
  second S3 keeps. A retention already over when the object ships asks for
  none: nothing is left to keep it for, and expiry deletes it next.
- A legal hold on the site is an S3 legal hold on every shipped object it
  covers (a bundle when any member is; an event month's every snapshot), placed
  when the hold is, or with the upload of an object shipped while it holds; it
  is lifted when no active hold covers the object any more.
- The manifest's ``legal_hold`` column says what the bucket was last told. A
  mirror compares it with the holds and tells the bucket only the difference,
  recording each answer as it comes: one cut short (a crash, the bucket
  unreachable) is finished by the next, and every ship runs one.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, field

from ..base.configremote import RemoteSettings
from ..base.configretention import RetentionSettings
from ..base.errors import RemoteError
from ..base.times import DAY_MS, NS_PER_MS
from ..events.eventschema import month_end_ms
from ..store.lakeobjects import LakeObjects
from ..store.legalholds import ActiveHolds, active, held_paths
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects
from .objectstore import ObjectLock, ObjectStore, RemoteFatal, RemoteMissing

# ``manifest/<UTC time>.<ms>Z.db``: the snapshot's time is in its name.
_SNAPSHOT = re.compile(r"(\d{8}T\d{6})\.(\d{3})Z\.db(\.[0-9a-f]{12}\.age)?$")


def lock_for(
    remote: RemoteSettings, retain_until: int | None, held: bool, now: int
) -> ObjectLock | None:
    """What an upload at ``now`` asks of the bucket (None: object_lock is off)."""
    if remote.locks is None:
        return None
    if retain_until is None or retain_until <= now:
        return ObjectLock(legal_hold=held)
    return ObjectLock(remote.locks, -(-retain_until // 1000) * 1000, held)


async def file_retain_until(
    objects: RemoteObjects, retention: RetentionSettings, gz_path: str
) -> int | None:
    """When expiry would delete archive file ``gz_path`` (ms; None: never)."""
    ends = [
        newest // NS_PER_MS + int(days * DAY_MS)
        for unit, newest in (await objects.newest_by_unit(gz_path)).items()
        if (days := retention.files_days_for(unit)) is not None
    ]
    return max(ends, default=None)


def month_retain_until(retention: RetentionSettings, month: str) -> int | None:
    """When expiry would delete event month ``month`` (ms; None: never)."""
    if retention.events_days is None:
        return None
    return month_end_ms(month) + int(retention.events_days * DAY_MS)


def _shortest_days(retention: RetentionSettings) -> float | None:
    days = [retention.files_days, retention.events_days, *retention.units.values()]
    return min((d for d in days if d is not None), default=None)


def snapshot_retain_until(retention: RetentionSettings, taken_at: int) -> int | None:
    """How long a manifest snapshot taken at ``taken_at`` is kept (ms)."""
    days = _shortest_days(retention)
    return None if days is None else taken_at + int(days * DAY_MS)


def snapshot_taken_at(key: str) -> int | None:
    """A manifest snapshot's time, read from its key (None: not one)."""
    found = _SNAPSHOT.search(key)
    if found is None:
        return None
    seconds = calendar.timegm(time.strptime(found.group(1), "%Y%m%dT%H%M%S"))
    return seconds * 1000 + int(found.group(2))


@dataclass
class HoldsMirrored:
    """What a mirror told the bucket."""

    placed: int = 0
    lifted: int = 0
    problems: list[str] = field(default_factory=list)


async def mirror_holds(
    manifest: Manifest, store: ObjectStore, remote: RemoteSettings, now: int
) -> HoldsMirrored:
    """The bucket's legal holds made to match the site's holds active at ``now``
    (new ones placed only with object_lock on; those placed before, on rows'
    objects or on loose copies, are lifted either way)."""
    objects = RemoteObjects(manifest)
    have = set(await objects.legal_held())
    holds = await active(manifest, now)
    want: set[str] = set()
    if holds and remote.locks is not None:
        want.update(await held_paths(manifest, holds, await objects.shipped_files()))
        for month, snapshots in (await objects.month_snapshots()).items():
            if holds.for_month(month) is not None:
                want.update(snapshots)
    done = HoldsMirrored()
    changes = [(p, True) for p in sorted(want - have)] + [(p, False) for p in sorted(have - want)]
    for path, on in changes:
        obj = await objects.get(path)
        key = obj.key if obj is not None else path
        try:
            await store.set_legal_hold(f"{remote.site}/{key}", on)
        except RemoteFatal:
            raise
        except RemoteMissing as err:
            done.problems.append(f"{err} (run coldkeep verify --remote)")
            continue
        except RemoteError as err:
            done.problems.append(str(err))
            continue
        await objects.set_legal_hold(path, on)
        if on:
            done.placed += 1
        else:
            done.lifted += 1
    await _mirror_lake(manifest, store, remote, holds, done)
    for key in await objects.loose_held():
        try:
            await store.set_legal_hold(f"{remote.site}/{key}", False)
        except RemoteFatal:
            raise
        except RemoteMissing:  # deleted since: nothing left to track
            await objects.settled(key)
            continue
        except RemoteError as err:
            done.problems.append(str(err))
            continue
        await objects.set_loose_hold(key, False)
        done.lifted += 1
    return done


async def _mirror_lake(
    manifest: Manifest,
    store: ObjectStore,
    remote: RemoteSettings,
    holds: ActiveHolds,
    done: HoldsMirrored,
) -> None:
    """The legal holds of the site's files in the fleet's lake made to match
    their months' (a month's Parquet is held as its snapshots are)."""
    lake = LakeObjects(manifest)
    for obj in await lake.all():
        want = remote.locks is not None and holds.for_month(obj.month) is not None
        if want == obj.legal_hold:
            continue
        try:
            await store.set_legal_hold(obj.key, want)
        except RemoteFatal:
            raise
        except RemoteMissing:  # deleted since: nothing left to hold
            await lake.forget(obj.key)
            continue
        except RemoteError as err:
            done.problems.append(str(err))
            continue
        await lake.set_legal_hold(obj.key, want)
        if want:
            done.placed += 1
        else:
            done.lifted += 1
