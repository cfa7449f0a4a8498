"""``coldkeep rekey``: the objects sealed to recipients other than ``[remote]
encrypt_to``'s (or stored unsealed), sealed again to them.

An age stream's recipients cannot be changed in place: pyrage seals and opens
whole streams and never hands out a stream's file key, the only thing a new
recipient's stanza could wrap. So each object is sealed anew, one at a time,
under the archive lock:

    source   the local copy, where one is relied on; else the remote object
             opened with ``--identity`` (a bundle: each of its streams, in
             order, which tile it), checked against the local file's sha256
    upload   sealed to the current set, create-only under a new key, read back
    record   its row replaced (key, set, sizes, sha256s, streams), one transaction
    delete   the old object, every version (the bucket's lock may keep it: said)

then one manifest snapshot, so that the newest opens with the new identity.

Invariants:
- The old object is deleted only after the new one is read back and recorded:
  a crash between leaves both in the bucket, the row naming the new one.
- A plaintext rebuilt from the remote is sealed only when its size and sha256
  are the local file's as recorded at its first ship.
- Without ``--identity``, objects only the remote holds are named, never
  skipped in silence; they stay readable with the old identity.
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
from ..base.codec import Digest, digest_path
from ..base.config import RemoteSettings
from ..base.errors import RemoteError, UsageError
from ..base.fsutil import open_file
from ..base.recipients import RecipientSet
from ..store.remoteobjects import RemoteObject, RemoteObjects
from .fetch import remove_scratch
from .objectstore import ObjectInfo, RemoteFatal, RemoteLocked
from .sealing import Identities, Reseal, SealError, open_sealed, rekey_step
from .ship import Sent, Shipper


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
    old_kept: list[str] = field(default_factory=list)  # old objects the bucket's lock keeps
    needs_identity: list[str] = field(default_factory=list)  # not done: give --identity
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
    def __init__(
        self, shipper: Shipper, identities: Identities | None, cancel: CancelToken
    ) -> None:
        self.shipper = shipper
        self.objects = shipper.objects
        self.layout = shipper.layout
        self.identities = identities
        self.cancel = cancel
        self.report = RekeyReport()

    async def run(self) -> RekeyReport:
        recipients = recipients_of(self.shipper.remote)
        await self.shipper.settle_loose()
        plan = await rekey_plan(self.objects, recipients)
        for item in plan.items:
            self.cancel.check()
            if item.needs_identity and self.identities is None:
                self.report.needs_identity.append(item.path)
                continue
            obj = await self.objects.get(item.path)
            if obj is None:
                continue  # expired meanwhile
            try:
                await self._reseal(obj, item.source)
            except RemoteFatal:
                raise
            except (RemoteError, SealError, UsageError, OSError) as err:
                self.report.problems.append(f"{obj.path}: {err}")
        if self.report.resealed:
            await self.shipper.ship_manifest()
            self.report.snapshot = self.shipper.report.snapshot
            self.report.problems += self.shipper.report.problems
        return self.report

    async def _reseal(self, obj: RemoteObject, source: str) -> None:
        lock = await self.shipper.file_lock(obj.path) if obj.month is None else None
        spans = await self.shipper.spans_of(obj.path) if obj.month is None else None
        if source == "local":
            local = self.layout.abs(obj.path)
            sent = await self.shipper.upload_sealed(obj.path, local, lock, spans)
        else:
            plain = await self._plain_from_remote(obj)
            try:
                sent = await self.shipper.upload_sealed(obj.path, plain, lock, spans)
            finally:
                await asyncio.to_thread(remove_scratch, plain, self.layout)
        if sent.plain != Digest(obj.local_bytes, obj.local_sha256):
            raise SealError("the copy sealed is not the one shipped (run coldkeep verify)")
        held = await self.shipper.read_back(sent)
        if isinstance(held, str):
            raise RemoteError(held)
        await self.objects.replace_row(
            _renewed(obj, sent, held), sent.streams, at=self.shipper.clock()
        )
        self.report.resealed.append(obj.path)
        try:
            await self.shipper.store.delete(self.shipper.key(obj.key))
        except RemoteLocked:
            self.report.old_kept.append(obj.key)
        await self.objects.settled(obj.key)

    async def _plain_from_remote(self, obj: RemoteObject) -> Path:
        """``obj``'s plaintext rebuilt from the remote into a scratch file under
        archive_root (each stream opened in turn), checked against the local
        file's size and sha256 as recorded."""
        tmp = self.layout.scratch("rekey")
        key = self.shipper.key(obj.key)
        streams = await self.objects.streams_of(obj.path) or [(0, 0, 0, obj.bytes)]
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        fd = await asyncio.to_thread(open_file, tmp, flags, 0o600, root=self.layout.root)
        try:
            with os.fdopen(fd, "wb") as out:
                for _, _, offset, length in streams:
                    data = await self.shipper.store.read_range(key, offset, length)
                    await self._open(obj, data, out)
            got = await asyncio.to_thread(
                functools.partial(digest_path, tmp, root=self.layout.root, cancel=self.cancel)
            )
        except BaseException:
            await asyncio.to_thread(remove_scratch, tmp, self.layout)
            raise
        if got != Digest(obj.local_bytes, obj.local_sha256):
            await asyncio.to_thread(remove_scratch, tmp, self.layout)
            raise SealError(f"{self.shipper.store.where(key)}: opens to other bytes than shipped")
        return tmp

    async def _open(self, obj: RemoteObject, data: bytes, out: io.BufferedWriter) -> None:
        if obj.sealed_to is None:
            await asyncio.to_thread(out.write, data)
            return
        assert self.identities is not None
        await asyncio.to_thread(
            functools.partial(
                open_sealed, io.BytesIO(data), out, self.identities, length=len(data),
                what=obj.path, sealed_to=obj.sealed_to, cancel=self.cancel,
            )
        )  # fmt: skip


def _renewed(obj: RemoteObject, sent: Sent, info: ObjectInfo) -> RemoteObject:
    """``obj``'s row, naming the object ``sent`` uploaded (its place, its sizes
    and sha256s, and its lock and version as the server said them: never the
    old row's) instead; shipped and verified as before."""
    return replace(
        obj,
        **sent.stored(),
        retain_until=info.lock.retain_until,
        legal_hold=info.lock.legal_hold,
        version=info.version,
    )
