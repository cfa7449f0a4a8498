"""Restore: files back from their gzips, never overwriting anything (event rows
come back through ``events.restore``).

Files: a ``Selection`` (entry ids, unit, path glob, mtime range, sha prefix) picks
manifest entries (the newest version of each path unless ids or all versions are
asked for); each goes through ``FileMover.restore`` (intent, ``.restore-partial``,
verify, mode and mtime, rename without replacing) to its live path or under
another directory, ``io.workers`` files at a time. The intents are recorded a
chunk of files at a time in one commit, the next chunk's while the workers
restore this one's, and cleared in groups as the files are placed: the workers
never wait for a commit of their own.

Invariants:
- Every target is checked before anything is written: the entry's relpath and gz
  path must stay inside their roots (no absolute path, no ``..``, no symlinked
  parent), and a ``--to`` directory must be a real directory outside the archive
  and outside the live tree (where it would become new files to archive),
  reached through no symlink.
- A target that exists is ``exists`` and untouched; a gzip that does not give the
  recorded bytes is ``mismatch`` and nothing is placed.
- A tombstone (an entry retention expired) is selected like any entry and
  reported ``expired``, with when and its sha256: nothing is left to restore,
  and the operator is told so rather than shown an empty selection. An id no
  entry has is a usage error.
- Two versions of one path never share a target (``target_names``): under
  another directory the older ones are renamed, in place they are refused.
- Restoring in place gives the file a restore grace (``grace_days``, the config's
  ``hold_days``): passes leave it alone until it runs out.
"""

from __future__ import annotations

import asyncio
import os
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ..base.beneath import Refused
from ..base.cancel import CancelToken
from ..base.errors import RemoteError, UsageError
from ..base.fsutil import fsync_dir
from ..base.globs import GlobError, compile_globs
from ..base.layout import UnsafePath, resolve_inside, restore_partial_of
from ..base.space import OutOfSpace, out_of_space
from ..base.stream import EventStream, FileDone, Phase
from ..base.times import days_after
from ..store.entries import Entry
from ..store.expiry import expired_detail
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects
from ..store.restoreintents import IntentChange, RestoreIntent
from .filemove import FileMover, Placed
from .gzfile import Restored, RestoreResult
from .reader import RemoteCopies, entry_gzip

RestoreOutcome = Literal["restored", "exists", "mismatch", "missing", "refused", "error", "expired"]


class SelectionError(UsageError, ValueError):
    """A selection that cannot be used; the message says why."""


@dataclass(frozen=True)
class Selection:
    ids: tuple[int, ...] = ()
    unit: str | None = None
    glob: str | None = None
    sha: str | None = None
    after_ns: int | None = None  # the file's mtime, inclusive
    before_ns: int | None = None  # exclusive
    all_versions: bool = False

    @property
    def empty(self) -> bool:
        return not (
            self.ids or self.unit or self.glob or self.sha or self.after_ns or self.before_ns
        )


def check_selection(sel: Selection) -> None:
    """A selection that names something, in words the manifest can search."""
    if sel.empty:
        raise SelectionError("select something: ids, --unit, --path, --sha or a time range")
    if sel.sha and not all(c in "0123456789abcdef" for c in sel.sha.lower()):
        raise SelectionError(f"--sha {sel.sha!r} is not hexadecimal")


def unknown_ids_error(ids: list[int], why: str = "") -> SelectionError:
    said = ", ".join(str(i) for i in ids)
    return SelectionError(
        f"no entry {said}{why} (restore --list --unit U or --path GLOB shows entry ids)"
    )


def nothing_matched_error(sel: Selection) -> SelectionError:
    """A selection that names no archived file, in the words it was given."""
    said = [f"entries {', '.join(map(str, sel.ids))}"] if sel.ids else []
    said += [f"--unit {sel.unit}"] if sel.unit else []
    said += [f"--path {sel.glob}"] if sel.glob else []
    said += [f"--sha {sel.sha}"] if sel.sha else []
    for flag, ns in (("--after", sel.after_ns), ("--before", sel.before_ns)):
        if ns is not None:
            said.append(f"{flag} {datetime.fromtimestamp(ns / 1e9).isoformat(timespec='seconds')}")
    return SelectionError(
        f"nothing archived matches {' '.join(said)} "
        "(restore --list --path '**' lists every archived file)"
    )


async def select_entries(manifest: Manifest, sel: Selection) -> list[Entry]:
    """The entries a selection names, oldest path first; tombstones (``expired``)
    included. An id no entry has is a ``SelectionError``."""
    check_selection(sel)
    if sel.ids:
        unknown = await manifest.unknown_ids(sel.ids)
        if unknown:
            raise unknown_ids_error(unknown)
    entries = await manifest.select(
        ids=sel.ids,
        unit=sel.unit,
        sha_prefix=sel.sha.lower() if sel.sha else None,
        mtime_from_ns=sel.after_ns,
        mtime_before_ns=sel.before_ns,
    )
    if sel.glob:
        try:
            match = compile_globs([sel.glob])
        except GlobError as err:
            raise SelectionError(str(err)) from None
        entries = [e for e in entries if match.fullmatch(e.relpath)]
    if not sel.ids and not sel.all_versions:
        newest: dict[str, Entry] = {}
        for e in entries:  # ordered by the source's mtime: the newest version wins
            newest[e.relpath] = e
        entries = list(newest.values())
    return entries


@dataclass(frozen=True)
class FileRestore:
    entry_id: int
    relpath: str
    target: str
    result: RestoreOutcome
    detail: str = ""


@dataclass
class RestoreReport:
    files: list[FileRestore] = field(default_factory=list)
    nothing_archived: bool = False  # no coldkeep.db yet: nothing read, nothing written

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for f in self.files:
            out[f.result] += 1
        return dict(out)

    @property
    def said(self) -> str:
        """Its counts in one line: ``3 restored, 1 exists``."""
        return ", ".join(f"{n} {k}" for k, n in sorted(self.counts.items())) or "nothing selected"

    @property
    def failed(self) -> bool:
        """Something selected did not come back: a gzip gone or bad, a path
        refused, or an entry whose data retention deleted (``expired``)."""
        bad = ("mismatch", "missing", "refused", "error", "expired")
        return any(f.result in bad for f in self.files)

    def to_dict(self) -> list[dict[str, Any]]:
        return [
            {
                "entry_id": f.entry_id,
                "relpath": f.relpath,
                "target": f.target,
                "result": f.result,
                "detail": f.detail,
            }
            for f in self.files
        ]


def check_restore_root(to: Path, archive_root: Path, live_root: Path | None = None) -> Path:
    """A ``--to`` directory: absolute, reached through no symlink, outside the
    archive and outside the live tree (``live_root``, when given)."""
    absolute = Path(os.path.abspath(to))
    if absolute.resolve() != absolute:
        raise UnsafePath(f"{to} goes through a symlink; give the real directory")
    if absolute == archive_root or archive_root in absolute.parents:
        raise UnsafePath(f"{to} is inside the archive; restore somewhere else")
    lives = {live_root, live_root.resolve()} if live_root is not None else set()
    if any(absolute == live or live in absolute.parents for live in lives):
        raise UnsafePath(
            f"{to} is inside live_root ({live_root}): the next pass would archive what is "
            "restored there as new files; restore to the live paths (no target) or outside it"
        )
    if absolute.exists() and not absolute.is_dir():
        raise UnsafePath(f"{to} is not a directory")
    return absolute


def target_names(entries: list[Entry], *, in_place: bool) -> dict[int, str]:
    """Where each entry goes, relative to the restore root: its relpath. Several
    versions of one path (``--all-versions``, or ids naming them) cannot all go
    there: under ``--to`` the newest keeps the name and each older one gets
    ``.entry-<id>`` after it; in place they are refused, before anything is
    written (an older version would take the live path, or be skipped as
    ``exists`` while an older one was placed)."""
    versions: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        versions[e.relpath].append(e)
    names: dict[int, str] = {}
    for relpath, group in versions.items():
        group.sort(key=lambda e: (e.mtime_ns, e.id))
        if len(group) > 1 and in_place:
            ids = ", ".join(str(e.id) for e in group)
            raise SelectionError(
                f"{len(group)} versions of {relpath} (entries {ids}) would all go to its "
                "live path; restore them with --to DIR (older versions get .entry-<id> "
                "after the name), or pick one by its entry id"
            )
        *older, newest = group
        names[newest.id] = relpath
        names.update((e.id, f"{relpath}.entry-{e.id}") for e in older)
    return names


async def restore_files(
    mover: FileMover,
    entries: list[Entry],
    *,
    to: Path | None,
    grace_days: float,
    stream: EventStream,
    cancel: CancelToken | None = None,
    remote: RemoteCopies | None = None,
    workers: int = 1,
) -> RestoreReport:
    """``entries`` back, ``workers`` files at a time, each from its gzip in the
    archive or, when that is gone and ``remote`` holds it, from the remote tier.
    Each file's ``FileDone`` comes as it finishes; the report lists them in the
    order given. Cancellation is checked before each file; a file that fails
    with a full filesystem stops the others (``OutOfSpace``)."""
    report = RestoreReport()
    gone = [e for e in entries if e.status == "expired"]
    entries = [e for e in entries if e.status != "expired"]
    # A tombstone is never restored; what the bucket's lock still keeps of it is said.
    kept = await RemoteObjects(mover.manifest).of_paths(e.gz_path for e in gone) if gone else {}
    for e in gone:
        said = expired_detail(e, kept.get(e.gz_path), mover.clock())
        report.files.append(FileRestore(e.id, e.relpath, "", "expired", said))
        stream.emit(FileDone("restore", e.relpath, "expired", e.bytes, 0, said))
    names = target_names(entries, in_place=to is None)
    root = mover.live_root if to is None else to
    grace_until = days_after(mover.clock(), grace_days, "hold_days") if to is None else None
    stream.emit(Phase("restore", len(entries), sum(e.bytes for e in entries)))
    # Intents a restore that died left: read once, each cleared by the file
    # restored to its target (no two files of this restore share one).
    earlier = await mover.manifest.restore_intents()
    run = _Run(mover, root, names, grace_until, stream, remote, entries, cancel, earlier)
    async with linked(cancel) as token:
        report.files += await run.all(token, max(1, workers))
    return report


@asynccontextmanager
async def linked(cancel: CancelToken | None) -> AsyncIterator[CancelToken]:
    """A token of the restore's own, tripped when ``cancel`` is (its reason
    kept): the restore stops its other workers through it without tripping the
    caller's."""
    token = CancelToken()
    if cancel is None:
        yield token
        return

    async def follow() -> None:
        await cancel.wait()
        token.cancel(cancel.reason)

    watcher = asyncio.create_task(follow())
    try:
        yield token
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)


# Intents recorded in one commit, per file in flight: the commits of a restore
# are one per chunk, not one per file (each cost more than a file's own fsyncs
# with the disk busy writing the files), while a crash leaves at most two
# chunks of intents for recovery to clear.
CHUNK_PER_WORKER = 4


@dataclass
class _Run:
    """One ``restore_files`` call's files, taken in order by its workers."""

    mover: FileMover
    root: Path
    names: dict[int, str]
    grace_until: int | None
    stream: EventStream
    remote: RemoteCopies | None
    entries: list[Entry]
    cancel: CancelToken | None  # the caller's: checked before each file too
    earlier: list[RestoreIntent]
    left: int = 0  # bytes not yet restored (what a full filesystem still needed)
    done: dict[int, FileRestore] = field(default_factory=dict)
    at: dict[int, int] = field(default_factory=dict)  # entry id -> its place in entries

    async def all(self, token: CancelToken, workers: int) -> list[FileRestore]:
        self.left = sum(e.bytes for e in self.entries)
        self.at = {e.id: i for i, e in enumerate(self.entries)}
        todo = iter(enumerate(self.entries))
        chunk = CHUNK_PER_WORKER * workers
        clearing = _Clearing(self, chunk)
        ahead = _Ahead(self, chunk, clearing)

        async def worker() -> None:
            for i, entry in todo:  # one iterator: each worker takes the next file
                if self.cancel is not None:
                    self.cancel.check()  # its reason, before the follower passes it on
                token.check()
                await self.one(i, entry, token, ahead, clearing)

        tasks = [asyncio.create_task(worker()) for _ in range(min(workers, len(self.entries)))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            token.cancel("the restore stopped")
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            # The files placed are told once their intents are cleared; the
            # intents recorded for files no worker took go, graces given back.
            try:
                await clearing.close()
            finally:
                await ahead.give_back_unused()
        return [self.done[i] for i in range(len(self.entries))]

    async def one(
        self, i: int, entry: Entry, token: CancelToken, ahead: _Ahead, clearing: _Clearing
    ) -> None:
        """One file restored; told to the stream once its intent is cleared."""
        try:
            one = await _restore_one(self, i, entry, token, ahead)
        except OSError as err:
            if not out_of_space(err):
                raise
            # The partial is gone (restore_file removes it); the rest would only
            # fail the same way on this filesystem.
            self.stream.emit(FileDone("restore", entry.relpath, "error", entry.bytes, 0, str(err)))
            target = Path(err.filename) if err.filename else self.root
            raise OutOfSpace(target, err, doing="restoring", needed=self.left) from err
        if isinstance(one, Placed):
            clearing.add(one)
        else:
            self.record(i, one)

    def told(self, placed: Placed) -> None:
        i = self.at[placed.entry_id]
        self.record(i, _outcome(self.entries[i], placed.target, placed.result))

    def record(self, i: int, one: FileRestore) -> None:
        entry = self.entries[i]
        self.left -= entry.bytes
        self.done[i] = one
        self.stream.emit(FileDone("restore", entry.relpath, one.result, entry.bytes, 0, one.detail))


@dataclass
class _Clearing:
    """Placed files whose intents are not yet cleared, cleared ``chunk`` at a
    time in one commit (or with the next chunk's intents), each told once its
    clearing is durable. Workers never wait for it: they go on to their next
    file."""

    run: _Run
    chunk: int
    pending: list[Placed] = field(default_factory=list)
    commits: list[asyncio.Task[None]] = field(default_factory=list)

    def add(self, placed: Placed) -> None:
        self.pending.append(placed)
        if len(self.pending) >= self.chunk:
            self.flush()

    def flush(self) -> None:
        """The pending clearings sent now: they share the commit of whatever
        else is sent before the committer runs."""
        if self.pending:
            batch, self.pending = self.pending, []
            self.commits.append(asyncio.create_task(self._clear(batch)))

    async def _clear(self, batch: list[Placed]) -> None:
        """The batch's directories fsynced (one each), ``restored`` announced,
        then the intents cleared in one commit."""
        run = self.run
        placed = [p for p in batch if isinstance(p.result, Restored)]
        failed = await asyncio.to_thread(_sync_dirs, {p.target.parent for p in placed}, run.root)
        cleared: list[Placed] = []
        for p in batch:
            was_placed = isinstance(p.result, Restored)
            err = failed.get(p.target.parent) if was_placed else None
            if err is not None:
                # Its name may not be durable: the intent stays, and recovery
                # removes the partial by that name if a power cut brings it back.
                detail = str(err) if err.filename else f"{p.target.parent}: {err}"
                entry = run.entries[run.at[p.entry_id]]
                failure = FileRestore(entry.id, entry.relpath, str(p.target), "error", detail)
                run.record(run.at[p.entry_id], failure)
                continue
            if was_placed:
                info = {"target": p.target, "partial": restore_partial_of(p.target)}
                await run.mover.step("restored", info)
            cleared.append(p)
        await asyncio.gather(*(run.mover.restore_finished(p) for p in cleared))
        for p in cleared:
            run.told(p)

    async def close(self) -> None:
        """Every clearing sent and committed; the first that failed raised."""
        self.flush()
        done = await asyncio.gather(*self.commits, return_exceptions=True)
        for outcome in done:
            if isinstance(outcome, BaseException):
                raise outcome


@dataclass
class _Ahead:
    """The restore intents, recorded ``chunk`` files at a time in one commit
    (the next chunk's while the workers restore this one's). A file's intent is
    the worker's once it takes it; those no worker took when the restore stops
    are cleared by ``give_back_unused``."""

    run: _Run
    chunk: int
    clearing: _Clearing
    chunks: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    ids: dict[int, int] = field(default_factory=dict)  # entry's place -> its intent, not yet taken
    targets: dict[int, Path | str] = field(default_factory=dict)  # ... its target, or why refused
    gzips: dict[int, Path] = field(default_factory=dict)  # ... its local gzip's path, checked

    async def take(self, i: int) -> tuple[Path, int, Path] | str:
        """File ``i``'s target, intent and local gzip path, now the caller's; or
        why its target or its gzip's path is refused (no intent recorded for it)."""
        k = i // self.chunk
        for n in (k, k + 1):  # the next chunk's commit overlaps this chunk's files
            if n not in self.chunks and n * self.chunk < len(self.run.entries):
                self.clearing.flush()  # the clearings waiting share that commit
                self.chunks[n] = asyncio.create_task(self._record(n))
        # Shielded: a worker stopped while it waits leaves the chunk's commit to finish.
        await asyncio.shield(self.chunks[k])
        target = self.targets.pop(i)
        if isinstance(target, str):
            return target
        return target, self.ids.pop(i), self.gzips.pop(i)

    async def _record(self, k: int) -> None:
        run = self.run
        places = range(k * self.chunk, min((k + 1) * self.chunk, len(run.entries)))
        # Checked in a thread (a few lstat each), a chunk at a time.
        for i, (target, gz) in (await asyncio.to_thread(_targets, run, places)).items():
            self.targets[i] = target
            if gz is not None:
                self.gzips[i] = gz
        todo = [(i, t) for i in places if isinstance(t := self.targets[i], Path)]
        recorded = await asyncio.gather(
            *(
                run.mover.record_intent(
                    run.entries[i],
                    t,
                    root=run.root,
                    grace_until=run.grace_until,
                    earlier=run.earlier,
                )
                for i, t in todo
            ),
            return_exceptions=True,
        )
        for (i, _), got in zip(todo, recorded, strict=True):
            if not isinstance(got, BaseException):
                self.ids[i] = got
        for got in recorded:
            if isinstance(got, BaseException):
                raise got

    async def give_back(self, i: int, intent: int) -> None:
        """A taken intent whose file was never written (its gzip missing, or
        unreadable): cleared, the entry's status and grace as they were."""
        await self.run.mover.manifest.change_intents(_unused(self.run, i, intent))

    async def give_back_unused(self) -> None:
        await asyncio.gather(*self.chunks.values(), return_exceptions=True)
        unused, self.ids = self.ids, {}
        await asyncio.gather(
            *(
                self.run.mover.manifest.change_intents(_unused(self.run, i, n))
                for i, n in unused.items()
            )
        )


def _unused(run: _Run, i: int, intent: int) -> IntentChange:
    entry = run.entries[i]
    back = None if run.grace_until is None else (entry.id, entry.status, entry.grace_until)
    return IntentChange(clear=intent, grace=back)


def _sync_dirs(dirs: set[Path], root: Path) -> dict[Path, OSError]:
    """Each directory's names fsynced once for all the files placed in it; the
    ones that failed, with their error."""
    failed: dict[Path, OSError] = {}
    for directory in sorted(dirs):
        try:
            fsync_dir(directory, root=root, site="restore.placed")
        except OSError as err:
            failed[directory] = err
    return failed


def _targets(run: _Run, places: range) -> dict[int, tuple[Path | str, Path | None]]:
    """Where each entry goes and its gzip's local path, or why it is refused:
    its target or its gzip's path leaves its root, or goes through a symlinked
    directory."""
    out: dict[int, tuple[Path | str, Path | None]] = {}
    for i in places:
        entry = run.entries[i]
        try:
            gz = run.mover.layout.abs(entry.gz_path)
            out[i] = (resolve_inside(run.root, run.names[entry.id]), gz)
        except UnsafePath as err:
            out[i] = (f"entry {entry.id}: {err}", None)
    return out


async def _restore_one(
    run: _Run, i: int, entry: Entry, cancel: CancelToken, ahead: _Ahead
) -> FileRestore | Placed:
    """One file up to its intent's clearing (``Placed``), or what stopped it."""
    mover, root = run.mover, run.root

    def result(outcome: RestoreOutcome, target: str = "", detail: str = "") -> FileRestore:
        return FileRestore(entry.id, entry.relpath, target, outcome, detail)

    taken = await ahead.take(i)
    if isinstance(taken, str):  # no intent was recorded for it
        return result("refused", detail=taken)
    target, recorded, gz = taken
    intent: int | None = recorded
    try:
        async with entry_gzip(entry, mover.layout, run.remote, cancel, local=gz) as at:
            if at is None:
                gone = f"the gzip {entry.gz_path} is missing from the archive"
                return result("missing", detail=gone)
            given, intent = intent, None  # restore_placing's now, cleared by it if it fails
            return await mover.restore_placing(
                entry,
                target,
                root=root,
                grace_until=run.grace_until,
                cancel=cancel,
                at=at,
                intent=given,
                sync_dir=False,  # one fsync for the files of a directory (_Clearing)
            )
    except RemoteError as err:
        return result("error", str(target), str(err))
    except FileNotFoundError as err:
        return result("missing", str(target), f"{err.filename}: not found")
    except Refused as err:  # a directory on the way turned into a link: not followed
        return result("refused", str(target), str(err))
    except OSError as err:
        if out_of_space(err):
            raise  # the whole restore stops (restore_files)
        # The error names the file it happened on (the gzip read, the partial
        # written); the target is on the line already.
        return result("error", str(target), str(err) if err.filename else f"{target}: {err}")
    finally:
        if intent is not None:  # nothing was written under it
            await ahead.give_back(i, intent)


def _outcome(entry: Entry, target: Path, done: RestoreResult) -> FileRestore:
    def result(outcome: RestoreOutcome, detail: str = "") -> FileRestore:
        return FileRestore(entry.id, entry.relpath, str(target), outcome, detail)

    if isinstance(done, Restored):
        return result("restored")
    if done.kind == "exists":
        return result("exists", f"{target} exists; left untouched")
    return result("mismatch", done.detail)
