"""What a crash leaves behind, found and settled. Runs under the archive lock, at
the start of every pass, so that no pass works beside a dead process's leftovers.

    leftover                          found by                  outcome
    ---------------------------------------------------------------------------------
    files/**/*.partial                walking files/            deleted
    <target>.restore-partial          the restore intents       deleted by name (live
                                                                dirs are never walked)
    a .gz with no entry (an orphan)   walking files/            re-verified against its
                                                                source (adopt_orphan):
      decompresses to the source's bytes, source unchanged  ->  adopted: entry written,
                                                                source unlinked (step 7)
      decompresses cleanly to other bytes (or no source)    ->  stale: kept, own entry
      the codec refuses it                                  ->  corrupt: removed
      the source changed while it was checked               ->  left as found
      it (or its source) cannot be read (EACCES, EIO), or   ->  left, reported as error
      fsynced before its entry is written
    a .tar no entry names (an         the same walk             each member settled as
    orphan bundle)                                              an orphan gzip is, then
                                                                one transaction (see
                                                                orphanbundle.py)
    an entry whose gzip is gone       the same walk             status 'missing', loudly
    a committed entry's live source   source_present = 1        unlinked after its
    (a crash between steps 6 and 7)                             identity check (only
                                                                the device number
                                                                changed: after its
                                                                bytes are re-read
                                                                and are the entry's)
    a pass still 'running'            the pass log              'interrupted', with the
                                                                files the manifest shows
                                                                it archived

Only coldkeep writes under ``files/``, and only under the lock; so, holding it, any
partial or orphan found there is a dead process's (a scan without the lock,
``scan_unlocked``, sets a live holder's partials aside as its work in progress).
A ``.restore-partial`` sits in a live directory, where a name alone proves
nothing: only one a committed intent names is removed.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import os
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..base.cancel import CancelToken, in_thread
from ..base.codec import CorruptGzip, Digest, read_gzip_header
from ..base.fsutil import (
    FileIdentity,
    identity_or_none,
    settle_aside,
    unlink_if_present,
    unlink_source,
)
from ..base.ioerror import naming
from ..base.layout import (
    GZ_SUFFIX,
    PARTIAL_SUFFIX,
    PATH_MAX,
    Layout,
    UnsafePath,
    aside_of,
    resolve_inside,
    restore_partial_of,
    unit_of,
)
from ..base.lock import read_holder
from ..base.times import is_mtime
from ..store import passlog
from ..store.entries import Entry, NewEntry
from ..store.manifest import Manifest
from ..store.problems import NewProblem, unlink_kind
from .bundle import is_bundle_name, read_bundle
from .filemove import FileMover
from .gzfile import (
    ArchiveOk,
    Changed,
    Corrupt,
    Stale,
    Verified,
    adopt_orphan,
    stale_of,
    verify_gzip,
)
from .orphanbundle import (
    Orphan,
    OrphanBundle,
    digest_if_identity,
    make_durable,
    trusted_mode,
)


@dataclass
class RecoveryReport:
    partials: list[Path] = field(default_factory=list)
    restore_partials: list[Path] = field(default_factory=list)
    intents: int = 0
    orphans: list[Orphan] = field(default_factory=list)
    missing: list[Entry] = field(default_factory=list)
    sources_unlinked: list[str] = field(default_factory=list)
    interrupted: list[int] = field(default_factory=list)  # pass ids
    # A scan while a live process holds the lock: its partials are its work in
    # progress, not leftovers (see ``set_aside_in_flight``).
    busy: str | None = None  # who holds the lock
    in_flight: int = 0  # partials set aside as that holder's work
    # A scan still walking files/ (a progress report): what it found so far.
    walking: bool = False
    walked: int = 0  # gzips and bundles seen so far
    # Items that could not be settled, each a file's problem (the quarantine):
    # recovery never stops for one of them.
    problems: list[NewProblem] = field(default_factory=list)
    # Committed sources still pending: their files stay out of this pass's scan
    # (archived already; archiving them again would only add a copy).
    pending_sources: set[str] = field(default_factory=set)
    # Relpaths whose earlier problem recovery settled.
    settled: list[str] = field(default_factory=list)

    def copy(self) -> RecoveryReport:
        """A copy whose lists the scan no longer adds to."""
        return replace(
            self,
            partials=list(self.partials),
            restore_partials=list(self.restore_partials),
            orphans=list(self.orphans),
            missing=list(self.missing),
            problems=list(self.problems),
            sources_unlinked=list(self.sources_unlinked),
            interrupted=list(self.interrupted),
        )

    def set_aside_in_flight(self, holder: str) -> None:
        """This scan ran while ``holder`` held the lock: the partials and restore
        partials are what its operation is writing right now, and a pass still
        ``running`` may be its own; none of them is a finding."""
        self.busy = holder
        self.in_flight = len(self.partials) + len(self.restore_partials)
        self.partials, self.restore_partials, self.interrupted = [], [], []

    @property
    def errors(self) -> list[Orphan]:
        """Orphans left as found for a human: unreadable, or refused."""
        return [o for o in self.orphans if o.outcome in ("error", "refused")]

    @property
    def anything(self) -> bool:
        return bool(
            self.partials
            or self.restore_partials
            or self.intents
            or self.orphans
            or self.missing
            or self.sources_unlinked
            or self.interrupted
        )

    def to_dict(self) -> dict[str, int]:
        """What recovery settled, counted (docs/json.md: recover)."""
        outcomes = Counter(o.outcome for o in self.orphans)
        return {
            "partials_removed": len(self.partials),
            "restore_partials_removed": len(self.restore_partials),
            "intents_cleared": self.intents,
            "orphans_found": outcomes["found"],
            "orphans_adopted": outcomes["adopted"],
            "orphans_stale": outcomes["stale"],
            "orphans_corrupt": outcomes["corrupt"],
            "orphans_changed": outcomes["changed"],
            "orphans_unreadable": outcomes["error"],
            "orphans_refused": outcomes["refused"],
            "orphans_dropped": outcomes["dropped"],  # bundle members the codec refuses
            "missing": len(self.missing),
            "sources_unlinked": len(self.sources_unlinked),
            "passes_interrupted": len(self.interrupted),
            "problems": len(self.problems),
        }


ScanProgress = Callable[[RecoveryReport], object]


@dataclass(frozen=True)
class AdoptReport:
    """What ``adopt`` settled, of the orphans it was asked for."""

    orphans: list[Orphan]
    asked: int

    @property
    def failed(self) -> bool:
        """An orphan could not be read, or one asked for was not an orphan."""
        return any(o.outcome == "error" for o in self.orphans) or len(self.orphans) < self.asked

    def to_dict(self) -> list[dict[str, Any]]:
        return [{"gz": str(o.gz), "relpath": o.relpath, "outcome": o.outcome} for o in self.orphans]


@dataclass(frozen=True)
class SweepReport:
    """The leftover partials ``sweep`` removed."""

    removed: list[Path]

    def to_dict(self) -> list[str]:
        return [str(p) for p in self.removed]


def _intent_root(live_root: Path, target: Path) -> Path:
    """The root a restore intent's target is reached beneath: the live tree for a
    restore in place; for one under ``--to``, the operator's directory (the
    target's own, the deepest the intent can vouch for)."""
    return live_root if target.is_relative_to(live_root) else target.parent


async def clear_restore_intents(
    manifest: Manifest, live_root: Path, problems: list[NewProblem] | None = None
) -> tuple[list[Path], int]:
    """Remove the ``.restore-partial`` of every unfinished restore intent, then the
    intents. Returns the partials removed and the number of intents cleared. A
    partial that cannot be removed keeps its intent (the next recovery tries
    again) and is added to ``problems``; without that list it raises."""
    removed: list[Path] = []
    cleared = 0
    for intent in await manifest.restore_intents():
        partial = restore_partial_of(intent.target)
        # Durably, before the intent goes: a partial whose name came back after a
        # power cut would be named by no intent, and live directories are never
        # walked (the power-loss matrix left one in the live tree for good).
        root = _intent_root(live_root, intent.target)
        try:
            if await asyncio.to_thread(_remove_durably, partial, root):
                removed.append(partial)
        except OSError as err:
            if problems is None:
                raise
            rel = str(partial.relative_to(root)) if partial.is_relative_to(root) else str(partial)
            what = f"the restore leftover {partial} could not be removed ({err})"
            problems.append(NewProblem(rel, "recovery", what))
            continue
        await manifest.clear_restore_intent(intent.id)
        cleared += 1
    return removed, cleared


def _remove_durably(path: Path, root: Path) -> bool:
    try:
        return unlink_if_present(path, root=root, durably="recovery.restore_partial_removed")
    except FileNotFoundError:  # its directory is gone: so is the partial
        return False


@dataclass
class ArchiveFiles:
    """What lies under ``files/``: placed gzips and bundles (keyed by their path as
    the manifest stores it, to their absolute path) and leftover partials."""

    gzips: dict[str, str] = field(default_factory=dict)
    partials: list[Path] = field(default_factory=list)
    # Folders whose path is over PATH_MAX (an older coldkeep's, from a live path
    # deeper than its archive could hold): not listed, never a reason to stop.
    too_deep: list[str] = field(default_factory=list)


# Names per piece of a walk shown as it goes (the console's findings): a few
# tenths of a second of walking each.
WALK_PIECE = 20_000


def walk_archive(layout: Layout, piece: int | None) -> Iterator[ArchiveFiles]:
    """One walk of ``files/``, yielded in pieces of about ``piece`` names (the
    whole in one when None): regular files only, links never followed into. One
    ``scandir`` per directory and no ``stat`` per file, so a million gzips walk in
    seconds."""
    found = ArchiveFiles()
    stack = [(layout.files, layout.rel(layout.files))]
    while stack:
        folder, rel = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        except OSError as err:
            if err.errno != errno.ENAMETOOLONG:
                raise
            found.too_deep.append(rel)
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), f"{rel}/{entry.name}"))
            elif not entry.is_file(follow_symlinks=False):
                continue
            elif entry.name.endswith(GZ_SUFFIX) or is_bundle_name(entry.name):
                # Strings: a Path each cost more than the walk itself (1.7 s
                # against 0.4 s for 100,000 gzips).
                found.gzips[f"{rel}/{entry.name}"] = entry.path
            elif entry.name.endswith(PARTIAL_SUFFIX):
                found.partials.append(Path(entry.path))
        if piece is not None and len(found.gzips) + len(found.partials) >= piece:
            yield found
            found = ArchiveFiles()
    yield found


def too_deep(layout: Layout, found: ArchiveFiles) -> list[Orphan]:
    """Each folder the walk could not list (over PATH_MAX), said as an error to
    look at: never a reason to stop, never passed over in silence."""
    return [
        Orphan(
            layout.root / rel,
            rel,
            "error",
            f"a folder deeper than PATH_MAX ({PATH_MAX} bytes) under files/: not read; "
            "move it to a shorter path by hand (its gzips are then found)",
        )
        for rel in found.too_deep
    ]


def archive_files(layout: Layout) -> ArchiveFiles:
    """Everything under ``files/``, in one walk."""
    return next(walk_archive(layout, None))


def _orphan_relpath(mover: FileMover, gz: Path) -> str:
    """The live relpath an orphan belongs to: its directory under ``files/`` and
    the name in its gzip header (a header that cannot be read raises)."""
    try:
        with naming(gz):
            name = read_gzip_header(gz).name
    except CorruptGzip:
        name = None
    return mover.layout.relpath_of_gz(gz, name)


def _orphans_found(mover: FileMover, gz: Path) -> list[Orphan]:
    """For a listing: an orphan gzip's relpath (its name's guess when the header
    cannot be read), or each member of an orphan bundle."""
    if is_bundle_name(gz.name):
        try:
            return [Orphan(gz, m.relpath, "found") for m in read_bundle(gz).members]
        except OSError:
            return [Orphan(gz, mover.layout.rel(gz), "found")]
    try:
        return [Orphan(gz, _orphan_relpath(mover, gz), "found")]
    except (OSError, UnsafePath):
        return [Orphan(gz, mover.layout.relpath_of_gz(gz), "found")]


def _recorded_identity(entry: Entry) -> FileIdentity | None:
    if entry.dev is None or entry.ino is None:
        return None
    return FileIdentity(
        entry.dev, entry.ino, entry.bytes, entry.mtime_ns, entry.mode, entry.ctime_ns
    )


def source_problem(relpath: str, err: OSError) -> NewProblem:
    """An archived file whose source could not be removed: refused by the
    filesystem (an immutable or append-only file, a read-only mount), or failing."""
    reason = f"archived; removing its source failed ({err})"
    return NewProblem(relpath, unlink_kind(err.errno), reason)


class Recovery:
    """One recovery run over an archive (the lock is the caller's)."""

    def __init__(
        self,
        manifest: Manifest,
        mover: FileMover,
        cancel: CancelToken | None = None,
        *,
        current_pass: int | None = None,
    ) -> None:
        self.manifest = manifest
        self.mover = mover  # on ``manifest``: what adopts an orphan
        self.cancel = cancel or CancelToken()
        self.current_pass = current_pass  # the pass this recovery runs in: not a leftover

    async def scan_unlocked(self, progress: ScanProgress | None = None) -> RecoveryReport:
        """``scan`` without holding the lock (``coldkeep plan``, the console): a
        live holder's partials are its work in progress, not leftovers. The
        holder is read before and after the walk: one that took the lock during
        it, or finished during it, may have partials in it."""
        lock = self.mover.layout.lock
        before = await asyncio.to_thread(read_holder, lock)
        holding = before.describe() if before is not None and before.alive else None

        def partly(report: RecoveryReport) -> None:
            assert progress is not None
            if holding is not None:
                report.set_aside_in_flight(holding)
            progress(report)

        report = await self.scan(partly if progress else None)
        after = await asyncio.to_thread(read_holder, lock)
        busy = [h for h in (after, before) if h is not None and h.alive]
        if busy:
            report.set_aside_in_flight(busy[0].describe())
        return report

    async def scan(self, progress: ScanProgress | None = None) -> RecoveryReport:
        """What ``run`` would do, changing nothing: partials and intents listed,
        orphans found (not yet re-verified), entries without a gzip, committed
        sources still present with their recorded identity.

        ``progress`` is given a copy of the report as it grows: first what needs
        no walk (intents, sources, interrupted passes), then after each piece of
        the walk its partials and orphans (``walking`` set, ``walked`` counting
        the names seen); the entries without a gzip come only with the whole
        walk, in the report returned."""
        report = RecoveryReport(walking=True)
        intents = await self.manifest.restore_intents()
        report.intents = len(intents)
        for intent in intents:
            partial = restore_partial_of(intent.target)
            if await asyncio.to_thread(os.path.lexists, partial):
                report.restore_partials.append(partial)
        for entry in await self.manifest.entries_pending_unlink():
            if await self._still_archived(entry) is not None:
                report.sources_unlinked.append(entry.relpath)
        running = await passlog.recent(self.manifest, -1, "running")
        report.interrupted = [p.id for p in running if p.id != self.current_pass]
        if progress is not None:
            progress(report.copy())
        # The first piece is looked up in the manifest by its own names, so that
        # what it holds shows at once; then the paths of the gzips that should be
        # here are read in one go (a million in about a second), faster than
        # asking per piece, and each one found is struck off: what is left at the
        # end is missing. One set of names is held, shrinking as the walk goes.
        first: set[str] | None = None
        local: set[str] | None = None
        walker = walk_archive(self.mover.layout, WALK_PIECE)
        while (piece := await asyncio.to_thread(next, walker, None)) is not None:
            if first is None:
                known = {path for path, _ in await self.manifest.gz_statuses_of(piece.gzips)}
                first = set(piece.gzips)
            else:
                if local is None:
                    local = await self.manifest.local_gz_paths() - first
                known = await self._known(piece.gzips.keys(), local)
                local.difference_update(piece.gzips)
            report.partials += piece.partials
            report.orphans += too_deep(self.mover.layout, piece)
            report.walked += len(piece.gzips)
            for rel in sorted(piece.gzips.keys() - known):
                gz = Path(piece.gzips[rel])
                report.orphans += await asyncio.to_thread(_orphans_found, self.mover, gz)
            if progress is not None:
                progress(report.copy())
        report.partials.sort()
        report.orphans.sort(key=lambda o: str(o.gz))  # stable: a bundle's members stay in order
        if local is None:
            local = await self.manifest.local_gz_paths() - (first or set())
        report.missing = await self.manifest.entries_by_gz(sorted(local))
        report.walking = False
        return report

    async def run(self) -> RecoveryReport:
        report = RecoveryReport()
        stuck = await passlog.interrupt(self.manifest, self.current_pass, self.mover.clock())
        report.interrupted = [p.id for p in stuck]
        files = await asyncio.to_thread(archive_files, self.mover.layout)
        report.orphans += too_deep(self.mover.layout, files)
        archive = self.mover.layout.root
        for p in sorted(files.partials):
            try:
                if await asyncio.to_thread(functools.partial(unlink_if_present, p, root=archive)):
                    report.partials.append(p)
            except OSError as err:
                what = f"the leftover {p} could not be removed ({err})"
                report.problems.append(NewProblem(self.mover.layout.rel(p), "recovery", what))
        report.restore_partials, report.intents = await clear_restore_intents(
            self.manifest, self.mover.live_root, report.problems
        )
        await self.settle_gzips(report, files.gzips)
        await self.unlink_committed_sources(report)
        return report

    async def _missing(self, local: set[str], on_disk: Collection[str]) -> list[Entry]:
        """Entries whose gzip should be here and is not (``local``: the paths of
        those alone; a copy dropped after shipping is not among them, it is
        remote; full entries only for the missing)."""
        return await self.manifest.entries_by_gz(sorted(p for p in local if p not in on_disk))

    async def _known(self, found: Collection[str], local: set[str]) -> set[str]:
        """Those of the gzips ``found`` on disk that an entry names: one that
        should be here, or, looked up by name, one whose entry is missing,
        expired or remote-only (its copy came back, or was never removed)."""
        known = {p for p in found if p in local}
        others = [p for p in found if p not in known]
        if others:
            known |= {path for path, _ in await self.manifest.gz_statuses_of(others)}
        return known

    async def settle_gzips(self, report: RecoveryReport, on_disk: dict[str, str]) -> None:
        """Orphans adopted, kept or removed; entries without a gzip marked missing."""
        local = await self.manifest.local_gz_paths()
        known = await self._known(on_disk.keys(), local)
        missing = await self._missing(local, on_disk)
        if missing:
            await self.manifest.set_status([e.id for e in missing], "missing")
            report.missing = missing
        for rel in sorted(on_disk.keys() - known):
            self.cancel.check()
            try:
                report.orphans += await self.settle(Path(on_disk[rel]))
            except (OSError, ValueError) as err:
                # One orphan that cannot be settled (a name the manifest cannot
                # hold, a directory that fails) is left as found, and said.
                what = f"the orphan {rel} could not be settled ({err}); left as found"
                report.problems.append(NewProblem(rel, "recovery", what))

    async def settle(self, gz: Path) -> list[Orphan]:
        """An orphan gzip, or each member of an orphan bundle, settled."""
        if is_bundle_name(gz.name):
            return await OrphanBundle(self.manifest, self.mover, gz, self.cancel).settle()
        return [await self.settle_orphan(gz)]

    async def settle_orphan(self, gz: Path) -> Orphan:
        """One orphan gzip settled: its source found by the name in its header,
        the gzip re-verified against it (alone, when there is none), and what
        that proved made durable and recorded."""
        try:
            relpath = await asyncio.to_thread(_orphan_relpath, self.mover, gz)
        except OSError as err:
            # Its header says whose it is: unread, nothing can be decided.
            guess = self.mover.layout.relpath_of_gz(gz)
            return Orphan(gz, guess, "error", f"could not be read ({err}); left as found")
        except UnsafePath as err:
            # A copied archive's header: whatever it names is never written to.
            guess = self.mover.layout.relpath_of_gz(gz)
            detail = f"its header names {err}; left as found (rename it by hand)"
            return Orphan(gz, guess, "refused", detail)
        src, ident = await self._source(relpath)
        try:
            result = await self._verdict(gz, src, ident)
        except OSError as err:
            return Orphan(gz, relpath, "error", f"could not be read ({err}); left as found")
        return await self._settled(gz, relpath, result, ident)

    async def _source(self, relpath: str) -> tuple[Path | None, FileIdentity | None]:
        """An orphan's live source (None: its name would leave the live tree) and
        what is there now (None: nothing)."""
        try:
            src = resolve_inside(self.mover.live_root, relpath)
        except UnsafePath:
            return None, None
        root = self.mover.roots.src
        return src, await asyncio.to_thread(functools.partial(identity_or_none, src, root=root))

    async def _verdict(
        self, gz: Path, src: Path | None, ident: FileIdentity | None
    ) -> ArchiveOk | Stale | Corrupt | Changed:
        """What the orphan is: re-verified against its source (adopt_orphan), or,
        with no regular file there, alone."""
        roots = self.mover.roots
        if src is None or ident is None or not ident.is_regular:
            # No source to compare with: whatever decompresses is the only copy.
            verdict = await verify_gzip(gz, limiter=self.mover.limiter, cancel=self.cancel)
            if isinstance(verdict, Corrupt):
                await asyncio.to_thread(functools.partial(unlink_if_present, gz, root=roots.dest))
                return verdict
            assert isinstance(verdict, Verified)  # no expectation: no mismatch
            return await stale_of(gz, Digest(verdict.bytes, verdict.sha256))
        return await adopt_orphan(
            src, gz, roots=roots, identity=ident, limiter=self.mover.limiter, cancel=self.cancel
        )

    async def _settled(
        self,
        gz: Path,
        relpath: str,
        result: ArchiveOk | Stale | Corrupt | Changed,
        ident: FileIdentity | None,
    ) -> Orphan:
        """The verdict acted on: what is kept made durable, then entered (adopted,
        its source unlinked as step 7 does; or stale, under its own entry)."""
        if isinstance(result, ArchiveOk | Stale):
            try:
                await asyncio.to_thread(make_durable, gz, self.mover.roots.dest)
            except OSError as err:
                return Orphan(
                    gz, relpath, "error", f"could not be made durable ({err}); left as found"
                )
        if isinstance(result, ArchiveOk):
            await self.mover.commit(relpath, result)
            return Orphan(gz, relpath, "adopted")
        if isinstance(result, Stale):
            await self.manifest.add_entry(self._stale_entry(relpath, gz, result, ident))
            return Orphan(gz, relpath, "stale", "an earlier version, kept under its own entry")
        if isinstance(result, Corrupt):
            return Orphan(gz, relpath, "corrupt", result.detail)
        return Orphan(gz, relpath, "changed", result.detail)

    def _stale_entry(
        self, relpath: str, gz: Path, stale: Stale, source: FileIdentity | None
    ) -> NewEntry:
        return NewEntry(
            unit=unit_of(relpath),
            relpath=relpath,
            bytes=stale.bytes,
            sha256=stale.sha256,
            gz_path=self.mover.layout.rel(gz),
            gz_bytes=stale.gz_bytes,
            mtime_ns=stale.mtime_ns if is_mtime(stale.mtime_ns) else 0,
            dev=None,
            ino=None,
            mode=trusted_mode(stale.mode, source),
            archived_at=self.mover.clock(),
            status="stale",
            source_present=False,
        )

    async def unlink_committed_sources(self, report: RecoveryReport) -> None:
        """A crash between steps 6 and 7: the entry is committed, the source still
        there. It goes only if it is still exactly the file that was archived."""
        pending = await self.manifest.entries_pending_unlink()
        settled: list[int] = []
        for entry in pending:
            self.cancel.check()
            try:
                if not await self._settle_source(entry, report):
                    # Open in another process: it stays, pending, out of this
                    # pass's scan; a later recovery removes it once closed.
                    report.pending_sources.add(entry.relpath)
                    continue
            except OSError as err:
                # Refused (an immutable file: EPERM) or failing: this one stays
                # pending for the next recovery, out of this pass's scan; the
                # others go on.
                report.pending_sources.add(entry.relpath)
                report.problems.append(source_problem(entry.relpath, err))
                continue
            # Removed, gone, or another file now (judged on its own by the pass).
            settled.append(entry.id)
            report.settled.append(entry.relpath)
        await self.manifest.mark_sources_gone(settled)

    async def _settle_source(self, entry: Entry, report: RecoveryReport) -> bool:
        """One committed entry's source: an aside name a crash left settled first
        (unlinked if it is the archived inode, else put back), then the name
        itself unlinked if it is still exactly the file archived. False: it is
        open in another process, left for a later recovery."""
        try:
            src = resolve_inside(self.mover.live_root, entry.relpath)
        except UnsafePath:
            return True
        live = self.mover.live_root
        recorded = _recorded_identity(entry)
        aside = await asyncio.to_thread(functools.partial(settle_aside, src, recorded, root=live))
        if aside == "removed":
            report.sources_unlinked.append(entry.relpath)
            return True
        if aside == "displaced":
            what = f"{aside_of(src)} is kept: it is not the archived file and {src} is taken"
            report.problems.append(NewProblem(entry.relpath, "displaced", what))
        found = await self._still_archived(entry)
        if found is None:
            return True
        src, ident = found
        outcome = await asyncio.to_thread(
            functools.partial(
                unlink_source, src, ident, root=live, durably="recovery.source_unlinked"
            )
        )
        if outcome == "removed":
            report.sources_unlinked.append(entry.relpath)
        return outcome != "open"

    async def _still_archived(self, entry: Entry) -> tuple[Path, FileIdentity] | None:
        """A committed entry's live source, if it is still exactly the file that
        was archived, and the identity to unlink it by: the recorded one; or, when
        only the device number differs (a remount or a reboot renumbered the
        filesystem: the identity check alone would keep the source, and the next
        pass would archive it a second time) or only the ctime (its attributes
        changed: ``chattr -i`` on a file whose removal was refused), the one seen
        now, but only once the file's bytes have been read again and are the entry's (the bytes its
        verified gzip holds). The same inode number on another device is never
        proof enough by itself."""
        recorded = _recorded_identity(entry)
        if recorded is None:
            return None
        try:
            src = resolve_inside(self.mover.live_root, entry.relpath)
        except UnsafePath:
            return None
        live = self.mover.live_root
        now = await asyncio.to_thread(functools.partial(identity_or_none, src, root=live))
        if recorded.same_file(now):
            return src, recorded
        if now is None:
            return None
        # Only the ctime moved (a chmod, a chattr -i once the operator cleared an
        # immutable file, a link): the bytes decide, as for a renumbered device.
        if not recorded.same_inode_elsewhere(now) and not recorded.same_inode_and_times(now):
            return None
        limiter, cancel = self.mover.limiter, self.cancel
        digest = await in_thread(cancel, digest_if_identity, src, live, now, limiter, cancel)
        if digest is None or (digest.bytes, digest.sha256) != (entry.bytes, entry.sha256):
            return None
        return src, now
