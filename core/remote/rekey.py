"""``coldkeep rekey``: the objects sealed to recipients other than ``[remote]
encrypt_to``'s (or stored unsealed), sealed again to them.

An age stream's recipients cannot be changed in place: pyrage seals and opens
whole streams and never hands out a stream's file key, the only thing a new
recipient's stanza could wrap. So each object is sealed anew, one at a time,
under the archive lock, and placed as a ship places one (remote/place.py):

    judge    one past its retention (expired here, or its retention over by
             the bucket's clock) is left for expiry: sealed again it would be
             kept for nothing
    source   the local copy, where one is relied on; else the remote object
             opened with ``--identity`` (a bundle: each of its streams, in
             order, which tile it), checked against the local file's sha256
    upload   sealed to the current set, create-only under a new key, with the
             lock its predecessor had or should have (retained until its
             expiry, at least as long as the old copy; the legal holds in
             force), read back by HEAD: size, sha256, lock and holds
    record   its row replaced (key, set, sizes, sha256s, streams; the lock and
             version as that HEAD said them), the old key written to
             ``remote_loose`` with the lock its row said, one transaction
    retire   the old copy's legal hold lifted, then the copy deleted (every
             version) once its lock has ended by the bucket's clock; one the
             bucket keeps is tracked in ``remote_loose`` until the first ship
             after its lock ends

then the holds mirrored and one manifest snapshot (``tier.rekey``), so that
the newest opens with the new identity.

Invariants:
- The old copy is touched only after the new one is read back and recorded:
  a crash between leaves both in the bucket, the row naming the new one and
  ``remote_loose`` the old.
- A plaintext rebuilt from the remote is sealed only when its size and sha256
  are the local file's as recorded at its first ship.
- Without ``--identity``, objects only the remote holds are named, never
  skipped in silence; they stay readable with the old identity. An identity
  file that opens none of a set's keys is said once for the set, with how
  many of its objects are left, not once per object.
"""

from __future__ import annotations

import asyncio
import functools
import io
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.cancel import CancelToken
from ..base.codec import CorruptGzip, Digest, digest_path
from ..base.configremote import RemoteSettings
from ..base.errors import RemoteError, UsageError
from ..base.fsutil import open_file
from ..base.recipients import RecipientSet
from ..base.times import day_of
from ..store import expiry
from ..store.remoteobjects import Loose, RemoteObject, RemoteObjects
from .bucketlock import file_retain_until, month_retain_until
from .fetch import remove_scratch
from .monthgz import unpack
from .objectstore import ObjectLock, RemoteFatal
from .place import Placer
from .sealing import Identities, Reseal, SealError, WrongIdentity, open_sealed, rekey_step


class NothingToSealTo(UsageError):
    """``rekey`` with no ``[remote] encrypt_to``."""


@dataclass(frozen=True)
class RekeyItem:
    path: str
    sealed_to: str | None  # the set it is sealed to now (None: unsealed)
    source: str  # "local" or "remote"
    needs_identity: bool


@dataclass(frozen=True)
class RekeyPlan:
    """What ``rekey`` would seal again, and from where."""

    sealed_to: str  # the current set, described
    items: list[RekeyItem] = field(default_factory=list)

    @property
    def needing_identity(self) -> int:
        return sum(i.needs_identity for i in self.items)

    def to_dict(self) -> dict[str, Any]:
        return {"sealed_to": self.sealed_to, "items": [asdict(i) for i in self.items]}


@dataclass
class RekeyReport:
    resealed: list[str] = field(default_factory=list)
    # Old copies the bucket's lock keeps: tracked, the first ship after it ends deletes them.
    old_kept: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)  # past their retention: left for expiry
    needs_identity: list[str] = field(default_factory=list)  # not done: give --identity
    identity_for: list[str] = field(default_factory=list)  # the sets those are sealed to
    snapshot: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.problems or self.needs_identity)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def recipients_of(remote: RemoteSettings) -> RecipientSet:
    """The set ``rekey`` seals to: ``[remote] encrypt_to``'s, or the reason why none."""
    if remote.encrypt_to is None:
        raise NothingToSealTo(
            "[remote] encrypt_to is not set: there is no recipient to seal to "
            '(add encrypt_to = ["age1…"] first)'
        )
    return remote.encrypt_to


async def rekey_plan(objects: RemoteObjects, recipients: RecipientSet) -> RekeyPlan:
    items = []
    for obj in await objects.not_sealed_to(recipients.fingerprint):
        step = rekey_step(obj.sealed_to, recipients, local_copy=_local(obj))
        if isinstance(step, Reseal):
            items.append(RekeyItem(obj.path, obj.sealed_to, step.source, step.needs_identity))
    return RekeyPlan(recipients.describe(), items)


def _local(obj: RemoteObject) -> bool:
    """Whether the object can be sealed again from a local copy (a month's
    snapshot never can: the month's database may have changed since)."""
    return obj.local and obj.month is None


class Rekeyer:
    def __init__(self, placer: Placer, identities: Identities | None, cancel: CancelToken) -> None:
        self.placer = placer
        self.objects = placer.objects
        self.layout = placer.layout
        self.identities = identities
        self.cancel = cancel
        self.report = RekeyReport()

    async def run(self) -> RekeyReport:
        """Every object the plan names sealed again (the manifest snapshot that
        follows is the caller's)."""
        recipients = recipients_of(self.placer.remote)
        settled = await self.placer.settle_loose()
        self.report.problems += settled.problems
        plan = await rekey_plan(self.objects, recipients)
        expiring = set(await expiry.interrupted(self.placer.manifest))
        # Sets the identity file opened none of: the object first tried, and
        # how many sealed to it were left.
        refused: dict[str, tuple[str, int]] = {}
        for item in plan.items:
            self.cancel.check()
            obj = await self.objects.get(item.path)
            if obj is None:
                continue  # expired meanwhile
            why = await self._expired(obj, expiring)
            if why is not None:
                self.report.expired.append(f"{obj.path}: {why}")
                continue
            sealed_to = obj.sealed_to or ""
            if item.needs_identity and self.identities is None:
                self.report.needs_identity.append(item.path)
                if sealed_to not in self.report.identity_for:
                    self.report.identity_for.append(sealed_to)
                continue
            if item.needs_identity and sealed_to in refused:
                first, left = refused[sealed_to]
                refused[sealed_to] = (first, left + 1)
                continue
            try:
                await self._reseal(obj, item.source)
            except RemoteFatal:
                raise
            except WrongIdentity:
                refused[sealed_to] = (obj.path, 1)
            except (RemoteError, SealError, UsageError, OSError, CorruptGzip) as err:
                self.report.problems.append(f"{obj.path}: {err}")
        for sealed_to, (first, left) in refused.items():
            assert self.identities is not None
            self.report.problems.append(
                f"{left} object{'' if left == 1 else 's'} only the remote holds, sealed to "
                f"{sealed_to}, not sealed again: {self.identities.describe()}, and the first, "
                f"{first}, did not open with it (give --identity a file with one of that "
                "set's keys)"
            )
        return self.report

    async def _expired(self, obj: RemoteObject, expiring: set[str]) -> str | None:
        """Why ``obj`` is past its retention (None: it is not): expired here
        (every entry of its file a tombstone, its month's tombstone, or an
        expiry recorded and waiting on the bucket), or its retention over by
        the bucket's clock."""
        retention = self.placer.settings.retention
        manifest = self.placer.manifest
        if obj.month is None:
            if obj.path in expiring or not await self.objects.newest_by_unit(obj.path):
                return "expired"
            until = await file_retain_until(self.objects, retention, obj.path)
        else:
            month_db = f"events/{obj.month}.db"
            if month_db in expiring or await expiry.expired_months(manifest, [obj.month]):
                return "expired"
            until = month_retain_until(retention, obj.month)
        if until is not None and until <= await self.placer.bucket_now():
            return f"past its retention since {day_of(until)}"
        return None

    async def _reseal(self, obj: RemoteObject, source: str) -> None:
        placer = self.placer
        lock = await placer.lock_of(obj)
        spans = await placer.spans_of(obj.path) if obj.month is None else None
        local = (
            self.layout.abs(obj.path) if source == "local" else await self._plain_from_remote(obj)
        )
        try:
            placed = await placer.place(
                obj.path, local, replace(obj, seek_points=None), lock, spans=spans,
                got=Digest(obj.local_bytes, obj.local_sha256), instead=True,
            )  # fmt: skip
        finally:
            if source != "local":
                await asyncio.to_thread(remove_scratch, local, self.layout)
        if isinstance(placed, str):
            raise RemoteError(placed)
        self.report.resealed.append(obj.path)
        old = Loose(obj.key, obj.path, obj.retain_until, obj.legal_hold)
        try:
            retired = await placer.retire(old, ObjectLock(None, obj.retain_until, obj.legal_hold))
        except RemoteFatal:
            raise
        except RemoteError as err:
            self.report.problems.append(
                f"{obj.path}: its old copy {obj.key} is left for the next ship: {err}"
            )
            return
        if retired == "kept":
            self.report.old_kept.append(obj.key)

    async def _plain_from_remote(self, obj: RemoteObject) -> Path:
        """``obj``'s plaintext rebuilt from the remote into a scratch file under
        archive_root (each stream opened in turn), checked against the local
        file's size and sha256 as recorded."""
        tmp = self.layout.scratch("rekey")
        key = self.placer.key(obj.key)
        streams = await self.objects.streams_of(obj.path) or [(0, 0, 0, obj.bytes)]
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        fd = await asyncio.to_thread(open_file, tmp, flags, 0o600, root=self.layout.root)
        try:
            with os.fdopen(fd, "wb") as out:
                for _, _, offset, length in streams:
                    data = await self.placer.store.read_range(key, offset, length)
                    await self._open(obj, data, out)
            got = await asyncio.to_thread(
                functools.partial(digest_path, tmp, root=self.layout.root, cancel=self.cancel)
            )
        except BaseException:
            await asyncio.to_thread(remove_scratch, tmp, self.layout)
            raise
        if got != Digest(obj.local_bytes, obj.local_sha256):
            await asyncio.to_thread(remove_scratch, tmp, self.layout)
            raise SealError(f"{self.placer.store.where(key)}: opens to other bytes than shipped")
        return tmp

    async def _open(self, obj: RemoteObject, data: bytes, out: io.BufferedWriter) -> None:
        if obj.sealed_to is None:
            if obj.seek_points is None:
                await asyncio.to_thread(out.write, data)
            else:  # a packed month is sealed as every sealed month is: its database
                await asyncio.to_thread(unpack, data, out, self.cancel)
            return
        assert self.identities is not None
        await asyncio.to_thread(
            functools.partial(
                open_sealed, io.BytesIO(data), out, self.identities, length=len(data),
                what=obj.path, sealed_to=obj.sealed_to, cancel=self.cancel,
            )
        )  # fmt: skip
