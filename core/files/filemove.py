"""One live file end to end, and back: the protocol of gzfile.py plus the manifest.

Archiving (``FileMover.archive``): steps 1–5 (``gzfile.archive_file``), then

  6. insert the manifest entry and commit it (durable)           ->  entry_committed
  7. check the source still has the identity that was archived (ctime too), rename
     it aside in its directory (``layout.aside_of``)              ->  source_set_aside
     check the aside name holds that inode, unlink it, fsync the directory; a
     file that is not it goes back to its name                    ->  source_unlinked

A crash between 6 and 7 leaves the source (or its aside name) beside a committed
entry: recovery unlinks it after the same identity check, or puts it back. A
source changed after step 4 is kept (``unlinked == "changed"``); the entry still
holds the version archived. An I/O error in step 7 (the unlink, or the fsync of
the source's directory after it) leaves the same state as that crash: the file
is archived, its entry still says the source may be present, and the next
recovery settles it (``unlinked == "unsettled"``, with the error in ``detail``).

Legacy copies: a plain file at ``files/<relpath>`` left by an older copy-based
scheme is compared with the source's first N bytes, hashed in the same read as
the gzip; after step 7 a proven prefix copy is removed, anything else is kept
and reported. A path the manifest references (a gzip, a bundle), or any name
shaped like one (``.gz``, a bundle's), is never a legacy copy: a copy of an
archive file inside the live tree (``cp -p`` of a bundle) is archived as any
file is, and the archive's own file is never touched.

Restoring (``FileMover.restore``): the restore intent is committed first, with
(in place) the entry's status and restore grace in the same transaction
(``intent_recorded``: passes leave the restored file alone until it runs out),
then ``gzfile.restore_file`` (``restore_partial_written``, ``restored``), then the
intent is cleared (``intent_cleared``; a restore that placed nothing gives the
entry its status and grace back in that transaction). Intents of files restored
at once share their commits (``Manifest.change_intents``): a restore of many files
records them a chunk ahead (``record_intent``), and fsyncs the directory of the
files it placed once for all of them (``sync_dir=False``) before clearing their
intents (files/restore.py). A crash anywhere leaves at
most ``<target>.restore-partial``, named by the intent, which recovery removes;
a file placed before the crash is already in its grace.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Literal

from ..base.cancel import Cancelled, CancelToken, in_thread
from ..base.codec import Codec, Progress, digest_path
from ..base.durable import Site
from ..base.fsutil import (
    FileIdentity,
    SourceOutcome,
    SourceUnlink,
    UnlinkResult,
    identity_or_none,
    unlink_if_identity,
    unlink_if_present,
    unlink_source,
)
from ..base.layout import GZ_SUFFIX, Layout, resolve_inside, restore_partial_of, unit_of
from ..base.ratelimit import UNLIMITED, RateLimiter
from ..base.space import out_of_space
from ..base.steps import StepHook, no_step, thread_step
from ..base.times import now_ms
from ..store.entries import Entry, NewEntry
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects
from ..store.restoreintents import EntryGrace, IntentChange, RestoreIntent
from .bundle import is_bundle_name
from .gzfile import (
    ArchiveOk,
    Changed,
    PartialTaken,
    Restored,
    RestoreExpect,
    RestoreResult,
    Roots,
    VerifyFailed,
    archive_file,
    restore_file,
)
from .reader import GzipAt

LegacyOutcome = Literal["none", "removed", "kept"]


# A removal the filesystem refuses (an immutable or append-only file, a read-only
# mount) is settled by the operator, not by the next recovery.
_REFUSED = {errno.EPERM, errno.EACCES, errno.EROFS}


def unsettled_detail(err: OSError | None) -> str:
    """What a source archived but not removed is told as: refused, or to be
    settled by the next recovery (an I/O error; ``None``: its directory's fsync)."""
    if err is not None and err.errno in _REFUSED:
        return f"archived; its removal was refused ({err}): it stays live until that is lifted"
    why = err or "its directory"
    return f"archived; removing its source failed ({why}): the next pass's recovery settles it"


@dataclass(frozen=True)
class Archived:
    kind: ClassVar[Literal["archived"]] = "archived"
    entry: Entry
    unlinked: SourceOutcome
    legacy: LegacyOutcome = "none"
    detail: str = ""
    errno: int | None = None  # "unsettled": the error's


FileOutcome = Archived | VerifyFailed | Changed


@dataclass(frozen=True)
class Placed:
    """A restore through R3 (``FileMover.restore_placing``): what it came to, and
    its intent's clearing, still to be committed (R4)."""

    entry_id: int
    target: Path
    result: RestoreResult
    clearing: IntentChange


def _held(grace_until: int | None) -> EntryGrace | None:
    """What a restore in place (a grace) makes of its entry until it runs out."""
    return None if grace_until is None else ("restored", grace_until)


@dataclass
class FileMover:
    live_root: Path
    layout: Layout
    manifest: Manifest
    codec: Codec
    limiter: RateLimiter = UNLIMITED
    step: StepHook = no_step
    clock: Callable[[], int] = now_ms  # ms since the epoch, for archived_at
    _any_dropped: bool | None = field(default=None, init=False, repr=False)

    async def archive(
        self,
        relpath: str,
        *,
        cancel: CancelToken | None = None,
        progress: Progress | None = None,
        no_legacy_copy: bool = False,
    ) -> FileOutcome:
        """Archive the live file at ``relpath`` (steps 1–7).

        A plain copy at ``files/<relpath>`` (an older, copy-based scheme's) is
        settled in the same read: the source's first N bytes (N = the copy's
        length) are hashed alongside; once the new gzip and its entry are in
        place, a copy that is a proven prefix of the source is removed, anything
        else is kept and reported. ``no_legacy_copy``: the caller found nothing
        at that path under the lock, so the manifest is not asked about it (a
        lookup that waited behind other files' commits)."""
        # Its parents are lstat'ed (no link on the way): off the event loop.
        src = await asyncio.to_thread(resolve_inside, self.live_root, relpath)
        dest = self.layout.gz_for(relpath)
        legacy = None if no_legacy_copy else await self.legacy_candidate(relpath)
        result = await archive_file(
            src,
            dest,
            roots=replace(self.roots, taken=await self.taken_names(self.layout.rel(dest))),
            codec=self.codec,
            limiter=self.limiter,
            cancel=cancel,
            step=self.step,
            prefix_of=legacy,
            progress=progress,
        )
        if not isinstance(result, ArchiveOk):
            return result
        done = await self.commit(relpath, result)
        if result.prefix is None or legacy is None:
            return done
        outcome, detail = await self._settle_legacy(legacy, result.prefix, result, cancel)
        both = "; ".join(d for d in (done.detail, detail) if d)
        return Archived(done.entry, done.unlinked, outcome, both, done.errno)

    async def legacy_candidate(self, relpath: str) -> Path | None:
        """``files/<relpath>`` when it may be an older scheme's plain copy of the
        source: never a name shaped like coldkeep's own archive files, nor one
        the manifest references (whatever its name)."""
        path = self.layout.files / relpath
        if path.name.endswith(GZ_SUFFIX) or is_bundle_name(path.name):
            return None
        if await self.manifest.gz_statuses_of([self.layout.rel(path)]):
            return None
        return path

    async def _settle_legacy(
        self, legacy: Path, ident: FileIdentity, ok: ArchiveOk, cancel: CancelToken | None
    ) -> tuple[LegacyOutcome, str]:
        token = cancel or CancelToken()
        if ident.size == 0:
            proven = True
        else:
            root = self.layout.root
            digest = await in_thread(
                token, digest_path, legacy, root=root, cancel=token, limiter=self.limiter
            )
            proven = digest.bytes == ident.size and digest.sha256 == ok.prefix_sha256
        if (
            proven
            and await self._unlink_if_identity(legacy, ident, self.layout.root, "legacy.unlinked")
            == "removed"
        ):
            return "removed", f"{legacy} was a plain copy of the first {ident.size} bytes"
        return "kept", (
            f"{legacy} is a plain file at this file's archive path that is not a copy of "
            "its first bytes; kept (compare it with the archived gzip and remove it)"
        )

    async def commit(self, relpath: str, ok: ArchiveOk) -> Archived:
        """Steps 6 and 7 for a placed, verified gzip (archived now, or an orphan
        adopted by recovery)."""
        src = self.live_root / relpath
        try:
            entry = await self.manifest.add_entry(self._new_entry(relpath, ok))
        except sqlite3.Error as err:
            if out_of_space(err):
                # SQLITE_FULL rolled the entry back: the placed gzip is recorded
                # nowhere and its source is live and unchanged. It goes, and the
                # room it took with it (left, recovery would adopt it later).
                await asyncio.to_thread(
                    functools.partial(unlink_if_present, ok.dest, root=self.layout.root)
                )
            raise
        await self.step("entry_committed", {"src": src, "dest": ok.dest, "entry": entry.id})
        try:
            unlinked = await self.unlink_source(src, ok.identity, entry.id)
        except OSError as err:
            # The entry is durable; whether the source is gone, durably, is not
            # known. Its source_present stays set, as after a crash here: the next
            # recovery unlinks it after the same identity check, or finds it gone.
            return Archived(entry, "unsettled", detail=unsettled_detail(err), errno=err.errno)
        if unlinked not in ("changed", "open"):
            # Removed or gone, or another file took its name (its own problem).
            # Changed or open elsewhere: recovery looks again at the next pass
            # (open, the file stays out of that pass's scan until it is closed).
            self.manifest.sources_gone_later([entry.id])
        await self.step("source_unlinked", {"src": src, "entry": entry.id, "result": unlinked})
        return Archived(entry, unlinked)

    @property
    def roots(self) -> Roots:
        return Roots(self.live_root, self.layout.root)

    async def taken_names(self, prefix: str) -> frozenset[Path]:
        """Archive names starting with ``prefix`` that the manifest holds for
        files no longer here: dropped locally (their copy is remote) or expired
        (a tombstone names them). Not free for a new file, so a row never
        describes two. Indexed reads, and only once anything ever went."""
        if self._any_dropped is None:
            self._any_dropped = await RemoteObjects(self.manifest).any_gone()
            self._any_dropped |= await self.manifest.any_expired()
        if not self._any_dropped:
            return frozenset()
        gone = await RemoteObjects(self.manifest).gone_under(prefix)
        gone += await self.manifest.expired_under(prefix)
        return frozenset(self.layout.root / p for p in gone)

    async def unlink_source(
        self, src: Path, ident: FileIdentity, entry_id: int | None = None
    ) -> SourceUnlink:
        """Step 7 on a worker thread: ``unlink_source``, its setting aside
        announced (``source_set_aside``)."""
        announce = thread_step(self.step, asyncio.get_running_loop())

        def aside(path: Path) -> None:
            announce("source_set_aside", {"src": src, "aside": path, "entry": entry_id})

        return await asyncio.to_thread(
            functools.partial(
                unlink_source,
                src,
                ident,
                root=self.live_root,
                durably="source.unlinked",
                aside=aside,
            )
        )

    async def _unlink_if_identity(
        self, path: Path, ident: FileIdentity, root: Path, site: Site
    ) -> UnlinkResult:
        return await asyncio.to_thread(
            functools.partial(unlink_if_identity, path, ident, root=root, durably=site)
        )

    def _new_entry(self, relpath: str, ok: ArchiveOk) -> NewEntry:
        return NewEntry(
            unit=unit_of(relpath),
            relpath=relpath,
            bytes=ok.bytes,
            sha256=ok.sha256,
            gz_path=self.layout.rel(ok.dest),
            gz_bytes=ok.gz_bytes,
            mtime_ns=ok.identity.mtime_ns,
            dev=ok.identity.dev,
            ino=ok.identity.ino,
            mode=ok.identity.mode,
            archived_at=self.clock(),
            ctime_ns=ok.identity.ctime_ns,
            seek_points=ok.seek_points,
        )

    async def restore(
        self,
        entry: Entry,
        target: Path,
        *,
        root: Path,
        grace_until: int | None = None,
        cancel: CancelToken | None = None,
        progress: Progress | None = None,
        at: GzipAt | None = None,
        earlier: Sequence[RestoreIntent] | None = None,
    ) -> RestoreResult:
        """Restore ``entry`` to ``target`` (already checked to be inside ``root``,
        every name on the way reached beneath it), from its gzip in the archive
        or from ``at`` (``reader.entry_gzip``: in place, or a copy read from the
        remote tier).
        With ``grace_until``, the entry becomes ``restored`` and the next passes
        leave the file alone until then. ``earlier``: the restore intents as they
        were before this restore began (read now when not given)."""
        placed = await self.restore_placing(
            entry,
            target,
            root=root,
            grace_until=grace_until,
            cancel=cancel,
            progress=progress,
            at=at,
            earlier=earlier,
        )
        await self.restore_finished(placed)
        return placed.result

    async def restore_placing(
        self,
        entry: Entry,
        target: Path,
        *,
        root: Path,
        grace_until: int | None = None,
        cancel: CancelToken | None = None,
        progress: Progress | None = None,
        at: GzipAt | None = None,
        earlier: Sequence[RestoreIntent] | None = None,
        intent: int | None = None,
        sync_dir: bool = True,
    ) -> Placed:
        """``restore`` up to R3: the intent's clearing (R4) is left to
        ``restore_finished``. ``intent``: R1 done already (``record_intent``,
        with the same ``grace_until``). ``sync_dir=False``: a file placed
        (``Restored``) is not durable yet: its directory's fsync, and
        ``restored``, are the caller's (``gzfile.restore_file``), before R4."""
        if intent is None:
            intent = await self.record_intent(
                entry, target, root=root, grace_until=grace_until, earlier=earlier
            )
        intent_id = intent
        held = _held(grace_until)
        was: EntryGrace = (entry.status, entry.grace_until)
        try:
            result = await restore_file(
                at.path if at else self.layout.abs(entry.gz_path),
                target,
                self._expect(entry),
                root=root,
                span=at.span if at else entry.span,
                limiter=self.limiter,
                cancel=cancel,
                step=self.step,
                progress=progress,
                sync_dir=sync_dir,
                named=at.name if at else None,
            )
        except PartialTaken:
            # Another file holds the partial's name: nothing was written, and the
            # intent must not name that file for recovery to remove.
            await self.manifest.clear_restore_intent(
                intent_id, entry_id=entry.id, grace=was if held else None
            )
            raise
        except (OSError, Cancelled):
            await self._failed_restore(entry, target, root, intent_id, grace_until)
            raise
        # Nothing placed (a mismatch, or the target exists): the entry's status
        # and grace as they were, with the intent's clearing. (A crash or an I/O
        # error leaves the grace: at worst a pass leaves a path alone until it
        # runs out.)
        back = (entry.id, *was) if held and not isinstance(result, Restored) else None
        return Placed(entry.id, target, result, IntentChange(clear=intent_id, grace=back))

    async def restore_finished(self, placed: Placed) -> None:
        """R4: the intent cleared (durable), then announced."""
        await self.manifest.change_intents(placed.clearing)
        await self.step("intent_cleared", {"target": placed.target, "entry": placed.entry_id})

    async def record_intent(
        self,
        entry: Entry,
        target: Path,
        *,
        root: Path,
        grace_until: int | None = None,
        earlier: Sequence[RestoreIntent] | None = None,
    ) -> int:
        """R1: the restore intent committed (with the grace, in place) and
        announced; its id. Intents recorded at once (gathered) share one commit
        (``Manifest.change_intents``): a restore of many files records them a
        chunk at a time, ahead of its workers."""
        await self._clear_earlier_intents(target, root, earlier)
        # The grace is recorded before the file is placed, as restored event rows
        # are, in the intent's transaction: set after the rename, a crash in
        # between left the restored file without one, and the next pass archived
        # it again (a second gzip of the same bytes, the entry still "archived"
        # beside a live file).
        held = _held(grace_until)
        grace = None if held is None else (entry.id, *held)
        row_id = await self.manifest.change_intents(
            IntentChange(add=(entry.id, str(target), now_ms()), grace=grace)
        )
        assert row_id is not None
        await self.step("intent_recorded", {"target": target, "entry": entry.id})
        return row_id

    @staticmethod
    def _expect(entry: Entry) -> RestoreExpect:
        return RestoreExpect(entry.bytes, entry.sha256, entry.mtime_ns, entry.mode)

    async def _clear_earlier_intents(
        self, target: Path, root: Path, intents: Sequence[RestoreIntent] | None
    ) -> None:
        """A restore to ``target`` that died left its partial, named by its intent:
        that partial is ours, removed (durably) before this restore creates its own
        under the same name. Any other file there is refused by ``restore_file``."""
        if intents is None:
            intents = await self.manifest.restore_intents()
        for earlier in intents:
            if earlier.target != target:
                continue
            partial = restore_partial_of(target)
            await asyncio.to_thread(
                functools.partial(
                    unlink_if_present,
                    partial,
                    root=root,
                    durably="recovery.restore_partial_removed",
                )
            )
            await self.manifest.clear_restore_intent(earlier.id)

    async def _failed_restore(
        self, entry: Entry, target: Path, root: Path, intent_id: int, grace_until: int | None
    ) -> None:
        """An I/O error (reading the gzip, writing or fsyncing the partial) or a
        cancellation stopped the restore. ``restore_file`` removed the partial
        before raising, so the intent names nothing left: it goes, and the
        entry's status and grace are given back if nothing was placed. A partial
        still there means its removal failed too: the intent stays, and recovery
        removes it by that name."""

        def there(path: Path) -> bool:
            try:
                return identity_or_none(path, root=root) is not None
            except OSError:  # cannot tell (a refused or failing directory): keep it
                return True

        if await asyncio.to_thread(there, restore_partial_of(target)):
            return
        back: EntryGrace | None = None
        if grace_until is not None and not await asyncio.to_thread(there, target):
            back = (entry.status, entry.grace_until)
        await self.manifest.clear_restore_intent(intent_id, entry_id=entry.id, grace=back)

    def live_path(self, entry: Entry) -> Path:
        """Where ``entry`` lives when restored in place (containment checked)."""
        return resolve_inside(self.live_root, entry.relpath)
