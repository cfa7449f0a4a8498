"""``coldkeep verify --remote``: the remote copies read back, in rotating subsets.

Each object recorded as shipped is read by ranged GETs (RANGE bytes at a time,
so a bundle costs no more memory than a gzip) and its size and sha256 compared
with its row. ``--sample F`` checks that fraction of the objects, starting
after the last one the previous run checked (the cursor in ``remote_state``):
over successive runs every object is read. With a time budget
(``max_duration``: the scheduler's verify job) it stops between objects once
the budget is spent, and says how many of its share it left: the next run
starts after the last one read.

A copy that is missing or wrong:
- a file whose local copy is still here: the bad object is deleted (it is proven
  not to be what was shipped) and the local copy shipped again, read back and
  recorded; until then its row carries the failure, so nothing drops the local
  copy meanwhile;
- an event month's snapshot whose month database is still here: a snapshot of
  the database taken now replaces it (``Shipper.reship_month``): sent, read
  back and recorded in its place when its bytes are the same, else as the
  month's new snapshot; only once that is recorded is the bad copy deleted and
  its row forgotten;
- otherwise the failure stays on the row (``verify_error``), and the row stays:
  it may be the only word left here of what the bucket holds (a month whose
  database is gone: the report names the month's other snapshots recorded, or
  says there is none). The alert job raises it, and restore of those files
  fails loudly instead of placing bad bytes.

The reads name the version of the object that the HEAD before them saw, so
what they hash is that one object; once it proves to be the one shipped, the
row records that version. A row shipped before versions were recorded gets
one so, and a row whose object was put again with the same bytes (a folder
copied to another disk) the new one: the reads pinned to it (a month read in
place, the block cache's) read it from then on.

The site's current files in the fleet's lake are asked of the bucket at the
end of each run that read its whole share: one gone, or holding other bytes
than recorded, is a failure, and its month is written into the lake again by
the next ship (the file is derived from the month's snapshot).

A sealed object (client-side encryption) is read as stored: its size and
sha256 are the ciphertext's, which is all a verify without an identity can
check. ``--deep`` opens each sealed object as well, with the identity given
(``--identity``), as it is read (the same GETs, one pass): every age stream of
it must open, and the plaintext's size and sha256 be the local file's
recorded (``local_bytes``, ``local_sha256``): an object replaced by another
sealed to the same keys is found only so. Unsealed objects are read as
without ``--deep``; with no sealed object, ``--deep`` needs no identity. An
identity that opens none of an object's streams proves nothing about it: said,
nothing marked.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from dataclasses import dataclass, field
from time import monotonic
from typing import Any

from ..base.cancel import CancelToken, in_thread
from ..base.errors import RemoteError
from ..base.stream import EventStream, FileDone, Phase
from ..base.times import day_of, now_ms
from ..store.lakeobjects import LakeObjects
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from .marker import check_marker
from .objectstore import ObjectInfo, ObjectStore, RemoteFatal, RemoteMissing
from .sealing import Identities, IdentityNeeded, WrongIdentity
from .ship import Shipper
from .shipreplace import MonthReshipped
from .unseal import RangedSource, SealedUnreadable, open_all

RANGE = 8 << 20
# Objects read from the manifest at a time.
PAGE = 1000


class _Cold(Exception):
    """The object is in a cold class and not thawed: its bytes cannot be read."""


@dataclass
class RemoteVerifyReport:
    checked: int = 0
    ok: int = 0
    bytes: int = 0
    reshipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # one line each: what and why
    complete: bool = True  # every object of this run's share was checked
    nothing_archived: bool = False  # no coldkeep.db yet: nothing read, nothing written
    objects: int = 0  # recorded as shipped
    share: int = 0  # of them, this run's (all, or the sample)
    left: int = 0  # of the share, not read: the time budget ran out first
    # In a cold class, not thawed: their size and the checksum S3 keeps matched,
    # their bytes not read (nothing marked verified).
    cold: int = 0
    lake: int = 0  # the site's current files in the fleet's lake asked of the bucket
    lake_ok: int = 0  # of them, there with the size and sha256 recorded

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "bytes": self.bytes,
            "reshipped": self.reshipped,
            "failed": self.failed,
            "complete": self.complete,
            "objects": self.objects,
            "share": self.share,
            "left": self.left,
            "cold": self.cold,
            "lake": self.lake,
            "lake_ok": self.lake_ok,
        }


class RemoteVerifier:
    def __init__(
        self,
        manifest: Manifest,
        store: ObjectStore,
        shipper: Shipper,
        *,
        stream: EventStream,
        cancel: CancelToken,
        deep: bool = False,
        identities: Identities | None = None,
    ) -> None:
        self.deep = deep  # sealed objects opened too
        self.identities = identities
        self.manifest = manifest
        self.objects = RemoteObjects(manifest)
        self.store = store
        self.shipper = shipper
        self.stream = stream
        self.cancel = cancel
        self.report = RemoteVerifyReport()

    async def run(
        self, sample: float | None, max_duration: float | None = None
    ) -> RemoteVerifyReport:
        # A remote that is not the one shipped to (its disk not mounted) would
        # fail every object and re-ship the local copies onto the disk below.
        shipper = self.shipper
        await check_marker(
            self.store, self.objects, shipper.remote.site, shipper.layout, may_write=False
        )
        if self.deep and self.identities is None:
            sealed = await self.objects.sealed_count()
            if sealed:
                raise IdentityNeeded(
                    f"verify --remote --deep: {sealed:,} remote objects are sealed: give "
                    "--identity FILE, an age identity file with their key"
                )
        total = (await self.objects.totals()).shipped
        count = total if sample is None else min(total, math.ceil(total * sample))
        self.report.objects, self.report.share = total, count
        start = None if sample is None else await self.objects.verify_cursor()
        # The share starts after the cursor and wraps: its size and bytes said
        # first, then it is read a page at a time (millions of rows never held).
        n, size = await self.objects.span(start, count)
        if n < count and start is not None:
            size += (await self.objects.span(None, count - n))[1]
        self.stream.emit(Phase("verify-remote", count, size))
        deadline = None if max_duration is None else monotonic() + max_duration
        self.report.left = await self._check_share(start, count, deadline)
        self.report.complete = not self.report.left
        if self.report.complete:
            await self._check_lake()
        if count == total and self.report.complete:
            await self.objects.set_verify_cursor(None)
        return self.report

    async def _check_share(self, start: str | None, count: int, deadline: float | None) -> int:
        """``count`` objects from the one after ``start``, wrapping once to the
        first: each read back, and the cursor moved past it, until ``deadline``
        (monotonic); how many were left unread."""
        at, wrapped = start, start is None
        while count > 0:
            page = await self.objects.after(at, min(count, PAGE))
            if not page:
                if wrapped:
                    return 0
                at, wrapped = None, True
                continue
            for n, obj in enumerate(page):
                self.cancel.check()
                if deadline is not None and monotonic() >= deadline:
                    return count - n
                await self._check(obj)
                await self.objects.set_verify_cursor(obj.path)
            at, count = page[-1].path, count - len(page)
        return 0

    async def _check_lake(self) -> None:
        """The site's current files in the fleet's lake, each asked of the
        bucket (its size and sha256; the bytes read where it keeps none). One
        gone or holding other bytes is superseded: the next ship deletes what is
        at its key and writes the month again."""
        lake = LakeObjects(self.manifest)
        for obj in (await lake.current()).values():
            self.cancel.check()
            self.report.lake += 1
            info = await self.store.head(obj.key)
            sha = info.sha256 if info is not None else None
            if info is not None and sha is None:
                sha = await self._read_sha(obj.key, info.size, info.version)
            if info is not None and (info.size, sha) == (obj.bytes, obj.sha256):
                self.report.lake_ok += 1
                continue
            said = (
                "gone"
                if info is None
                else f"holds {info.size} bytes, sha256 {sha}, not the {obj.bytes} bytes, "
                f"sha256 {obj.sha256} shipped"
            )
            await lake.supersede(obj.key, now_ms())
            self.report.failed.append(
                f"{self.store.where(obj.key)}: {said}; the next ship writes {obj.month} into "
                "the lake again"
            )

    async def _read_sha(self, key: str, size: int, version: str | None) -> str:
        digest = hashlib.sha256()
        for start in range(0, size, RANGE):
            self.cancel.check()
            data = await self.store.read_range(key, start, min(RANGE, size - start), version)
            await asyncio.to_thread(digest.update, data)
        return digest.hexdigest()

    async def _streams(self, obj: RemoteObject) -> list[tuple[int, int]]:
        """The (offset, length) of each age stream of sealed ``obj``: its recorded
        ones (a bundle), else one of all of it."""
        rows = await self.manifest.rows(
            "SELECT offset, length FROM sealed_spans WHERE path = ? ORDER BY offset", [obj.path]
        )
        return [(int(o), int(n)) for o, n in rows] or [(0, obj.bytes)]

    async def _read_deep(self, key: str, obj: RemoteObject, version: str | None) -> str | None:
        """Sealed ``obj`` read once (as ``version``), its streams opened as they
        come: why it is not what was shipped, or None. ``WrongIdentity`` raised
        as itself."""
        assert self.identities is not None
        loop = asyncio.get_running_loop()
        src = RangedSource(self.store, key, obj.bytes, loop, RANGE, version)
        streams = await self._streams(obj)
        what = self.store.where(key)
        identities, sealed_to, cancel = self.identities, obj.sealed_to, self.cancel
        try:
            plain = await in_thread(
                cancel,
                lambda: open_all(
                    src, identities, streams, what=what, sealed_to=sealed_to, cancel=cancel
                ),
            )
        except SealedUnreadable as err:
            if isinstance(err.cause, WrongIdentity):
                raise err.cause from None
            return str(err)
        if src.at != obj.bytes or src.sha.hexdigest() != obj.sha256:
            return f"sha256 {src.sha.hexdigest()}, not the {obj.sha256} shipped"
        if (plain.bytes, plain.sha256) != (obj.local_bytes, obj.local_sha256):
            return (
                f"opens to {plain.bytes} bytes, sha256 {plain.sha256}, not the local file's "
                f"{obj.local_bytes} bytes, {obj.local_sha256} shipped (another object sealed "
                "to the same keys?)"
            )
        return None

    async def _problem(self, key: str, obj: RemoteObject) -> str | ObjectInfo:
        """Why the object at ``key`` is not ``obj`` as shipped; or, once its
        bytes proved it is, the HEAD whose version they were read as."""
        info = await self.store.head(key)
        if info is None:
            return "not there"
        if info.size != obj.bytes:
            return f"{info.size} bytes, not the {obj.bytes} shipped"
        if not info.readable:
            if info.sha256 is not None and info.sha256 != obj.sha256:
                return f"sha256 {info.sha256} (S3's checksum), not the {obj.sha256} shipped"
            raise _Cold()
        if self.deep and obj.sealed_to is not None:
            return await self._read_deep(key, obj, info.version) or info
        got = await self._read_sha(key, obj.bytes, info.version)
        return info if got == obj.sha256 else f"sha256 {got}, not the {obj.sha256} shipped"

    async def _check(self, obj: RemoteObject) -> None:
        key = self.shipper.key(obj.key)
        self.report.checked += 1
        why: str | ObjectInfo
        try:
            why = await self._problem(key, obj)
        except WrongIdentity as err:
            # Not opened proves nothing about the object: said, nothing marked.
            self.report.failed.append(str(err))
            self.stream.emit(FileDone("verify-remote", obj.path, "error", detail=str(err)))
            return
        except RemoteMissing:
            why = "not there"
        except _Cold:
            # Its bytes cannot be read before a thaw: what S3 says of them
            # matched, nothing is marked, the summary counts it.
            self.report.cold += 1
            self.stream.emit(FileDone("verify-remote", obj.path, "cold", obj.bytes))
            return
        except RemoteFatal:
            raise  # no copy can be read: the verify stops, nothing marked
        except RemoteError as err:
            # Unreadable proves nothing about the bytes: said, nothing marked.
            self.report.failed.append(f"{self.store.where(key)}: could not be read: {err}")
            self.stream.emit(FileDone("verify-remote", obj.path, "error", detail=str(err)))
            return
        if isinstance(why, ObjectInfo):
            self.report.ok += 1
            self.report.bytes += obj.bytes
            await self.objects.mark_verified(obj.path, now_ms(), None, why.version)
            self.stream.emit(FileDone("verify-remote", obj.path, "ok", obj.bytes))
            return
        await self._settle_bad(obj, key, why)

    async def _settle_bad(self, obj: RemoteObject, key: str, why: str) -> None:
        line = f"{self.store.where(key)}: {why}"
        await self.objects.mark_verified(obj.path, now_ms(), why)
        if obj.month is not None:
            here = await asyncio.to_thread(self.shipper.layout.event_months)
            if obj.month not in here:
                line += f"; {await self._month_left(obj)}"
            else:
                done = await self.shipper.reship_month(obj)
                if isinstance(done, MonthReshipped):
                    self._reshipped(obj, line, _month_reshipped(obj, done))
                    return
                line += f"; not shipped again: {done}"
        elif obj.local:
            why_not = await self.shipper.reship(obj)
            if why_not is None:
                self._reshipped(obj, line, obj.path)
                return
            line += f"; not shipped again: {why_not}"
        else:
            line += "; its local copy is gone: this copy cannot be repaired from here"
        self.report.failed.append(line)
        self.stream.emit(FileDone("verify-remote", obj.path, "failed", detail=line))

    def _reshipped(self, obj: RemoteObject, line: str, said: str) -> None:
        self.report.reshipped.append(said)
        self.stream.emit(FileDone("verify-remote", obj.path, "reshipped", detail=line))

    async def _month_left(self, obj: RemoteObject) -> str:
        """What is still to be had of bad snapshot ``obj``'s month, whose
        database is gone from here: its row is the only word of the month left
        here, so it stays, and the operator is told what else there is."""
        month = obj.month
        assert month is not None
        db = self.shipper.layout.events / f"{month}.db"
        said = (
            f"no database of {month} is here to ship it again from: its row is kept, marked "
            f"bad (a copy of the database put back as {db} is shipped by the next verify "
            "--remote)"
        )
        others = [
            o
            for o in await self.objects.of_month(month)
            if o.path != obj.path and o.verify_error is None
        ]
        if not others:
            return f"{said}; no other snapshot of {month} is recorded"
        other = max(others, key=lambda o: o.shipped_at)
        age = "newer" if other.shipped_at > obj.shipped_at else "older"
        rows = "" if other.row_count is None else f"{other.row_count:,} rows, "
        where = self.store.where(self.shipper.key(other.key))
        return (
            f"{said}; a {age} snapshot of {month} is recorded: {where} ({rows}shipped "
            f"{day_of(other.shipped_at)})"
        )


def _month_reshipped(obj: RemoteObject, done: MonthReshipped) -> str:
    """A month snapshot shipped again, as the report lists it."""
    if done.path == obj.path:
        return obj.path
    how = "shipped now" if done.shipped else "shipped before"
    return f"{obj.path} (its database is in {done.path}, {how}; the bad copy deleted)"
