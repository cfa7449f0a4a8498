"""Placing objects in the remote tier: the one way this site's data gets into
the bucket (ship's archive files and event months, ``verify --remote``'s
replacements, ``rekey``'s copies sealed again, the manifest snapshots' bytes),
and the one way a copy no row records any more leaves it.

One object placed:

    seal     sealed to ``[remote] encrypt_to``'s recipients into a scratch file
             where they are set (a bundle: one age stream per member), under a
             key of its own written to ``remote_loose`` first
    lock     what it must carry: retained until expiry would delete it
             (bucketlock.py), decided against the bucket's clock, and an S3
             legal hold where a hold in force covers it (the holds read once,
             as expiry and a ship's drops read them)
    put      create-only, the sha256 for the server to check
    confirm  a HEAD: the size and sha256 sent, the encryption asked, a lock at
             least as asked (one found at its key with less has its retention
             extended first); or, for a group of unlocked uploads whose PUT
             answers gave the sha256 sent, their sizes by one listing
    record   its row, written from what that HEAD said: retain-until, legal
             hold and version as the bucket holds them, never as asked nor an
             old row's

A copy no row records (an upload never read back; the copy a row named before
a new one replaced it):

    tracked  written to ``remote_loose`` before the step that may leave it:
             before its upload, or with the row that replaces it (then with
             the lock that row said it carries)
    unheld   its S3 legal hold lifted: what replaced it carries the hold,
             confirmed by HEAD before
    deleted  every version, once its retain-until by the bucket's clock has
             passed; one the bucket keeps stays in ``remote_loose`` with the
             lock the bucket says it has, and the first ship after that lock
             ends deletes it

Invariants:
- Every object this site put in the bucket (manifest snapshots' statements and
  the site's markers aside) is a row or a key in ``remote_loose``, whatever
  step a crash stops at.
- Nothing is recorded until the bucket has shown it holds the bytes sent,
  encrypted and locked as asked; a row's lock and version are the HEAD's.
- Lock dates are the bucket's (bucketclock.py: a server's ``Date``): a host clock that
  runs ahead never ships an object unlocked, nor deletes a copy early.
- A loose copy is asked of the bucket (its hold lifted, then its delete) only
  once its recorded retain-until has passed by the bucket's clock; nothing is
  asked of it before. What the bucket refuses stays tracked, never forgotten.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import posixpath
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from ..base.cancel import CancelToken
from ..base.codec import Digest, Span, digest_path
from ..base.config import Settings
from ..base.errors import RemoteError
from ..base.layout import Layout
from ..base.ratelimit import UNLIMITED, RateLimiter
from ..base.steps import StepHook, StepName, no_step
from ..base.times import now_ms
from ..store.legalholds import ActiveHolds, active, held_paths
from ..store.manifest import Manifest
from ..store.remoteobjects import Loose, RemoteObject, RemoteObjects, Stream, sealed_key
from .bucketclock import bucket_now
from .bucketlock import file_retain_until, lock_for, month_retain_until
from .fetch import remove_scratch
from .objectstore import (
    Encryption,
    ObjectInfo,
    ObjectLock,
    ObjectStore,
    Put,
    RemoteFatal,
    RemoteLocked,
    RemoteMissing,
)
from .sealing import Sealed, seal_path
from .snapshots import SIG, generation_of

LIST_PAGE = 1000  # keys per listing request (S3's page)


@dataclass(frozen=True)
class Sent:
    """An upload (or an object found at its key), not yet read back."""

    path: str
    size: int
    sha: str
    created: bool
    kept: str | None  # the SHA-256 the PUT's answer says the server keeps
    encryption: Encryption | None  # what the PUT's answer says the server applied
    lock: ObjectLock | None = None  # what the upload asked of the bucket's Object Lock
    stored_as: str | None = None  # sealed: its key under the site (not its path)
    sealed_to: str | None = None  # sealed: the recipient set's fingerprint
    plain: Digest | None = None  # sealed or packed: the local file's size and sha256
    streams: tuple[Stream, ...] = ()  # sealed bundle: each member's age stream
    storage_class: str | None = None  # the S3 class it was put in (None: a folder)

    @property
    def key(self) -> str:
        return self.path if self.stored_as is None else self.stored_as

    def stored(self) -> dict[str, Any]:
        """What a row says of the object this upload left: where it is, its
        size and sha256, and (sealed) the recipient set and the local file's."""
        return {
            "bytes": self.size,
            "sha256": self.sha,
            "sealed_to": self.sealed_to,
            "stored_as": self.stored_as,
            "plain_bytes": self.plain.bytes if self.plain else None,
            "plain_sha256": self.plain.sha256 if self.plain else None,
            "storage_class": self.storage_class,
        }


def confirmed(draft: RemoteObject, sent: Sent, info: ObjectInfo) -> RemoteObject:
    """``draft`` naming the object ``sent`` left, as the bucket said it
    (``info``): its place, sizes and sha256s from the upload, its lock and
    version from the answer that confirmed it."""
    return replace(
        draft,
        **sent.stored(),
        retain_until=info.lock.retain_until,
        legal_hold=info.lock.legal_hold,
        version=info.version,
    )


# A copy no row records, settled: deleted, found gone already, or kept by the
# bucket's lock and tracked with the lock the bucket says it has.
Retired = Literal["deleted", "gone", "kept"]


@dataclass
class LooseSettled:
    """What settling the loose copies did."""

    deleted: int = 0
    kept: int = 0  # tracked: the bucket's lock keeps them
    problems: list[str] = field(default_factory=list)


class Placer:
    """Objects placed in one site's prefix of one store, and the copies no row
    records settled, for one operation under the archive lock."""

    def __init__(
        self,
        settings: Settings,
        manifest: Manifest,
        store: ObjectStore,
        *,
        step: StepHook = no_step,
        clock: Callable[[], int] = now_ms,
        reads: RateLimiter = UNLIMITED,
        cancel: CancelToken | None = None,
    ) -> None:
        assert settings.remote is not None
        self.settings = settings
        self.remote = settings.remote
        self.layout = Layout(settings.archive_root)
        self.manifest = manifest
        self.objects = RemoteObjects(manifest)
        self.store = store
        self.step = step
        self.clock = clock  # the host's: when things were done, never a lock date
        # Bytes sent go through remote.bytes_per_s; the local reads that hash
        # them through io.bytes_per_s, like every other read of the archive.
        self.limiter = RateLimiter(self.remote.bytes_per_s)
        self.reads = reads
        self.cancel = cancel or CancelToken()
        self.seal = self.remote.encrypt_to  # objects sealed to these recipients first
        self._probing = asyncio.Lock()
        self._holds: ActiveHolds | None = None

    def key(self, path: str) -> str:
        return f"{self.remote.site}/{path}"

    async def bucket_now(self) -> int:
        """The bucket's time (a folder's: this host's, as its clock says)."""
        return await bucket_now(self.store, self.clock())

    async def _announce(self, name: StepName, path: str) -> None:
        await self.step(name, {"label": path})

    async def digest(self, local: Path) -> Digest:
        """A local file's size and sha256, read through io.bytes_per_s."""
        return await asyncio.to_thread(
            digest_path, local, root=self.layout.root, cancel=self.cancel, limiter=self.reads
        )

    # what an object must carry ----------------------------------------------------

    async def holds(self) -> ActiveHolds:
        """The holds in force when this placer first asked: what its uploads
        ask for. One placed since is the hold mirror's (every ship runs one)."""
        if self._holds is None:
            self._holds = await active(self.manifest, self.clock())
        return self._holds

    async def file_lock(self, path: str) -> ObjectLock | None:
        """What archive file ``path``'s upload asks of the bucket's lock."""
        if self.remote.locks is None:
            return None
        holds = await self.holds()
        held = bool(holds) and bool(await held_paths(self.manifest, holds, [path]))
        until = await file_retain_until(self.objects, self.settings.retention, path)
        return lock_for(self.remote, until, held, await self.bucket_now())

    async def month_lock(self, month: str) -> ObjectLock | None:
        """What a snapshot of event month ``month`` asks of the bucket's lock."""
        if self.remote.locks is None:
            return None
        held = (await self.holds()).for_month(month) is not None
        until = month_retain_until(self.settings.retention, month)
        return lock_for(self.remote, until, held, await self.bucket_now())

    async def lock_of(self, obj: RemoteObject) -> ObjectLock | None:
        """What a new copy of ``obj`` asks of the bucket's lock: what it should
        have now, kept at least as long as ``obj`` was (a retention shortened
        since does not shorten what the bucket promised)."""
        lock = await (self.file_lock(obj.path) if obj.month is None else self.month_lock(obj.month))
        if lock is None or obj.retain_until is None:
            return lock
        if lock.retain_until is not None and lock.retain_until >= obj.retain_until:
            return lock
        if obj.retain_until <= await self.bucket_now():
            return lock
        return replace(lock, mode=self.remote.locks, retain_until=obj.retain_until)

    async def spans_of(self, path: str) -> list[Span] | None:
        """A bundle's members, each sealed as its own stream (None: a gzip)."""
        spans = [Span(o, n) for o, n in await self.objects.member_spans(path)]
        return spans or None

    # put ------------------------------------------------------------------------

    async def upload(
        self,
        path: str,
        local: Path,
        lock: ObjectLock | None,
        *,
        spans: list[Span] | None = None,
        got: Digest | None = None,
        plain: Digest | None = None,
    ) -> Sent:
        """``local`` uploaded create-only for archive path ``path``, sealed first
        where ``[remote] encrypt_to`` asks (a bundle's ``spans`` each a stream
        of its own; hashed in the same pass). ``got``: the local file's size
        and sha256 when known (hashed here otherwise); a file sealed to other
        bytes is not recorded. ``plain``: what ``local`` packs (a month's
        gzip: its database), never sealed."""
        if self.seal is not None:
            assert plain is None, "a packed month is never sealed"
            sent = await self._upload_sealed(path, local, lock, spans)
            if got is not None and sent.plain != got:
                raise RemoteError(
                    f"{local}: sealed as {sent.plain}, not the {got.bytes} bytes, sha256 "
                    f"{got.sha256} expected: not recorded (changed meanwhile? run coldkeep verify)"
                )
            return sent
        if got is None:
            got = await self.digest(local)
        put = await self._put(path, local, got.bytes, got.sha256, lock)
        await self._announce("object_uploaded", path)
        cls = self.class_of(path)
        return Sent(
            path, got.bytes, got.sha256, put.created, put.kept, put.encryption, lock,
            plain=plain, storage_class=cls,
        )  # fmt: skip

    async def _upload_sealed(
        self, path: str, local: Path, lock: ObjectLock | None, spans: list[Span] | None
    ) -> Sent:
        assert self.seal is not None
        key = sealed_key(path, self.seal.fingerprint)
        # Written down first: no later ship would look at a key this random.
        await self.objects.loose(key, path, self.clock())
        sealed, put = await self._seal_and_put(local, key, lock, spans)
        stored = sealed.sealed
        await self._announce("object_uploaded", path)
        streams = tuple((p.offset, p.length, s.offset, s.length) for p, s in sealed.pieces)
        return Sent(
            path, stored.bytes, stored.sha256, put.created, put.kept, put.encryption, lock, key,
            self.seal.fingerprint, sealed.plain, streams if spans is not None else (),
            self.class_of(path),
        )  # fmt: skip

    async def put_as(self, key: str, local: Path, lock: ObjectLock | None) -> Digest:
        """``local`` put create-only at ``key`` under the site, sealed where asked
        (one stream), for an object no row records (a manifest snapshot: its
        caller wrote ``key`` to ``remote_loose`` first); what was put."""
        if self.seal is None:
            got = await self.digest(local)
            await self._put(key, local, got.bytes, got.sha256, lock)
            return got
        sealed, _ = await self._seal_and_put(local, key, lock, None)
        return sealed.sealed

    async def _seal_and_put(
        self, local: Path, key: str, lock: ObjectLock | None, spans: list[Span] | None
    ) -> tuple[Sealed, Put]:
        """``local`` sealed to the recipients into a scratch file under
        archive_root, uploaded create-only at ``key`` (under the site), the
        scratch removed however that ends."""
        assert self.seal is not None
        tmp = self.layout.scratch("seal")
        try:
            sealed = await asyncio.to_thread(
                functools.partial(
                    seal_path, local, tmp, self.seal, spans, root=self.layout.root,
                    cancel=self.cancel, limiter=self.reads,
                )
            )  # fmt: skip
            stored = sealed.sealed
            put = await self._put(key, tmp, stored.bytes, stored.sha256, lock)
        finally:
            await asyncio.to_thread(remove_scratch, tmp, self.layout)
        return sealed, put

    def class_of(self, path: str) -> str | None:
        """The S3 storage class the object for archive path ``path`` is put in
        (None: a folder remote has none)."""
        return None if self.remote.folder is not None else self.remote.class_of(path)

    async def _put(
        self, path: str, local: Path, size: int, sha: str, lock: ObjectLock | None
    ) -> Put:
        """``local`` put create-only at archive path ``path`` under the site, in
        the storage class that kind of object goes to."""
        key = self.key(path)
        await asyncio.to_thread(self.limiter.take, size, self.cancel)
        async with self._probing:  # the first upload finds out; the others wait for it
            conditional = await self.store.refuses_overwrite()
        if not conditional and await self.store.head(key) is not None:
            return Put(created=False)  # under the archive lock: nobody of this site writes
        return await self.store.put_new(
            key, local, size, sha, lock, storage_class=self.remote.class_of(path)
        )

    # confirm and record ------------------------------------------------------------

    def listable(self, sent: Sent) -> bool:
        """Whether ``sent`` may be read back by a listing of sizes: created, its
        PUT's answer gave the sha256 sent and the encryption asked, and no lock
        asked (only a HEAD says what the bucket locked)."""
        return (
            sent.created
            and sent.kept == sent.sha
            and self.store.encryption.satisfied_by(sent.encryption or Encryption())
            and sent.lock is None
        )

    async def read_back(self, sent: Sent) -> ObjectInfo | str:
        """What the server says of the object at ``sent``'s key, when it holds
        exactly ``sent``'s bytes there (size and SHA-256 read back by HEAD, or
        the bytes themselves where the server keeps no checksum), encrypted and
        locked as asked; else why not."""
        return await self.check_at(self.key(sent.key), sent.size, sent.sha, sent.created, sent.lock)

    async def check_at(
        self, key: str, size: int, sha: str, created: bool, lock: ObjectLock | None
    ) -> ObjectInfo | str:
        """What the server says of the object at ``key`` (under the remote's
        prefix) when it holds exactly ``size`` bytes of that ``sha`` there, as
        ``read_back`` asks; else why not. ``created``: put by this upload."""
        info = await self.store.head(key)
        if info is not None and info.sha256 is None:
            info = await self._read_bytes_back(info)
        if info is None:
            return f"{self.store.where(key)}: gone right after its upload; not recorded"
        how = "was uploaded" if created else "was already there"
        if (info.size, info.sha256) != (size, sha):
            return (
                f"{self.store.where(key)} {how} with {info.size} bytes, sha256 {info.sha256}, "
                f"not the local {size} bytes, sha256 {sha}: not recorded, nothing "
                "replaced (another host shipping as the same remote.site?)"
            )
        if not self.store.encryption.satisfied_by(info.encryption):
            return (
                f"{self.store.where(key)} {how} with {info.encryption}, not the "
                f"{self.store.encryption} [remote] asks for: not recorded (does a bucket "
                "policy or a proxy change it? doctor reads the bucket's default)"
            )
        if lock is not None and not lock.satisfied_by(info.lock):
            if not created:
                # Uploaded before the lock was asked for, or with a shorter one:
                # a retention can always be extended.
                await self.store.keep(key, lock)
                info = await self.store.head(key) or info
            if not lock.satisfied_by(info.lock):
                return (
                    f"{self.store.where(key)} {how} with {info.lock}, not the {lock} "
                    "[remote] object_lock asks for: not recorded (does a proxy drop the "
                    "Object Lock headers?)"
                )
        return info

    async def _read_bytes_back(self, head: ObjectInfo) -> ObjectInfo:
        """A server that keeps no checksum: the bytes read back and hashed, as the
        version the HEAD said (the one the row records)."""
        data = await self.store.read_range(head.key, 0, head.size, head.version)
        return replace(head, size=len(data), sha256=hashlib.sha256(data).hexdigest())

    async def record(
        self, draft: RemoteObject, sent: Sent, info: ObjectInfo, *, instead: bool = False
    ) -> RemoteObject:
        """The row of the object ``sent`` left, as ``info`` said it, with the rest
        of ``draft``; ``instead``: in place of the row its path has (whose key,
        where another, is loose from then on, with the lock its row said)."""
        row = confirmed(draft, sent, info)
        if instead:
            await self.objects.replace_row(row, sent.streams, at=self.clock())
        else:
            await self.objects.record(row, sent.streams)
        await self._announce("object_recorded", sent.path)
        return row

    async def confirm(
        self, sent: Sent, draft: RemoteObject, *, instead: bool = False
    ) -> RemoteObject | str:
        """``sent`` read back and recorded (see ``record``); else why not."""
        try:
            info = await self.read_back(sent)
        except RemoteFatal:
            raise
        except RemoteError as err:
            return str(err)
        if isinstance(info, str):
            return info
        return await self.record(draft, sent, info, instead=instead)

    async def confirm_group(
        self, group: list[tuple[Sent, RemoteObject]]
    ) -> list[tuple[Sent, RemoteObject | str]]:
        """Uploads ``listable`` says a listing may read back: their sizes read by
        one listing where that costs fewer requests than a HEAD each, and
        recorded; what the listing does not show is read back by HEAD."""
        if not group:
            return []
        common = posixpath.commonpath([posixpath.dirname(s.path) for s, _ in group])
        prefix = f"{common}/" if common else ""
        listed_pages = -(-(await self.objects.count_under(prefix) + len(group)) // LIST_PAGE)
        listed: dict[str, ObjectInfo] = {}
        if listed_pages < len(group):
            wanted = {self.key(s.key) for s, _ in group}
            try:
                async for info in self.store.list_objects(self.key(prefix)):
                    if info.key in wanted:
                        listed[info.key] = info
                        if len(listed) == len(wanted):
                            break
            except RemoteFatal:
                raise
            except RemoteError:
                listed.clear()  # each read back by HEAD instead, which says what fails
        done: list[tuple[Sent, RemoteObject | str]] = []
        for sent, draft in group:
            seen = listed.get(self.key(sent.key))
            if seen is not None and seen.size == sent.size:
                done.append((sent, await self.record(draft, sent, seen)))
            else:
                done.append((sent, await self.confirm(sent, draft)))
        return done

    async def place(
        self,
        path: str,
        local: Path,
        draft: RemoteObject,
        lock: ObjectLock | None,
        *,
        spans: list[Span] | None = None,
        got: Digest | None = None,
        plain: Digest | None = None,
        instead: bool = False,
    ) -> tuple[Sent, RemoteObject] | str:
        """``local`` uploaded for ``path`` (see ``upload``), read back and
        recorded (see ``record``): the upload and its row, else why not."""
        try:
            sent = await self.upload(path, local, lock, spans=spans, got=got, plain=plain)
        except RemoteFatal:
            raise
        except RemoteError as err:
            return str(err)
        row = await self.confirm(sent, draft, instead=instead)
        return row if isinstance(row, str) else (sent, row)

    # copies no row records ----------------------------------------------------------

    async def retire(self, loose: Loose, said: ObjectLock | None) -> Retired:
        """The copy at ``loose.key`` (written down in ``remote_loose``) deleted,
        or tracked while the bucket's lock keeps it. ``said``: the lock it is
        known to carry (its row's); None: unknown, read by HEAD (an upload
        that may not have begun). Its legal hold is lifted first."""
        key = self.key(loose.key)
        if said is None:
            info = await self.store.head(key)
            if info is None:
                return await self._gone(loose)
            said = info.lock
        if said.legal_hold:
            try:
                await self.store.set_legal_hold(key, False)
            except RemoteMissing:
                return await self._gone(loose)
            await self.objects.set_loose_hold(loose.key, False)
            await self._announce("loose_unheld", loose.path)
        if said.retain_until is not None and said.retain_until > await self.bucket_now():
            return await self._kept(loose, said.retain_until, False)
        try:
            await self.store.delete(key)
        except RemoteLocked:
            # Locked beyond what was recorded (a retention extended since, a
            # hold placed by another hand): tracked with what the bucket says.
            info = await self.store.head(key)
            if info is None:
                return await self._gone(loose)
            return await self._kept(loose, info.lock.retain_until, info.lock.legal_hold)
        if generation_of(loose.key) is not None:  # a snapshot: its statement too
            await self.store.delete(key + SIG)
        await self.objects.settled(loose.key)
        await self._announce("loose_deleted", loose.path)
        return "deleted"

    async def _kept(self, loose: Loose, until: int | None, held: bool) -> Retired:
        await self.objects.track(loose.key, until, held)
        await self._announce("loose_kept", loose.path)
        return "kept"

    async def _gone(self, loose: Loose) -> Retired:
        """Nothing at the key (an upload that never began, a copy deleted
        before a crash recorded it): a snapshot's statement deleted too."""
        if generation_of(loose.key) is not None:
            await self.store.delete(self.key(loose.key + SIG))
        await self.objects.settled(loose.key)
        return "gone"

    async def settle_loose(self) -> LooseSettled:
        """Every copy no row records, settled (``retire``): those the bucket's
        lock keeps by their recorded retain-until, and holds no legal hold
        on, are left without a request; the others are deleted, or tracked
        with what the bucket says keeps them. One that cannot be settled now
        is named, and left for the next."""
        done = LooseSettled()
        now: int | None = None
        for loose in await self.objects.loose_keys():
            self.cancel.check()
            if loose.retain_until is not None and not loose.legal_hold:
                now = now if now is not None else await self.bucket_now()
                if loose.retain_until > now:
                    done.kept += 1
                    continue
            known = loose.retain_until is not None or loose.legal_hold
            said = ObjectLock(None, loose.retain_until, loose.legal_hold) if known else None
            try:
                retired = await self.retire(loose, said)
            except RemoteFatal:
                raise
            except RemoteError as err:  # tried again by the next ship
                done.problems.append(
                    f"{loose.path}: a copy no row records, left for the next ship: {err}"
                )
                continue
            done.deleted += retired == "deleted"
            done.kept += retired == "kept"
        return done
