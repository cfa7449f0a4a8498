"""``cat``: one archived file's bytes, any version of it, to a stream, without
restoring it: read where they lie (a gzip, a bundle member by offset, or the
remote tier's copy), checked against the manifest's sha256 as they go.

``PATH[@VERSION]``: PATH relative to live_root (or absolute, inside it); VERSION
an entry id (ASCII digits), or a time (ISO 8601 as ``versions`` prints it, ``...Z``
for UTC; local without an offset: the newest version archived at or before it),
as ``base/given.py`` reads them; none,
the newest version (the one ``restore --path`` brings back). The whole argument
is tried as a path first, so a name with ``@`` in it reads as it is; ``version``
(``--version``) takes the argument whole as the path.

Invariants:
- Read-only: no archive lock, the manifest opened read-only, nothing written in
  the archive or the live tree. A copy only the remote tier holds is read
  through a block cache (remote/rangecache.py: ranged GETs of its member's or
  object's bytes as they are inflated, blocks kept in a folder of its own under
  ``[mount] cache_dir``, removed after the read); what it cost is
  ``CatResult.remote``. A sealed copy's age stream is read through the same
  cache and opened whole into a file in the cache's folder (age cannot be read
  by ranges), removed with it. Scratch files a crash left under archive_root are not
  cleared here: that is for an operation holding the lock.
- An unknown path or version is a ``UsageError`` (exit 2), before any byte is
  sent; an expired version says when, and what the bucket still keeps of it,
  exit 1. Asked for (``expired``), a copy of an expired version that expiry
  left in the bucket (its lock kept it) is read as any remote copy, checked
  against the tombstone's sha256, and ``CatResult.kept`` says it was.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Literal

from ..base.cancel import CancelToken
from ..base.codec import Digest
from ..base.config import Settings
from ..base.errors import ColdkeepError, UsageError
from ..base.given import parse_id, parse_time
from ..base.layout import Layout
from ..base.ratelimit import RateLimiter
from ..base.times import day_of, now_ms
from ..files.find import relative
from ..files.reader import Streamed, entry_gzip, stream_entry
from ..remote.cold import RemoteCold
from ..remote.connect import connected
from ..remote.fetch import RemoteReader
from ..remote.rangecache import CacheStats, range_cache
from ..remote.sealing import Identities
from ..store.entries import Entry
from ..store.expiry import expired_detail
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects


class NotArchived(UsageError):
    """No archived file or version has that name."""


class Unreadable(ColdkeepError):
    """The version exists but no copy of its bytes is left (expired, or its
    gzip missing); the message says which and when."""


@dataclass(frozen=True)
class CatResult:
    entry: Entry
    streamed: Streamed
    source: Literal["local", "remote"] = "local"  # where the gzip was read
    remote: CacheStats | None = None  # what reading the remote copy cost
    kept: RemoteObject | None = None  # an expired version: the copy the bucket still keeps

    @property
    def problem(self) -> str | None:
        return self.streamed.problem

    @property
    def expired(self) -> str | None:
        """An expired version read from the copy the bucket kept: said, with
        when (None: the version had not expired)."""
        e, kept = self.entry, self.kept
        if kept is None:
            return None
        when = "" if e.expired_at is None else f" on {day_of(e.expired_at)}"
        lock = "" if kept.retain_until is None else f" (its lock ends {day_of(kept.retain_until)})"
        return (
            f"{e.relpath} (entry {e.id}) expired{when}: read from the remote copy the bucket "
            f"still keeps{lock}"
        )


def archived_time(ms: int) -> str:
    """An entry's archived_at as ``versions`` prints it and VERSION takes it
    (UTC, to the second)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _listed(versions: list[Entry]) -> str:
    shown = [f"{e.id} ({archived_time(e.archived_at)})" for e in versions[-5:]]
    more = f"{len(versions) - 5} older, " if len(versions) > 5 else ""
    return f"its versions: {more}{', '.join(shown)}"


def _version_of(relpath: str, versions: list[Entry], version: str) -> Entry:
    """The version of ``relpath`` that ``version`` names: an entry id, or a time."""
    entry_id = parse_id(version)
    if entry_id is not None:
        found = [e for e in versions if e.id == entry_id]
        if found:
            return found[0]
        raise NotArchived(f"entry {version} is not a version of {relpath}; {_listed(versions)}")
    at = parse_time(version)
    if at is None:
        raise NotArchived(
            f"version {version!r} of {relpath} is neither an entry id (digits 0-9) nor a "
            f"time (YYYY-MM-DD[THH:MM[:SS]], Z for UTC); {_listed(versions)}"
        )
    before = [e for e in versions if e.archived_at <= at]
    if not before:
        raise NotArchived(
            f"no version of {relpath} was archived at or before {version}; {_listed(versions)}"
        )
    return max(before, key=lambda e: (e.archived_at, e.id))


async def pick_version(
    manifest: Manifest, arg: str, version: str | None, live_root: os.PathLike[str]
) -> Entry:
    """The entry ``PATH[@VERSION]`` (or ``arg`` and ``version``) names."""
    relpath = relative(arg, Path(live_root), "PATH")
    versions = await manifest.versions_of(relpath)
    if version is not None or versions:
        if not versions:
            raise _unknown(relpath)
        return versions[-1] if version is None else _version_of(relpath, versions, version)
    path, at, said = arg.rpartition("@")
    if at and path and said:
        relpath = relative(path, Path(live_root), "PATH")
        versions = await manifest.versions_of(relpath)
        if versions:
            return _version_of(relpath, versions, said)
    raise _unknown(relative(arg, Path(live_root), "PATH"))


def _unknown(relpath: str) -> NotArchived:
    return NotArchived(
        f"nothing is archived at {relpath} (PATH is relative to live_root; "
        "coldkeep restore --list --path GLOB lists archived paths)"
    )


async def _remote_needed(entry: Entry, manifest: Manifest, layout: Layout) -> bool:
    """Whether only the remote tier can give ``entry``'s gzip: its local copy
    dropped once shipped, or gone. Asked first, so that reading a local copy
    never opens the store (an S3 client costs its import and its set-up)."""
    obj = await RemoteObjects(manifest).get(entry.gz_path)
    if obj is None:
        return False
    if not obj.local:
        return True
    present = await asyncio.to_thread(layout.abs(entry.gz_path).exists)
    return not present or entry.status == "missing"


@asynccontextmanager
async def _remote(
    settings: Settings, manifest: Manifest, entry: Entry, identities: Identities | None
) -> AsyncIterator[RemoteReader | None]:
    """The remote tier's copies, read through a block cache, when a [remote] is
    configured and only it holds ``entry``'s gzip; the cache closed (its folder
    removed) after the block."""
    remote = settings.remote
    layout = Layout(settings.archive_root)
    if remote is None or not await _remote_needed(entry, manifest, layout):
        yield None
        return
    limiter = RateLimiter(remote.bytes_per_s)
    async with connected(remote) as store, range_cache(store, settings.mount, limiter) as cache:
        yield RemoteReader(store, remote.site, manifest, layout, limiter, cache, identities)


async def cat_file(
    settings: Settings,
    arg: str,
    version: str | None,
    out: BinaryIO,
    cancel: CancelToken | None = None,
    identities: Identities | None = None,
    expired: bool = False,
) -> CatResult:
    """The bytes of the version ``arg`` (and ``version``) names to ``out``, checked
    as they go (``CatResult.problem``: not the archived bytes, said after them);
    a sealed remote copy opened with ``identities``; an expired version read
    from the copy the bucket still keeps only when ``expired`` asks."""
    cancel = cancel or CancelToken()
    layout = Layout(settings.archive_root)
    manifest = await Manifest.open_existing(layout.manifest)
    if manifest is None:
        raise NotArchived("nothing is archived yet (no coldkeep.db): there is no file to read")
    async with manifest:
        entry = await pick_version(manifest, arg, version, settings.live_root)
        kept = None
        if entry.status == "expired":
            kept = await RemoteObjects(manifest).get(entry.gz_path)
            if kept is None or not expired:
                said = expired_detail(entry, kept, now_ms())
                raise Unreadable(f"{entry.relpath} (entry {entry.id}): {said}")
        try:
            return await _stream(settings, manifest, entry, out, cancel, identities, kept)
        except RemoteCold as err:
            raise err.for_entry(entry.id, entry.relpath) from None


async def _stream(
    settings: Settings,
    manifest: Manifest,
    entry: Entry,
    out: BinaryIO,
    cancel: CancelToken,
    identities: Identities | None,
    kept: RemoteObject | None,
) -> CatResult:
    """``entry``'s bytes to ``out`` from its local gzip or the remote tier's copy."""
    layout = Layout(settings.archive_root)
    async with _remote(settings, manifest, entry, identities) as remote:
        async with entry_gzip(entry, layout, remote, cancel) as at:
            if at is None:
                raise Unreadable(
                    f"{entry.relpath} (entry {entry.id}): its gzip {entry.gz_path} is "
                    "missing from the archive and no remote copy holds it"
                )
            expect = Digest(entry.bytes, entry.sha256)
            streamed = await stream_entry(at, expect, out, cancel=cancel)
            source = at.source
        stats = None if remote is None or remote.cache is None else remote.cache.stats
    return CatResult(entry, streamed, source, stats, kept)
