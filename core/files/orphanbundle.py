"""Orphans: what a crash between placing an archive file and committing its
entries leaves (recovery.py settles orphan gzips; this module, orphan bundles),
and the helpers both use.

An orphan bundle (a placed ``.tar`` no entry names) is settled member by member,
as an orphan gzip is, then in ONE transaction:

    member decompresses to its source's bytes, source unchanged  ->  adopted: an
                                                                     archived entry;
                                                                     the source
                                                                     unlinked after
                                                                     its identity check
    member decompresses cleanly to other bytes (or no source)   ->  stale: kept
    the codec refuses the member                                 ->  dropped: no entry
    the member or its source cannot be read                      ->  error: the whole
                                                                     bundle left as found

A bundle every member of which was dropped is removed. A member name that could
leave the live tree is refused (no entry), the rest settled.
"""

from __future__ import annotations

import asyncio
import functools
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..base.cancel import CancelToken, in_thread
from ..base.codec import CorruptGzip, Digest, digest_fd, inflate
from ..base.durable import fsync
from ..base.fsutil import (
    FileIdentity,
    fsync_dir,
    identity_or_none,
    open_file,
    unlink_if_present,
    unlink_source,
)
from ..base.ioerror import naming
from ..base.layout import UnsafePath, resolve_inside, unit_of
from ..base.ratelimit import RateLimiter
from ..base.times import is_mtime
from ..store.entries import Entry, NewEntry
from ..store.manifest import Manifest
from .bundle import Member, read_bundle
from .filemove import FileMover

OrphanOutcome = Literal[
    "found", "adopted", "stale", "corrupt", "changed", "error", "refused", "dropped"
]


@dataclass(frozen=True)
class Orphan:
    gz: Path
    relpath: str
    outcome: OrphanOutcome
    detail: str = ""


def make_durable(gz: Path, root: Path) -> None:
    """fsync an orphan and its directory: it may come from a process killed before
    step 5's directory fsync, or one whose fsync failed, and an entry (and the
    unlink of its source) is about to rest on its name."""
    fd = open_file(gz, os.O_RDONLY, root=root)
    try:
        with naming(gz):
            fsync(fd, "recovery.orphan_data")
    finally:
        os.close(fd)
    fsync_dir(gz.parent, root=root, site="recovery.orphan_dir")


def digest_if_identity(
    path: Path, root: Path, ident: FileIdentity, limiter: RateLimiter, cancel: CancelToken
) -> Digest | None:
    """The bytes of ``path`` if the file opened (never through a link) is the one
    ``ident`` describes, else None."""
    try:
        fd = open_file(path, os.O_RDONLY | os.O_NONBLOCK, root=root)
    except FileNotFoundError:
        return None
    try:
        if FileIdentity.of_stat(os.fstat(fd)) != ident:
            return None
        return digest_fd(fd, limiter=limiter, cancel=cancel)[0]
    finally:
        os.close(fd)


def trusted_mode(recorded: int | None, source: FileIdentity | None) -> int:
    """The mode an entry keeps from an archive's header (or the live source's):
    its permission bits only, never set-user-id."""
    if recorded:
        bits = stat.S_IMODE(recorded)
    elif source is not None and source.is_regular:
        bits = stat.S_IMODE(source.mode)
    else:
        bits = 0o644
    return stat.S_IFREG | (bits & 0o777)


class OrphanBundle:
    """One orphan bundle, settled (the lock is the caller's)."""

    def __init__(
        self, manifest: Manifest, mover: FileMover, bundle: Path, cancel: CancelToken
    ) -> None:
        self.manifest = manifest
        self.mover = mover
        self.bundle = bundle
        self.cancel = cancel
        self.live = mover.live_root

    async def settle(self) -> list[Orphan]:
        bundle = self.bundle
        try:
            contents = await asyncio.to_thread(read_bundle, bundle)
        except OSError as err:
            return [self._left(self.mover.layout.rel(bundle), err)]
        orphans = [Orphan(bundle, "", "refused", why) for why in contents.refused]
        settled: list[tuple[Orphan, NewEntry | None]] = []
        for m in contents.members:
            self.cancel.check()
            try:
                settled.append(await self._member(m))
            except OSError as err:
                # Unread, nothing about this bundle can be decided: as found.
                return [self._left(m.relpath, err)]
        new = [e for _, e in settled if e is not None]
        if new:
            try:
                await asyncio.to_thread(make_durable, bundle, self.mover.layout.root)
            except OSError as err:
                return [self._left(self.mover.layout.rel(bundle), err, "made durable")]
            entries = await self.manifest.add_entries(new)
            await self._unlink_adopted([e for e in entries if e.source_present])
        elif not contents.refused:
            await asyncio.to_thread(
                functools.partial(unlink_if_present, bundle, root=self.mover.layout.root)
            )
        return orphans + [o for o, _ in settled]

    def _left(self, what: str, err: OSError, doing: str = "read") -> Orphan:
        return Orphan(self.bundle, what, "error", f"could not be {doing} ({err}); left as found")

    async def _member(self, m: Member) -> tuple[Orphan, NewEntry | None]:
        mover, cancel = self.mover, self.cancel
        try:
            src: Path | None = resolve_inside(self.live, m.relpath)
        except UnsafePath:
            src = None
        ident = (
            await asyncio.to_thread(functools.partial(identity_or_none, src, root=self.live))
            if src is not None
            else None
        )
        try:
            packed = await in_thread(
                cancel, inflate, self.bundle, span=m.span, limiter=mover.limiter, cancel=cancel
            )
        except CorruptGzip as err:
            return Orphan(self.bundle, m.relpath, "dropped", str(err)), None
        live = None
        if src is not None and ident is not None and ident.is_regular:
            live = await in_thread(
                cancel, digest_if_identity, src, self.live, ident, mover.limiter, cancel
            )
        if ident is not None and live is not None and live == packed:
            return Orphan(self.bundle, m.relpath, "adopted"), self._entry(m, packed, ident)
        detail = "an earlier version, kept under its own entry"
        return Orphan(self.bundle, m.relpath, "stale", detail), self._entry(m, packed, None, ident)

    def _entry(
        self,
        m: Member,
        digest: Digest,
        adopted: FileIdentity | None,
        source: FileIdentity | None = None,
    ) -> NewEntry:
        mtime_ns = adopted.mtime_ns if adopted else m.mtime_ns
        return NewEntry(
            unit=unit_of(m.relpath),
            relpath=m.relpath,
            bytes=digest.bytes,
            sha256=digest.sha256,
            gz_path=self.mover.layout.rel(self.bundle),
            gz_bytes=m.span.length,
            mtime_ns=mtime_ns if is_mtime(mtime_ns) else 0,
            dev=adopted.dev if adopted else None,
            ino=adopted.ino if adopted else None,
            mode=adopted.mode if adopted else trusted_mode(m.mode, source),
            archived_at=self.mover.clock(),
            status="archived" if adopted else "stale",
            source_present=adopted is not None,
            member_offset=m.span.offset,
            member_length=m.span.length,
            ctime_ns=adopted.ctime_ns if adopted else None,
        )

    async def _unlink_adopted(self, entries: list[Entry]) -> None:
        """Step 7 for the adopted members: each source only if it is still the file
        that was archived."""
        gone: list[int] = []
        for e in entries:
            assert e.dev is not None and e.ino is not None
            ident = FileIdentity(e.dev, e.ino, e.bytes, e.mtime_ns, e.mode, e.ctime_ns)
            src = self.live / e.relpath
            try:
                outcome = await asyncio.to_thread(
                    functools.partial(
                        unlink_source,
                        src,
                        ident,
                        root=self.live,
                        durably="recovery.bundle_source_unlinked",
                    )
                )
            except OSError:
                continue  # stays pending: the next recovery tries it again, and says why
            if outcome not in ("changed", "open"):
                gone.append(e.id)
        await self.manifest.mark_sources_gone(gone)
