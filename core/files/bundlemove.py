"""Small files archived together: the per-file protocol at bundle scale.

``archive_bundle`` takes a group of one unit's small files (one month of their
mtimes) and runs, each step one trip to a worker thread:

  1–2. every source opened without following links and hashed while compressed
       into its member of ``<bundle>.tar.partial``; the index last; fsync
                                                          ->  bundle_written
  3.   the partial read back as a stranger would (tar headers, index) and every
       member inflated and re-hashed; any difference discards it, every source
       kept                                               ->  bundle_verified
  4.   every source ``lstat``ed again: a changed one is noted
  5.   renamed into place without replacing anything, directory fsynced
                                                          ->  bundle_placed
  6.   ONE manifest transaction: an ``archived`` entry (bundle, offset, length)
       per unchanged source; a changed source's member is an earlier version,
       recorded ``stale``, its source kept live          ->  bundle_committed
  7.   each unchanged source unlinked after its identity check, each source
       directory fsynced once                            ->  bundle_sources_unlinked

What a crash leaves, and who settles it:

  before 5       a ``.partial``                  sweep_partials deletes it
  after 5,       a placed bundle, no entries     recovery: each member adopted
  before 6                                       (source unchanged and equal),
                                                 kept stale (other bytes), or
                                                 dropped (the codec refuses it)
  after 6,       entries + sources               recovery unlinks each source
  before 7                                       after its identity check
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..base.cancel import CancelToken, in_thread
from ..base.fsutil import Closer, FileIdentity, SourceOutcome, unlink_if_present
from ..base.layout import PARTIAL_SUFFIX, unit_of
from ..base.space import out_of_space
from ..base.times import NS_PER_S
from ..store.entries import Entry, NewEntry
from ..store.manifest import Manifest
from .bundle import (
    BUNDLE_SUFFIX,
    PackedBundle,
    PackedMember,
    changed_sources,
    check_packed,
    pack,
    place,
    unlink_members,
)
from .bundleprocs import Workers
from .filemove import FileMover, unsettled_detail


@dataclass(frozen=True)
class BundleGroup:
    """Small files of one unit whose mtimes fall in one month, packed together."""

    unit: str
    month: str  # YYYY-MM
    files: list[tuple[str, FileIdentity]]  # (relpath, identity at the scan)

    @property
    def label(self) -> str:
        """How the console and the CLI name it while it is in flight."""
        return f"{self.unit}/{self.month} bundle ({len(self.files)} files)"

    @property
    def dense(self) -> bool:
        """Its members average under ``DENSE_MEMBER_BYTES``: see ``BundleMover``."""
        return sum(i.size for _, i in self.files) < DENSE_MEMBER_BYTES * len(self.files)


# A member this small costs more in Python and short system calls (its open,
# lease, stat, tar header, unlink) than in the codec, and every system call hands
# the GIL to another thread and back: two bundles of such members at once ran
# slower than one after the other (docs/performance.md, "Dense bundles").
DENSE_MEMBER_BYTES = 128 << 10


def month_of(mtime_ns: int) -> str:
    """The UTC month of an mtime, ``YYYY-MM``: bundles group by it, so data past its
    retention can go a whole bundle at a time."""
    return time.strftime("%Y-%m", time.gmtime(mtime_ns // NS_PER_S))


def bundle_groups(
    files: list[tuple[str, FileIdentity]], below: int, cap: int
) -> tuple[list[tuple[str, FileIdentity]], list[BundleGroup]]:
    """Split eligible files into those archived one gzip each (``below`` bytes or
    more, or alone in their unit and month) and bundles: each unit's smaller files
    by month of their mtime, in path order, each bundle at most ``cap`` bytes of
    sources (a gzip is never much larger than its source)."""
    single: list[tuple[str, FileIdentity]] = []
    by_key: dict[tuple[str, str], list[tuple[str, FileIdentity]]] = {}
    for rel, ident in files:
        if ident.size >= below:
            single.append((rel, ident))
        else:
            by_key.setdefault((unit_of(rel), month_of(ident.mtime_ns)), []).append((rel, ident))
    groups: list[BundleGroup] = []
    for (unit, month), members in sorted(by_key.items()):
        if len(members) == 1:
            single += members
            continue
        chunk: list[tuple[str, FileIdentity]] = []
        size = 0
        for rel, ident in sorted(members):
            # A tar header and padding per member: ~1.5 KiB.
            if chunk and size + ident.size + 1536 > cap:
                groups.append(BundleGroup(unit, month, chunk))
                chunk, size = [], 0
            chunk.append((rel, ident))
            size += ident.size + 1536
        groups.append(BundleGroup(unit, month, chunk))
    return single, groups


@dataclass(frozen=True)
class MemberDone:
    """What became of one file of a bundle: ``archived`` (its source ``unlinked``
    or not), ``changed`` (its member kept stale, the source live), ``skipped``
    (gone, or not a regular file), ``error`` (it could not be read: kept live),
    or ``verify_failed`` (the whole bundle)."""

    relpath: str
    result: str
    entry: Entry | None = None
    unlinked: SourceOutcome | None = None
    detail: str = ""
    errno: int | None = None  # "unsettled": the error's


@dataclass(frozen=True)
class BundleDone:
    bundle: Path | None  # where it was placed; None when nothing was
    members: list[MemberDone]


class _Walks(Protocol):
    """Where a bundle's member walks run (steps 1–3 and 7)."""

    async def pack(self, partial: Path, sources: list[tuple[str, Path]]) -> PackedBundle: ...
    async def check(self, partial: Path, packed: PackedBundle) -> str | None: ...
    async def unlink(
        self, targets: list[tuple[Path, FileIdentity]], root: Path
    ) -> tuple[list[SourceOutcome], dict[Path, OSError]]: ...


@dataclass(frozen=True)
class _InThreads:
    """In worker threads of this process, holding ``lane`` (the pass's walk lane
    for a dense bundle, else nothing)."""

    mover: FileMover
    lane: contextlib.AbstractAsyncContextManager[object]
    cancel: CancelToken

    async def pack(self, partial: Path, sources: list[tuple[str, Path]]) -> PackedBundle:
        m, cancel = self.mover, self.cancel
        async with self.lane:
            return await in_thread(
                cancel, pack, partial, sources, m.roots, m.codec, m.limiter, cancel
            )

    async def check(self, partial: Path, packed: PackedBundle) -> str | None:
        async with self.lane:
            return await in_thread(
                self.cancel, check_packed, partial, packed, self.mover.limiter, self.cancel
            )

    async def unlink(
        self, targets: list[tuple[Path, FileIdentity]], root: Path
    ) -> tuple[list[SourceOutcome], dict[Path, OSError]]:
        closer = Closer()
        try:
            async with self.lane:
                return await asyncio.to_thread(unlink_members, targets, root, closer)
        finally:
            # Outside the lane: the next dense bundle's walk starts meanwhile.
            await asyncio.shield(asyncio.to_thread(closer.finish))


@dataclass(frozen=True)
class _InWorkers:
    """In the pass's worker processes (bundleprocs.py); the token checked before
    each step."""

    workers: Workers
    mover: FileMover
    cancel: CancelToken

    async def pack(self, partial: Path, sources: list[tuple[str, Path]]) -> PackedBundle:
        self.cancel.check()
        return await self.workers.pack(partial, sources, self.mover.roots, self.mover.codec)

    async def check(self, partial: Path, packed: PackedBundle) -> str | None:
        self.cancel.check()
        return await self.workers.check(partial, packed)

    async def unlink(
        self, targets: list[tuple[Path, FileIdentity]], root: Path
    ) -> tuple[list[SourceOutcome], dict[Path, OSError]]:
        return await self.workers.unlink(targets, root)


class BundleMover:
    """Archives bundles into ``manifest`` with a ``FileMover``'s roots, codec,
    cap and step hook. ``lane``, shared by the bundles archived at once: a dense
    bundle packs, checks and unlinks its members holding it, so one such member
    walk runs at a time (the fsyncs and the commit between them overlap); with
    ``workers``, a dense bundle's walks run in those processes instead, one
    bundle a process at a time."""

    def __init__(
        self,
        manifest: Manifest,
        mover: FileMover,
        lane: asyncio.Lock | None = None,
        workers: Workers | None = None,
    ) -> None:
        self.manifest = manifest
        self.mover = mover
        self.layout = mover.layout
        self.live_root = mover.live_root
        self.lane = lane
        self.workers = workers

    def _walks(self, group: BundleGroup, cancel: CancelToken) -> _Walks:
        if not group.dense:
            return _InThreads(self.mover, contextlib.nullcontext(), cancel)
        if self.workers is not None:
            return _InWorkers(self.workers, self.mover, cancel)
        lane = self.lane or contextlib.nullcontext()
        return _InThreads(self.mover, lane, cancel)

    def folder(self, unit: str) -> Path:
        return self.layout.files if unit == "." else self.layout.files / unit

    async def archive(self, group: BundleGroup, *, cancel: CancelToken | None = None) -> BundleDone:
        cancel = cancel or CancelToken()
        mover = self.mover
        folder = self.folder(group.unit)
        partial = folder / f"{group.month}.{secrets.token_hex(6)}{BUNDLE_SUFFIX}{PARTIAL_SUFFIX}"
        info: dict[str, Path | str] = {"bundle": partial, "label": group.label}
        sources = [(rel, self.live_root / rel) for rel, _ in group.files]
        walks = self._walks(group, cancel)
        try:
            packed = await walks.pack(partial, sources)
            skipped = [MemberDone(rel, "skipped", detail=why) for rel, why in packed.skipped]
            skipped += [MemberDone(rel, "error", detail=why) for rel, why in packed.unreadable]
            if not packed.members:
                await self._discard(partial)
                return BundleDone(None, skipped)
            await mover.step("bundle_written", info)
            bad = await walks.check(partial, packed)
            if bad is not None:
                await self._discard(partial)
                failed = [
                    MemberDone(m.relpath, "verify_failed", detail=bad) for m in packed.members
                ]
                return BundleDone(None, failed + skipped)
            await mover.step("bundle_verified", info)
            taken = await mover.taken_names(self.layout.rel(self.folder(group.unit) / group.month))
            changed, placed = await in_thread(
                cancel, self._check_and_place, partial, group, packed, taken
            )
        except BaseException:
            await self._discard(partial)
            raise
        await mover.step("bundle_placed", {**info, "bundle": placed})
        done = await self._commit(placed, packed, changed, group.label, walks)
        return BundleDone(placed, done + skipped)

    def _check_and_place(
        self, partial: Path, group: BundleGroup, packed: PackedBundle, taken: frozenset[Path]
    ) -> tuple[set[str], Path]:
        changed = changed_sources(packed, self.live_root)
        folder = self.folder(group.unit)
        placed = place(partial, folder, group.month, packed.index_sha256, self.layout.root, taken)
        return changed, placed

    async def _discard(self, partial: Path) -> None:
        remove = functools.partial(unlink_if_present, partial, root=self.layout.root)
        with contextlib.suppress(OSError):  # the error being handled is the one to report
            await asyncio.shield(asyncio.to_thread(remove))

    async def _commit(
        self,
        placed: Path,
        packed: PackedBundle,
        changed: set[str],
        label: str,
        walks: _Walks,
    ) -> list[MemberDone]:
        """Steps 6 and 7."""
        mover, manifest = self.mover, self.manifest
        gz_path = self.layout.rel(placed)
        new = [self._new_entry(gz_path, m, m.relpath in changed) for m in packed.members]
        try:
            entries = await manifest.add_entries(new)
        except sqlite3.Error as err:
            if out_of_space(err):
                # Rolled back: the bundle is recorded nowhere, its sources are
                # live; it goes, and the room it took with it.
                await asyncio.to_thread(
                    functools.partial(unlink_if_present, placed, root=self.layout.root)
                )
            raise
        await mover.step("bundle_committed", {"bundle": placed, "label": label})
        archived = [
            (e, m) for e, m in zip(entries, packed.members, strict=True) if e.status == "archived"
        ]
        targets = [(self.live_root / m.relpath, m.identity) for _, m in archived]
        outcomes, errors = await walks.unlink(targets, self.live_root)
        manifest.sources_gone_later(
            e.id
            for (e, _), o in zip(archived, outcomes, strict=True)
            if o not in ("changed", "unsettled", "open")
        )
        await mover.step("bundle_sources_unlinked", {"bundle": placed, "label": label})
        by_rel = {m.relpath: o for (_, m), o in zip(archived, outcomes, strict=True)}
        done: list[MemberDone] = []
        for e in entries:
            if e.status == "stale":
                detail = (
                    f"{e.relpath} changed while it was archived; kept live (its member is stale)"
                )
                done.append(MemberDone(e.relpath, "changed", e, detail=detail))
            else:
                unlinked = by_rel[e.relpath]
                error = errors.get(self.live_root / e.relpath)
                detail = unsettled_detail(error) if unlinked == "unsettled" else ""
                code = error.errno if error else None
                done.append(MemberDone(e.relpath, "archived", e, unlinked, detail, code))
        return done

    def _new_entry(self, gz_path: str, m: PackedMember, changed: bool) -> NewEntry:
        ident = m.identity
        return NewEntry(
            unit=unit_of(m.relpath),
            relpath=m.relpath,
            bytes=m.packed.bytes,
            sha256=m.packed.sha256,
            gz_path=gz_path,
            gz_bytes=m.span.length,
            mtime_ns=ident.mtime_ns,
            dev=None if changed else ident.dev,
            ino=None if changed else ident.ino,
            mode=ident.mode,
            archived_at=self.mover.clock(),
            status="stale" if changed else "archived",
            source_present=not changed,
            member_offset=m.span.offset,
            member_length=m.span.length,
            ctime_ns=None if changed else ident.ctime_ns,
            seek_points=m.packed.seek_points,
        )
