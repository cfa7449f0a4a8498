"""The object store interface every remote backend implements, and the one place
a ``[remote]`` config becomes a store.

Keys are ``/``-separated and relative to the URL's prefix (``s3://bucket/prefix``
or ``file:///folder``); the shipper puts each site's objects under ``<site>/``.

Invariants:
- ``put_new`` never overwrites: it creates the key or reports that it exists
  (S3's ``If-None-Match: *``; a directory's link-without-replace). A store that
  cannot refuse an existing key says so (``conditional`` is False) and its caller
  asks with ``head`` first, under the archive lock.
- ``head`` reads back what the server holds: the size and, where the server
  keeps one, the SHA-256 it computed or checked. A PUT's answer may carry the
  SHA-256 the server keeps (``Put.kept``), never the size: nothing is recorded
  as remote on the strength of a PUT's answer alone (the shipper reads the size
  back by HEAD or by listing).
- A read given a ``version`` (what ``ObjectInfo.version`` said when the object
  was checked) reads that object or fails with ``RemoteReplaced``: never the
  bytes of another object put at the key since.
- Every failure is a ``RemoteError`` whose message is one line naming the URL and
  key and what to do; credentials never appear in it. One that no retry of
  another object would get past (``RemoteFatal``: unreachable, credentials, no
  bucket) stops the operation rather than being counted against each object.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import RemoteError
from ..base.fsutil import open_file, unlink_if_present, write_all
from .cold import ThawState, readable


class RemoteFatal(RemoteError):
    """The remote cannot be used at all until the operator fixes something (the
    endpoint unreachable, the credentials missing or refused, the bucket not
    there): an operation stops at the first one, in one line, instead of failing
    every object the same way."""


class RemoteAuthError(RemoteFatal):
    """The credentials are missing or refused: nothing will work until fixed."""


class RemoteUnreachable(RemoteFatal):
    """No connection to the endpoint could be made (refused, timed out, no such
    host)."""


class RemoteNoBucket(RemoteFatal):
    """The bucket the URL names does not exist. ``fix`` says what to do where the
    URL came from (a config's ``remote.url``, or a command's option)."""

    def __init__(self, url: str, bucket: str, fix: str = "create it, or fix remote.url") -> None:
        super().__init__(f"{url}: the bucket {bucket} does not exist ({fix})")
        self.url = url
        self.bucket = bucket

    def said_for(self, fix: str) -> RemoteNoBucket:
        """The same error, with what to do where the URL came from elsewhere."""
        return RemoteNoBucket(self.url, self.bucket, fix)


class RemoteMissing(RemoteError):
    """The object is not at its key."""


class RemoteReplaced(RemoteError):
    """A read pinned to a version found another object at the key: the one
    checked (when it shipped, or at the read's start) was replaced or removed."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"{where}: no longer the object shipped (replaced since; run coldkeep verify --remote)"
        )


class RemoteLocked(RemoteError):
    """The bucket refused to delete an object: its Object Lock retention has not
    ended, or a legal hold is on it. Not a failure to retry: the object stays
    until the bucket lets it go."""


@dataclass(frozen=True)
class ObjectLock:
    """S3 Object Lock, as asked of an upload or said of an object: ``mode``
    (``GOVERNANCE``/``COMPLIANCE``) until ``retain_until`` (ms since the epoch;
    None: no retention), and a legal hold."""

    mode: str | None = None
    retain_until: int | None = None
    legal_hold: bool = False

    def satisfied_by(self, got: ObjectLock) -> bool:
        """Whether an object locked as ``got`` is kept at least as this asks."""
        if self.legal_hold and not got.legal_hold:
            return False
        if self.retain_until is None:
            return True
        return (
            got.mode in (self.mode, "COMPLIANCE")  # compliance keeps at least as well
            and got.retain_until is not None
            and got.retain_until >= self.retain_until
        )

    def __str__(self) -> str:
        parts = []
        if self.retain_until is not None:
            parts.append(f"{self.mode} retention until {_utc(self.retain_until)}")
        if self.legal_hold:
            parts.append("a legal hold")
        return " and ".join(parts) or "no lock"


def _utc(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


@dataclass(frozen=True)
class Encryption:
    """Server-side encryption, as asked of an upload or said of an object:
    ``AES256`` (keys the server manages), ``aws:kms`` (a KMS key: ``kms_key_id``,
    an id, ARN or alias; None: the account's default), or None."""

    sse: str | None = None
    kms_key_id: str | None = None

    def __str__(self) -> str:
        if self.sse is None:
            return "no server-side encryption"
        key = f" with key {self.kms_key_id}" if self.kms_key_id else ""
        return f"server-side encryption {self.sse}{key}"

    def satisfied_by(self, got: Encryption) -> bool:
        """Whether an object stored as ``got`` is encrypted as this asks. A key
        asked for by id matches the ARN the server names; one asked for by
        alias cannot be told from the answer, so any KMS key is taken."""
        if self.sse is None:
            return True
        if got.sse != self.sse:
            return False
        want, key = self.kms_key_id, got.kms_key_id or ""
        return (
            want is None
            or want.startswith("alias/")
            or key in (want, f"key/{want}")
            or (key.endswith(f":key/{want}"))
        )


@dataclass(frozen=True)
class Put:
    """A create-only upload's answer."""

    created: bool  # False: the key held an object already, left as it was
    kept: str | None = None  # hex SHA-256 the server's answer says it keeps, if it said
    encryption: Encryption | None = None  # what the answer says it applied, if it said


@dataclass(frozen=True)
class BucketSettings:
    """How a bucket is set up, as far as this host may read it (None: not read,
    ``unread`` says why)."""

    versioning: str | None  # "Enabled", "Suspended", or "" (never turned on)
    lock: str | None  # "" without Object Lock, else its default retention said
    encryption: Encryption | None  # the default for uploads that ask for none
    unread: tuple[str, ...] = ()


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    sha256: str | None = None  # hex; None where the server keeps no checksum
    encryption: Encryption = Encryption()  # as a HEAD says it (a listing does not)
    lock: ObjectLock = ObjectLock()  # as a HEAD says it
    # What names this stored version of the key: S3's VersionId where the bucket
    # keeps versions, else its ETag; a folder's file, its inode and mtime. A
    # read pinned to it fails once another object is put at the key.
    version: str | None = None
    modified: int | None = None  # ms, by the server's clock (S3's Last-Modified)
    storage_class: str | None = None  # as a HEAD says it (None: STANDARD, or a folder)
    thaw: ThawState | None = None  # a cold object's thaw, as a HEAD says it

    @property
    def readable(self) -> bool:
        """Whether a GET can read it now (a cold object only once thawed)."""
        return readable(self.storage_class, self.thaw)


class ObjectStore(ABC):
    """An object store rooted at one URL."""

    url: str  # for messages: never holds a credential
    conditional: bool = True  # refuses to overwrite on its own
    own_clock: bool = False  # ``server_now`` is a server's clock, not this host's
    encryption: Encryption = Encryption()  # asked of every upload ([remote] sse)

    def where(self, key: str) -> str:
        return f"{self.url.rstrip('/')}/{key}"

    def unmarked(self) -> str:
        """The question for a remote found without its marker or any of the
        site's objects: what most likely happened to this kind of store."""
        return (
            f"the remote {self.url} has no marker: was the bucket or its prefix emptied, "
            "or is remote.url or remote.site wrong?"
        )

    async def refuses_overwrite(self) -> bool:
        """Whether ``put_new`` alone refuses an existing key (found out once,
        before the first upload); sets ``conditional``."""
        return self.conditional

    async def server_now(self) -> int:
        """The server's time now (ms since the epoch): what lock dates and remote
        expiry are decided against (bucketclock.py). Without ``own_clock``, this
        host's."""
        return time.time_ns() // 1_000_000

    async def bucket_settings(self) -> BucketSettings | None:
        """The bucket's versioning, Object Lock and default encryption; None for
        a store that is no bucket."""
        return None

    @abstractmethod
    async def put_new(
        self,
        key: str,
        src: Path,
        size: int,
        sha256: str,
        lock: ObjectLock | None = None,
        *,
        storage_class: str | None = None,
        random_key: bool = False,
    ) -> Put:
        """Upload ``src`` (``size`` bytes whose SHA-256 is ``sha256``, which the
        server checks where it can) to ``key`` unless it exists, locked as
        ``lock`` says (only a bucket with Object Lock is given one), in
        ``storage_class`` (None: the class of what is read without asking).
        ``random_key``: the key was made random for this object, so the store
        need not find out first whether it refuses overwrites."""

    async def put_bytes(
        self, key: str, body: bytes, *, scratch: Path, root: Path,
        lock: ObjectLock | None = None, random_key: bool = False,
    ) -> Put:  # fmt: skip
        """A small object (a marker, a statement) put create-only from ``body``,
        by way of the new scratch file ``scratch`` under ``root`` (removed
        however the upload ends)."""

        def prepare() -> None:
            fd = open_file(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root=root)
            try:
                # Not fsynced: read back by the upload in this boot, never placed.
                write_all(fd, body)
            finally:
                os.close(fd)

        try:
            await asyncio.to_thread(prepare)
            return await self.put_new(
                key, scratch, len(body), hashlib.sha256(body).hexdigest(), lock,
                random_key=random_key,
            )  # fmt: skip
        finally:
            await asyncio.to_thread(unlink_if_present, scratch, root=root)

    async def keep(self, key: str, lock: ObjectLock) -> None:
        """An object already at ``key`` locked at least as ``lock`` asks: its
        retention extended, its legal hold placed (only a bucket with Object Lock
        is asked)."""
        raise RemoteError(f"{self.where(key)}: this remote has no Object Lock")

    async def set_legal_hold(self, key: str, on: bool) -> None:
        """Place or lift the S3 legal hold on ``key``'s current version (only a
        bucket with Object Lock is asked)."""
        raise RemoteError(f"{self.where(key)}: this remote has no legal holds")

    async def thaw(self, key: str, days: int, tier: str) -> str:
        """Ask for a readable copy of the cold object at ``key`` for ``days``
        days, at retrieval ``tier`` (cold.TIERS): ``"asked"``, ``"extended"``
        (a copy was there: its days count again from now) or ``"under way"``
        (a thaw already runs; nothing new asked)."""
        raise RemoteError(f"{self.where(key)}: this remote holds nothing cold to thaw")

    @abstractmethod
    async def head(self, key: str) -> ObjectInfo | None:
        """What the server holds at ``key``; None if nothing."""

    @abstractmethod
    async def read_range(
        self, key: str, start: int, length: int, version: str | None = None
    ) -> bytes:
        """``length`` bytes of ``key`` (as ``version``, when given) from
        ``start``: one ranged GET."""

    @abstractmethod
    async def download(self, key: str, fd: int) -> int:
        """The whole object written to the open file ``fd`` (from its position;
        the caller fsyncs and places it); its size."""

    @abstractmethod
    def list_objects(self, prefix: str) -> AsyncIterator[ObjectInfo]:
        """Every key under ``prefix`` in key order (sizes; checksums only where
        listing gives them)."""

    async def list_under(self, prefixes: Sequence[str]) -> dict[str, list[ObjectInfo]]:
        """Every key under each of ``prefixes`` (folders beside one another, as
        ``site/heartbeat/`` and ``site/manifest/``), in key order: one listing
        each here; a store that can lists them all in one."""
        return {p: [i async for i in self.list_objects(p)] for p in prefixes}

    @abstractmethod
    async def list_dirs(self, prefix: str) -> list[str]:
        """The names one level below ``prefix`` (``prefix`` ends in ``/`` or is
        empty) that hold objects: the sites under a fleet's prefix."""

    @abstractmethod
    async def delete(self, key: str) -> None:
        """Remove ``key`` (gone already is fine); with Object Lock, every version
        of it, or ``RemoteLocked`` when the bucket refuses."""

    @abstractmethod
    async def clear_incomplete(self, prefix: str) -> int:
        """Remove what uploads cut short under ``prefix`` (a folder of keys, or
        one key) left behind (only the archive lock's holder for that prefix
        calls it); how many."""

    async def create_root(self) -> None:  # noqa: B027 - only a folder has one to make
        """Make the place the store's keys live in, where that is a thing of its
        own (a folder); only the remote marker's first write asks for it."""

    def take_notices(self) -> list[str]:
        """What the store learnt about the server that the operator should know
        (said once)."""
        return []

    async def close(self) -> None:  # noqa: B027 - a store with nothing to release
        """Release connections."""
