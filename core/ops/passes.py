"""The pass engine: one pass, run inside the archiver's session, and its summary.

A pass in mode ``on`` (``Pass.run``):

    recovery   what a crash left behind, settled first (``run_recovery``, also
               the ``recover`` command)
    files      the scan, then every eligible file, ``workers`` at a time: the
               smaller ones packed into bundles (files/bundlemove.py), one
               worker per bundle, the others each its own gzip
    events     the eligible event rows, batch by batch (events/dbmove.py), when a
               state_db is configured

A pass in mode ``plan`` counts the same backlog without the lock and without
writing (``planned_summary``).

Invariants:
- A pass never stops for one bad file, and one bad file never fails it: each
  file's outcome is counted in ``FileTotals``, and a file that needs an operator
  (an I/O error reading it: its partial removed, its source kept; a failed
  verify; a source whose removal is refused; a recovery item left as found) is
  quarantined in ``file_problems`` (store/problems.py) with its reason and
  remedy; the summary counts them (``file_problems``) and lists this pass's
  (``new_problems``). A row goes once its file is archived, gone or no longer
  eligible. Only what stops the pass as a whole is a line of ``problems``, which
  makes it ``failed``.
- Cancelled, it ends ``cancelled`` at the next safe point; a phase that cannot
  run at all (the scan, the events table, I/O, a database error) ends it
  ``failed`` with the reason.
- A full filesystem (ENOSPC, EDQUOT, SQLITE_FULL) stops the pass at the first
  file or batch that meets it: the next would only fail the same way. What was in
  flight settles (a file's partial is removed, a batch's transaction rolls back),
  the reserve is released so the failure can be recorded, and the pass ends
  ``failed`` with the ``OutOfSpace`` line first among its problems (which the
  alerts pick up from the audit). Either way its ``passes`` row is settled, shielded from the
  cancellation, before ``Finished`` says the same.
- ``PassSummary.to_dict()`` is the pass's --json document, its ``Finished``
  summary and its ``passes`` row (docs/json.md): the shape is an interface, and
  the alerts read conflicts back from the stored rows.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from ..base.cancel import Cancelled, CancelToken
from ..base.config import Settings
from ..base.layout import Layout
from ..base.space import OutOfSpace, out_of_space, release_reserve
from ..base.steps import StepHook
from ..base.stream import (
    EventStream,
    FileDone,
    FileStep,
    OrphanSeen,
    Phase,
    Status,
    thread_progress,
)
from ..base.times import NS_PER_MS
from ..events.dbmove import move_events
from ..events.eventschema import EventsError
from ..events.moverun import Conflict, MoveReport
from ..files.bundlemove import BundleGroup, BundleMover, MemberDone, bundle_groups
from ..files.bundleprocs import Workers, worker_count
from ..files.filemove import Archived, FileMover
from ..files.gzfile import InUse, Unarchivable
from ..files.orphanbundle import Orphan
from ..files.recovery import Recovery, RecoveryReport
from ..files.scan import Candidate, ScanError, scan_files
from ..store import passlog, problems
from ..store.manifest import Manifest
from .plan import Plan


@dataclass
class FileTotals:
    eligible: int = 0  # found by the scan (in mode plan: what a pass would archive)
    eligible_bytes: int = 0
    archived: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    changed: int = 0
    verify_failed: int = 0
    errors: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    legacy_removed: int = 0
    legacy_kept: int = 0

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


@dataclass(frozen=True)
class EventsMoved:
    """What a pass's event phase did."""

    moved: int
    already_archived: int
    kept_changed: int
    conflicts: tuple[Conflict, ...]  # the first CONFLICTS_LISTED
    conflicts_total: int
    unparsable: int
    held: int
    months: tuple[str, ...]
    months_refused: Mapping[str, str]
    locked_rows: int
    batches: int
    wal_peak: int
    checkpointer: str
    checkpoints: int

    @classmethod
    def of(cls, report: MoveReport) -> EventsMoved:
        return cls(
            moved=report.moved,
            already_archived=report.already_archived,
            kept_changed=report.kept_changed,
            conflicts=tuple(report.conflicts),
            conflicts_total=report.conflicts_total,
            unparsable=report.unparsable,
            held=report.held,
            months=tuple(sorted(report.months)),
            months_refused=dict(report.months_refused),
            locked_rows=report.locked_rows,
            batches=report.batches,
            wal_peak=report.wal_peak,
            checkpointer=report.checkpointer,
            checkpoints=report.checkpoints,
        )

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["conflicts"] = [asdict(c) for c in self.conflicts]
        out["months"] = list(self.months)
        out["months_refused"] = dict(self.months_refused)
        return out


@dataclass(frozen=True)
class EventsPlanned:
    """Mode plan: the event rows a pass would move."""

    eligible_rows: int

    def to_dict(self) -> dict[str, Any]:
        return {"eligible_rows": self.eligible_rows}


@dataclass
class PassSummary:
    mode: str
    status: Status = "ok"
    pass_id: int | None = None
    started_at: int = 0
    seconds: float = 0.0
    recovery: dict[str, int] = field(default_factory=dict)
    files: FileTotals = field(default_factory=FileTotals)
    events: EventsMoved | EventsPlanned | None = None
    problems: list[str] = field(default_factory=list)
    out_of_space: dict[str, Any] | None = None  # OutOfSpace.to_dict(): where, how much
    file_problems: int = 0  # files quarantined after this pass (store/problems.py)
    new_problems: list[dict[str, Any]] = field(default_factory=list)  # met by this pass

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["events"] = None if self.events is None else self.events.to_dict()
        return out


def planned_summary(
    plan: Plan, recovery: RecoveryReport, started_at: int, seconds: float
) -> PassSummary:
    """Mode plan: what a pass would do, from the backlog and a recovery scan."""
    summary = PassSummary("plan", started_at=started_at, seconds=seconds)
    summary.recovery = recovery.to_dict()
    summary.files.skipped = {k: int(v) for k, v in plan.skipped.items()}
    summary.files.eligible = plan.files
    summary.files.eligible_bytes = plan.bytes
    if plan.events is not None:
        summary.events = EventsPlanned(plan.events.rows)
    return summary


# What the core's results look like on the stream ------------------------------


def emit_orphan(stream: EventStream, layout: Layout, o: Orphan) -> None:
    stream.emit(OrphanSeen(layout.rel(o.gz), o.relpath, o.outcome, o.detail))


async def run_recovery(
    manifest: Manifest,
    mover: FileMover,
    stream: EventStream,
    cancel: CancelToken | None,
    current_pass: int | None = None,
) -> RecoveryReport:
    """Recovery (the caller holds the lock), each thing it settled told to the
    stream; the pass it runs in is no leftover."""
    stream.emit(Phase("recovery", 0))
    report = await Recovery(manifest, mover, cancel, current_pass=current_pass).run()
    for pass_id in report.interrupted:
        stream.notice("warning", f"pass {pass_id} died with its process; recorded as interrupted")
    for p in report.partials:
        stream.emit(OrphanSeen(mover.layout.rel(p), "", "partial_removed"))
    for o in report.orphans:
        emit_orphan(stream, mover.layout, o)
    for e in report.missing:
        stream.notice(
            "error",
            f"entry {e.id} ({e.relpath}): its gzip {e.gz_path} is MISSING from the archive",
        )
    return report


def unexpected(err: BaseException) -> str:
    """The problem line of a pass stopped by an error nothing expected (a bug):
    its type and first line."""
    text = str(err).strip().splitlines()
    return (
        f"the pass stopped on an unexpected error: {type(err).__name__}"
        f"{': ' + text[0] if text else ''} (a bug: report it with the traceback)"
    )


# The pass ---------------------------------------------------------------------


class PassSession(Protocol):
    """What a pass needs of the archiver's session: the manifest and the mover
    under the lock, and the stream and the audit told how the pass began and
    ended."""

    manifest: Manifest
    mover: FileMover

    def start(self, detail: str = "") -> None: ...

    def finish(self, status: Status, summary: dict[str, Any]) -> None: ...

    def settle(self, outcome: str, detail: str | None = None) -> None: ...


@dataclass(frozen=True)
class PassSetup:
    """What the archiver runs a pass with."""

    settings: Settings
    stream: EventStream
    clock: Callable[[], int]  # ms since the epoch: what "old enough" is measured against
    origin: str  # cli | console | scheduler, into the passes row
    workers: int  # files archived at once
    step: StepHook  # the caller's step hook, for the event mover's steps


class Pass:
    """One pass in mode ``on``, inside a session."""

    def __init__(self, setup: PassSetup, session: PassSession, cancel: CancelToken) -> None:
        self.setup = setup
        self.settings = setup.settings
        self.stream = setup.stream
        self.session = session
        self.manifest = session.manifest
        self.mover = session.mover
        self.cancel = cancel
        self.summary = PassSummary("on", started_at=setup.clock())
        self.quarantine: list[problems.NewProblem] = []  # this pass's file problems
        self.settled: list[str] = []  # relpaths archived and gone: their problems go
        self.pending: set[str] = set()  # committed sources recovery could not remove
        self.eligible: set[str] | None = None  # what the scan offered, once it ran
        # Relpaths with something at files/<relpath> when the files were planned
        # (None: not looked): only those can have an older scheme's plain copy.
        self.copies_at: set[str] | None = None
        self.walk_lane = asyncio.Lock()  # dense bundles' member walks, one at a time
        self.workers: Workers | None = None  # or in worker processes (bundleprocs.py)

    async def run(self) -> PassSummary:
        summary, manifest = self.summary, self.manifest
        t0 = time.monotonic()
        summary.pass_id = await passlog.start(manifest, "on", self.setup.origin, summary.started_at)
        self.session.start(f"pass {summary.pass_id}")
        try:
            await self._phases()
        except Cancelled:
            summary.status = "cancelled"
        except (ScanError, EventsError, OSError, sqlite3.Error) as err:
            summary.status = "failed"
            if isinstance(err, OSError | sqlite3.Error) and out_of_space(err):
                await self._out_of_space(err)
            else:
                summary.problems.append(str(err))
        except BaseException as err:
            # A bug, or the task itself cancelled: the pass did not end well, and
            # its row must never say ok. The error goes on to the caller, whose
            # traceback says where.
            cancelled = isinstance(err, asyncio.CancelledError)
            summary.status = "cancelled" if cancelled else "failed"
            if not cancelled:
                summary.problems.append(unexpected(err))
            raise
        finally:
            if summary.status == "ok" and summary.problems:
                summary.status = "failed"
            summary.seconds = time.monotonic() - t0
            document = summary.to_dict()
            await asyncio.shield(
                passlog.finish(
                    manifest, summary.pass_id, summary.status, document, self.setup.clock()
                )
            )
            self.session.finish(summary.status, document)
            # The audit keeps the problems; the summary is in the passes row.
            self.session.settle(summary.status, "; ".join(summary.problems) or None)
        return summary

    async def _out_of_space(self, err: OSError | sqlite3.Error) -> None:
        """The reserve goes first, so the failure can be recorded; then the one
        line that says it, first among the problems."""
        if not isinstance(err, OutOfSpace):  # no step named it: a database write
            where = Path(err.filename) if isinstance(err, OSError) and err.filename else None
            err = OutOfSpace(where or self.manifest.path, err, doing="writing")
        await asyncio.to_thread(release_reserve, self.settings.archive_root)
        self.summary.problems.insert(0, str(err))
        self.summary.out_of_space = err.to_dict()

    async def _phases(self) -> None:
        summary = self.summary
        recovery = await run_recovery(
            self.manifest, self.mover, self.stream, self.cancel, summary.pass_id
        )
        summary.recovery = recovery.to_dict()
        if recovery.missing:
            summary.problems.append(f"{len(recovery.missing)} entries have no gzip (missing)")
        layout = self.mover.layout
        self.quarantine += recovery.problems
        self.quarantine += [
            problems.NewProblem(
                o.relpath or layout.rel(o.gz), "recovery", f"{layout.rel(o.gz)} {o.detail}"
            )
            for o in recovery.errors
        ]
        self.settled += recovery.settled
        self.pending = recovery.pending_sources
        try:
            await self._files()
        finally:
            await asyncio.shield(self._quarantine())
        if self.settings.state_db is not None:
            await self._events()

    async def _files(self) -> None:
        eligible = await self._scan()
        singles, groups = await asyncio.to_thread(self._plan_bundles, eligible)
        queue: asyncio.Queue[Candidate | BundleGroup] = asyncio.Queue()
        # Bundles first: each is one worker's for a while, and the large files
        # fill the other workers meanwhile.
        jobs: list[Candidate | BundleGroup] = [*groups, *singles]
        for job in jobs:
            queue.put_nowait(job)

        async def worker() -> None:
            while not queue.empty():
                self.cancel.check()
                job = queue.get_nowait()
                if isinstance(job, BundleGroup):
                    await self._one_bundle(job)
                else:
                    await self._one_file(job)

        dense = sum(len(g.files) for g in groups if g.dense)
        if processes := worker_count(self.settings.io, dense):
            self.workers = Workers(processes)
        workers = min(self.setup.workers, queue.qsize())
        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            self.cancel.cancel("the pass stopped")
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            if self.workers is not None:
                await asyncio.shield(self.workers.close())
        totals = self.summary.files
        if totals.legacy_kept:
            what = f"{totals.legacy_kept} legacy copies differ and were kept"
            self.summary.problems.append(what)
        self.eligible = {c.relpath for c in eligible}

    async def _quarantine(self) -> None:
        """This pass's file problems recorded, the settled ones cleared; the summary
        says how many files are quarantined and which this pass met."""
        now, pass_id = self.setup.clock(), self.summary.pass_id
        met = {p.relpath for p in self.quarantine}
        await problems.clear(self.manifest, [r for r in self.settled if r not in met])
        # Recovery ran whole and tried every leftover again: what it did not
        # meet again is settled.
        await problems.clear_except(self.manifest, problems.RECOVERY_KINDS, met)
        if self.eligible is not None:
            # A file the scan no longer offers is no longer this pass's problem.
            await problems.clear_except(
                self.manifest, problems.PASS_KINDS, self.eligible | met | self.pending
            )
        await problems.record(self.manifest, self.quarantine, at=now, pass_id=pass_id)
        self.summary.file_problems = await problems.count(self.manifest)
        self.summary.new_problems = [
            {"relpath": p.relpath, "kind": p.kind, "reason": p.reason, "remedy": p.remedy}
            for p in self.quarantine
        ]

    def _plan_bundles(self, eligible: list[Candidate]) -> tuple[list[Candidate], list[BundleGroup]]:
        """Which files go into bundles. A file with a plain copy at its archive
        path (an older, copy-based scheme's) keeps the per-file path, which
        settles that copy in the same read."""
        files = self.settings.files
        if not files.bundle_below:
            return eligible, []
        by_rel = {c.relpath: c for c in eligible}
        layout = self.mover.layout
        legacy = {c.relpath for c in eligible if os.path.lexists(layout.files / c.relpath)}
        self.copies_at = legacy
        small = [(c.relpath, c.identity) for c in eligible if c.relpath not in legacy]
        single, groups = bundle_groups(small, files.bundle_below, files.bundle_bytes)
        return [by_rel[rel] for rel in sorted({r for r, _ in single} | legacy)], groups

    async def _one_bundle(self, group: BundleGroup) -> None:
        """One bundle archived, each member's outcome counted and told like a
        single file's; an I/O error counts every member of it."""
        label = group.label
        totals = self.summary.files
        self.stream.emit(
            FileStep("bundle", label, "started", 0, sum(i.size for _, i in group.files))
        )
        try:
            mover = BundleMover(self.manifest, self.mover, self.walk_lane, self.workers)
            done = await mover.archive(group, cancel=self.cancel)
        except (OSError, sqlite3.Error) as err:
            if out_of_space(err):
                raise self._full(label, err) from err
            if isinstance(err, sqlite3.Error):
                raise
            totals.errors += len(group.files)
            self.quarantine += [
                problems.NewProblem(rel, "io_error", str(err)) for rel, _ in group.files
            ]
            for rel, _ in group.files:
                self.stream.emit(FileDone("archive", rel, "error", detail=f"{rel}: {err}"))
            self.stream.emit(FileDone("bundle", label, "error", detail=str(err)))
            return
        for m in done.members:
            self._member(m)
        where = self.mover.layout.rel(done.bundle) if done.bundle else "nothing placed"
        self.stream.emit(
            FileDone("bundle", label, "placed" if done.bundle else "none", detail=where)
        )

    def _member(self, m: MemberDone) -> None:
        totals = self.summary.files
        if m.result == "archived" and m.entry is not None and m.unlinked is not None:
            self._archived(m.relpath, Archived(m.entry, m.unlinked, detail=m.detail, errno=m.errno))
        elif m.result == "changed":
            totals.changed += 1
            self.stream.emit(FileDone("archive", m.relpath, "changed", detail=m.detail))
        elif m.result == "error":
            totals.errors += 1
            self.quarantine.append(problems.NewProblem(m.relpath, "io_error", m.detail))
            self.stream.emit(FileDone("archive", m.relpath, "error", detail=m.detail))
        elif m.result == "verify_failed":
            totals.verify_failed += 1
            self.quarantine.append(problems.NewProblem(m.relpath, "verify_failed", m.detail))
            self.stream.emit(FileDone("archive", m.relpath, "verify_failed", detail=m.detail))
        else:
            why = m.detail if m.detail in ("gone", "open") else "not_regular"
            totals.skip(why)
            detail = "open in another process; left live" if why == "open" else m.detail
            self.stream.emit(
                FileDone(
                    "archive", m.relpath, "gone" if why == "gone" else "skipped", detail=detail
                )
            )

    async def _scan(self) -> list[Candidate]:
        """The eligible files (restored files in their grace left out), counted."""
        now = self.setup.clock()
        in_grace = await self.manifest.relpaths_in_grace(now)
        scan = await asyncio.to_thread(
            scan_files, self.settings, now_ns=now * NS_PER_MS, in_grace=in_grace
        )
        if self.pending:
            # Archived already, their removal refused: archiving them again would
            # only add a copy each pass.
            scan.eligible = [c for c in scan.eligible if c.relpath not in self.pending]
        totals = self.summary.files
        totals.skipped = {k: int(v) for k, v in scan.skipped.items()}
        totals.eligible = len(scan.eligible)
        totals.eligible_bytes = sum(c.identity.size for c in scan.eligible)
        self.stream.emit(Phase("files", totals.eligible, totals.eligible_bytes))
        return scan.eligible

    async def _one_file(self, cand: Candidate) -> None:
        """One file archived, its outcome counted and told; a file that cannot be
        archived is counted, never raised."""
        rel, size, totals = cand.relpath, cand.identity.size, self.summary.files
        self.stream.emit(FileStep("archive", rel, "started", 0, size))
        progress = thread_progress(self.stream, "archive", rel, size)
        try:
            # Nothing was at files/<relpath>: nothing can be there now but what
            # this pass writes, whose names are never a legacy copy's.
            absent = self.copies_at is not None and rel not in self.copies_at
            result = await self.mover.archive(
                rel, cancel=self.cancel, progress=progress, no_legacy_copy=absent
            )
        except Unarchivable as err:
            totals.skip("not_regular")
            self.stream.emit(FileDone("archive", rel, "skipped", detail=str(err)))
        except InUse as err:
            totals.skip("open")
            self.stream.emit(FileDone("archive", rel, "skipped", detail=str(err)))
        except FileNotFoundError:
            totals.skip("gone")
            self.stream.emit(FileDone("archive", rel, "gone", detail="removed since the scan"))
        except (OSError, sqlite3.Error) as err:
            if out_of_space(err):
                raise self._full(rel, err) from err
            if isinstance(err, sqlite3.Error):
                raise  # the manifest itself: the pass cannot go on
            totals.errors += 1
            self.quarantine.append(problems.NewProblem(rel, "io_error", str(err)))
            self.stream.emit(FileDone("archive", rel, "error", detail=f"{rel}: {err}"))
        else:
            if isinstance(result, Archived):
                self._archived(rel, result)
            elif result.kind == "changed":
                totals.changed += 1
                self.stream.emit(FileDone("archive", rel, "changed", detail=result.detail))
            else:
                totals.verify_failed += 1
                self.quarantine.append(problems.NewProblem(rel, "verify_failed", result.detail))
                self.stream.emit(FileDone("archive", rel, "verify_failed", detail=result.detail))

    def _full(self, rel: str, err: OSError | sqlite3.Error) -> OutOfSpace:
        """The filesystem under the partial (or the manifest) is full. What the
        rest of the backlog still needs: its bytes at the ratio so far."""
        totals = self.summary.files
        self.stream.emit(FileDone("archive", rel, "error", detail=str(err)))
        ratio = totals.bytes_out / totals.bytes_in if totals.bytes_in else 0.3
        left = max(0, totals.eligible_bytes - totals.bytes_in)
        if isinstance(err, sqlite3.Error):
            where, doing = self.manifest.path, f"recording the entry of {rel} in"
        else:
            where = Path(err.filename) if err.filename else self.mover.layout.files
            doing = f"archiving {rel} to"
        return OutOfSpace(where, err, doing=doing, needed=int(left * ratio))

    def _archived(self, rel: str, result: Archived) -> None:
        e, totals = result.entry, self.summary.files
        totals.archived += 1
        totals.bytes_in += e.bytes
        totals.bytes_out += e.gz_bytes
        totals.legacy_removed += result.legacy == "removed"
        totals.legacy_kept += result.legacy == "kept"
        if result.unlinked == "unsettled":
            kind = problems.unlink_kind(result.errno)
            self.quarantine.append(problems.NewProblem(rel, kind, result.detail))
            self.stream.notice("warning", f"{rel}: {result.detail}")
        elif result.unlinked == "open":
            what = "archived; kept live: another process opened it (removed once it is closed)"
            self.stream.notice("info", f"{rel}: {what}")
        elif result.unlinked == "displaced":
            what = "a newer file took its name while it was checked; the older file is kept aside"
            self.quarantine.append(problems.NewProblem(rel, "displaced", what))
            self.stream.notice("warning", f"{rel}: {what}")
        elif result.unlinked in ("removed", "gone"):
            self.settled.append(rel)
        if result.legacy == "kept" and result.unlinked != "unsettled":
            self.stream.notice("warning", result.detail)
        self.stream.emit(FileDone("archive", rel, "archived", e.bytes, e.gz_bytes, result.unlinked))

    async def _events(self) -> None:
        self.stream.emit(Phase("events", 0))
        report = await move_events(
            self.settings,
            self.mover.layout.events,
            manifest=self.manifest,
            now_ms=self.setup.clock(),
            cancel=self.cancel,
            step=self.setup.step,
            on_batch=self.stream.emit,
            on_checkpoint=self.stream.emit,
        )
        self.summary.events = EventsMoved.of(report)
        if report.cancelled:
            raise Cancelled("cancelled during the event phase")
        problems = self.summary.problems
        if report.conflicts_total:
            problems.append(f"{report.conflicts_total} event rows conflict with the archive")
        for month, why in report.months_refused.items():
            problems.append(f"event month {month} refused: {why}")
        if report.locked_rows:
            problems.append(
                f"{report.locked_rows} archived rows are still live: the state DB stayed locked; "
                "the next pass deletes them"
            )
