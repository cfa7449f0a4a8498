"""``coldkeep verify --remote``: the remote copies read back, in rotating subsets.

Each object recorded as shipped is read by ranged GETs (RANGE bytes at a time,
so a bundle costs no more memory than a gzip) and its size and sha256 compared
with its row. ``--sample F`` checks that fraction of the objects, starting
after the last one the previous run checked (the cursor in ``remote_state``):
over successive runs every object is read.

A copy that is missing or wrong:
- a file whose local copy is still here: the bad object is deleted (it is proven
  not to be what was shipped) and the local copy shipped again, read back and
  recorded; until then its row carries the failure, so nothing drops the local
  copy meanwhile;
- an event month's snapshot: its row goes, and the next ship snapshots the
  month again;
- otherwise the failure stays on the row (``verify_error``): the alert job
  raises it, and restore of those files fails loudly instead of placing bad bytes.

The reads name the version of the object that the HEAD before them saw, so
what they hash is that one object; once it proves to be the one shipped, the
row records that version. A row shipped before versions were recorded gets
one so, and a row whose object was put again with the same bytes (a folder
copied to another disk) the new one: the reads pinned to it (a month read in
place, the block cache's) read it from then on.

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
from typing import Any

from ..base.cancel import CancelToken, in_thread
from ..base.errors import RemoteError
from ..base.stream import EventStream, FileDone, Phase
from ..base.times import now_ms
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from .marker import check_marker
from .objectstore import ObjectInfo, ObjectStore, RemoteFatal, RemoteMissing
from .sealing import Identities, IdentityNeeded, WrongIdentity
from .ship import Shipper
from .unseal import RangedSource, SealedUnreadable, open_all

RANGE = 8 << 20
# Objects read from the manifest at a time.
PAGE = 1000


@dataclass
class RemoteVerifyReport:
    checked: int = 0
    ok: int = 0
    bytes: int = 0
    reshipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # one line each: what and why
    complete: bool = True  # every object of this run's share was checked
    nothing_archived: bool = False  # no coldkeep.db yet: nothing read, nothing written

    def to_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "ok": self.ok,
            "bytes": self.bytes,
            "reshipped": self.reshipped,
            "failed": self.failed,
            "complete": self.complete,
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

    async def run(self, sample: float | None) -> RemoteVerifyReport:
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
        start = None if sample is None else await self.objects.verify_cursor()
        # The share starts after the cursor and wraps: its size and bytes said
        # first, then it is read a page at a time (millions of rows never held).
        n, size = await self.objects.span(start, count)
        if n < count and start is not None:
            size += (await self.objects.span(None, count - n))[1]
        self.stream.emit(Phase("verify-remote", count, size))
        await self._check_share(start, count)
        if count == total:
            await self.objects.set_verify_cursor(None)
        return self.report

    async def _check_share(self, start: str | None, count: int) -> None:
        """``count`` objects from the one after ``start``, wrapping once to the
        first: each read back, and the cursor moved past it."""
        at, wrapped = start, start is None
        while count > 0:
            page = await self.objects.after(at, min(count, PAGE))
            if not page:
                if wrapped:
                    return
                at, wrapped = None, True
                continue
            for obj in page:
                self.cancel.check()
                await self._check(obj)
                await self.objects.set_verify_cursor(obj.path)
            at, count = page[-1].path, count - len(page)

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
            await self.objects.forget(obj.path)
            self.report.reshipped.append(f"{obj.path} (snapshotted again by the next ship)")
            self.stream.emit(FileDone("verify-remote", obj.path, "forgotten", detail=line))
            return
        if obj.local:
            why_not = await self.shipper.reship(obj)
            if why_not is None:
                self.report.reshipped.append(obj.path)
                self.stream.emit(FileDone("verify-remote", obj.path, "reshipped", detail=line))
                return
            line += f"; not shipped again: {why_not}"
        else:
            line += "; its local copy is gone: this copy cannot be repaired from here"
        self.report.failed.append(line)
        self.stream.emit(FileDone("verify-remote", obj.path, "failed", detail=line))
