"""The core API: one ``Archiver`` per config, driven alike by the console, the CLI
and the scheduler.

    status()            what is archived, who holds the lock, the last pass
    plan()              the backlog and what recovery would do; writes nothing
    run_pass()          recovery, then the files, then the event rows
    recover()           recovery alone
    adopt(gzs | None)   settle orphan gzips (all, or the ones named)
    sweep()             remove leftover partials and restore partials
    restore(sel, to)    files back from the archive (restore.py)
    restore_events(…)   event rows back into live (events/restore.py)
    verify(…)           re-read gzips against the manifest (verify.py)
    rebuild_manifest()  a manifest from the gzips alone (rebuild.py)
    checkpoint()        one live WAL checkpoint now

Invariants:
- Every mutating call holds the archive lock for its whole length; ``status`` and
  ``plan`` never take it and never write.
- Every call reports through ``stream`` as it goes (started, phases, each file's
  steps and result, batches, orphans, checkpoints, finished) and can be cancelled
  through its ``CancelToken``: work stops at the next safe point (between files or
  batches, or mid-file with its partial removed) and what is left is exactly what
  recovery handles.
- A pass never stops for one bad file: each file's outcome is counted and
  reported; the pass's status says whether anything needs attention.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import audit
from .attach import AttachServer, socket_path
from .cancel import Cancelled, CancelToken
from .codec import Codec
from .config import Settings
from .events.checkpoint import CheckpointResult, LiveCheckpointer, record_checkpoint
from .events.dbmove import BatchDone, MoveReport, move_events
from .events.eventschema import EventsError
from .events.restore import EventsRestoreReport, restore_events
from .files.filemove import Archived, FileMover
from .files.gzfile import Unarchivable
from .files.rebuild import RebuildReport, rebuild_manifest
from .files.recovery import Orphan, Recovery, RecoveryReport, clear_restore_intents
from .files.restore import (
    RestoreReport,
    Selection,
    check_restore_root,
    restore_files,
    select_entries,
)
from .files.scan import Candidate, ScanError, scan_files
from .files.verify import VerifyReport, verify_entries
from .fsutil import unlink_if_present
from .layout import Layout
from .lock import ArchiveLock, Holder, LockHeld, read_holder
from .manifest import SCHEMA_VERSION, Entry, Manifest, ManifestError, PassRecord, now_ms
from .plan import Plan, make_plan
from .ratelimit import RateLimiter
from .steps import StepHook, StepInfo, StepName, no_step
from .stream import (
    BatchMoved,
    CheckpointRan,
    EventStream,
    FileDone,
    FileStep,
    Finished,
    OrphanSeen,
    Phase,
    Started,
    thread_progress,
)

PassStatus = Literal["ok", "failed", "cancelled"]


@dataclass
class Session:
    """One mutating action under the lock: its mover, and how it ended (for the
    audit; an exception settles it on its own)."""

    mover: FileMover
    outcome: str = "ok"
    detail: str | None = None

    def settle(self, outcome: str, detail: str | None = None) -> None:
        self.outcome, self.detail = outcome, detail


class ModeOff(Exception):
    """``mode = "off"``: passes are disabled by the config."""


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


@dataclass
class PassSummary:
    mode: str
    status: PassStatus = "ok"
    pass_id: int | None = None
    started_at: int = 0
    seconds: float = 0.0
    recovery: dict[str, int] = field(default_factory=dict)
    files: FileTotals = field(default_factory=FileTotals)
    events: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def recovery_counts(report: RecoveryReport) -> dict[str, int]:
    outcomes = Counter(o.outcome for o in report.orphans)
    return {
        "partials_removed": len(report.partials),
        "restore_partials_removed": len(report.restore_partials),
        "intents_cleared": report.intents,
        "orphans_found": outcomes["found"],
        "orphans_adopted": outcomes["adopted"],
        "orphans_stale": outcomes["stale"],
        "orphans_corrupt": outcomes["corrupt"],
        "orphans_changed": outcomes["changed"],
        "orphans_unreadable": outcomes["error"],
        "missing": len(report.missing),
        "sources_unlinked": len(report.sources_unlinked),
        "passes_interrupted": len(report.interrupted),
    }


def events_summary(report: MoveReport) -> dict[str, Any]:
    return {
        "moved": report.moved,
        "already_archived": report.already_archived,
        "kept_changed": report.kept_changed,
        "conflicts": [asdict(c) for c in report.conflicts],
        "unparsable": report.unparsable,
        "held": report.held,
        "months": sorted(report.months),
        "months_refused": report.months_refused,
        "locked_rows": report.locked_rows,
        "batches": report.batches,
        "wal_peak": report.wal_peak,
        "checkpointer": report.checkpointer,
        "checkpoints": report.checkpoints,
    }


@dataclass(frozen=True)
class Status:
    config: Path | None
    live_root: Path
    archive_root: Path
    mode: str
    holder: Holder | None
    holder_alive: bool
    schema_version: int | None
    entries: dict[str, tuple[int, int, int]]  # status -> (entries, bytes, gz bytes)
    verify_failures: int
    restore_intents: int
    last_passes: list[PassRecord]
    attention: list[Entry]  # stale, missing or failed verify (the first 500)

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": str(self.config) if self.config else None,
            "live_root": str(self.live_root),
            "archive_root": str(self.archive_root),
            "mode": self.mode,
            "lock": ({**asdict(self.holder), "alive": self.holder_alive} if self.holder else None),
            "schema_version": self.schema_version,
            "entries": {
                s: {"entries": n, "bytes": b, "gz_bytes": g}
                for s, (n, b, g) in self.entries.items()
            },
            "verify_failures": self.verify_failures,
            "restore_intents": self.restore_intents,
            "last_passes": [asdict(p) for p in self.last_passes],
            "attention": [
                {
                    "id": e.id,
                    "relpath": e.relpath,
                    "gz_path": e.gz_path,
                    "status": e.status,
                    "verify_error": e.verify_error,
                }
                for e in self.attention
            ],
        }


@dataclass
class PlanReport:
    plan: Plan
    recovery: RecoveryReport

    def to_dict(self, layout: Layout) -> dict[str, Any]:
        p = self.plan
        events = None
        if p.events is not None:
            events = {
                "rows": p.events.rows,
                "approx_bytes": p.events.approx_bytes,
                "unparsable": p.events.unparsable,
                "held": p.events.held,
                "index": p.events.index,
                "note": p.events.note,
                "months": [asdict(m) for m in p.events.months],
            }
        rec = self.recovery
        return {
            "files": {
                "eligible": p.files,
                "bytes": p.bytes,
                "skipped": dict(p.skipped),
                "units": [asdict(u) for u in p.units],
            },
            "events": events,
            "events_error": p.events_error,
            "recovery": {
                "partials": [layout.rel(x) for x in rec.partials],
                "restore_partials": [str(x) for x in rec.restore_partials],
                "orphans": [{"gz": layout.rel(o.gz), "relpath": o.relpath} for o in rec.orphans],
                "missing": [e.gz_path for e in rec.missing],
                "sources_to_unlink": rec.sources_unlinked,
                "passes_interrupted": rec.interrupted,
                "busy": rec.busy,
                "in_flight": rec.in_flight,
            },
        }


class Archiver:
    def __init__(
        self,
        settings: Settings,
        *,
        stream: EventStream | None = None,
        origin: str = "cli",
        step: StepHook = no_step,
        wait: float = 0.0,
        clock: Callable[[], int] = now_ms,
        serve_events: bool = True,
        workers_per_core: int = 2,
    ) -> None:
        self.settings = settings
        self.serve_events = serve_events  # attached consoles can watch and stop
        self.clock = clock  # ms since the epoch: what "old enough" is measured against
        self.layout = Layout(settings.archive_root)
        self.stream = stream or EventStream()
        self.origin = origin
        self.user_step = step
        self.wait = wait
        self.codec = Codec(settings.gzip.engine, settings.gzip.level)
        self.limiter = RateLimiter(settings.io.bytes_per_s)
        # By default two files per core: while one waits on an fsync or the
        # manifest commit, another compresses (docs/performance.md: +15-20 % on
        # many small files, the same on big ones). The console asks for one.
        self.workers = settings.io.workers or workers_per_core * (os.cpu_count() or 1)

    # the lock and the manifest ------------------------------------------------

    @asynccontextmanager
    async def session(
        self,
        command: str,
        args: dict[str, Any] | None = None,
        cancel: CancelToken | None = None,
    ) -> AsyncIterator[Session]:
        """The lock held, the manifest open, a mover ready; the action audited from
        start to end, and its events served to attached consoles meanwhile (their
        "stop" trips ``cancel``)."""
        args = args or {}
        try:
            lock = await ArchiveLock.acquire(
                self.settings.archive_root, f"coldkeep {command} ({self.origin})", wait=self.wait
            )
        except LockHeld as err:
            await self._audit_refusal(command, args, str(err))
            raise
        try:
            async with await Manifest.open(self.layout.manifest) as manifest:
                audit_id = await audit.begin(
                    manifest, at=self.clock(), origin=self.origin, action=command, args=args
                )
                mover = self._mover(manifest, step=self._step)
                current = Session(mover)
                server = await self._serve(lock, command, cancel)
                try:
                    yield current
                except Cancelled:
                    current.outcome = "cancelled"
                    raise
                except BaseException as err:
                    current.outcome, current.detail = "error", f"{type(err).__name__}: {err}"
                    raise
                finally:
                    if server is not None:
                        await server.close()
                    await asyncio.shield(
                        audit.end(manifest, audit_id, current.outcome, current.detail)
                    )
        finally:
            lock.release()

    async def _serve(
        self, lock: ArchiveLock, command: str, cancel: CancelToken | None
    ) -> AttachServer | None:
        if not self.serve_events:
            return None
        hello = {**asdict(lock.holder), "operation": command}
        server = AttachServer(
            socket_path(self.settings.archive_root),
            self.stream,
            hello,
            on_stop=(cancel or CancelToken()).cancel,
        )
        try:
            await server.start()
        except OSError as err:  # attach is a convenience: its failure never stops the work
            self.stream.notice("warning", f"cannot serve events for attaching consoles: {err}")
            return None
        return server

    def _finish(
        self, current: Session, operation: str, status: PassStatus, summary: dict[str, Any]
    ) -> None:
        """The end of an operation: told to the stream, and to the audit."""
        current.settle(status, json.dumps(summary, sort_keys=True, default=str)[:2000])
        self.stream.emit(Finished(operation, status, summary))

    async def _audit_refusal(self, command: str, args: dict[str, Any], why: str) -> None:
        if not await asyncio.to_thread(self.layout.manifest.exists):
            return
        try:
            async with await Manifest.open(self.layout.manifest) as manifest:
                await audit.record(
                    manifest,
                    at=self.clock(),
                    origin=self.origin,
                    action=command,
                    args=args,
                    outcome="refused",
                    detail=why,
                )
        except (ManifestError, sqlite3.Error) as err:
            self.stream.notice("warning", f"could not record the refusal in the audit: {err}")

    def _mover(self, manifest: Manifest, step: StepHook = no_step) -> FileMover:
        return FileMover(
            self.settings.live_root,
            self.layout,
            manifest,
            self.codec,
            self.limiter,
            step=step,
            clock=self.clock,
        )

    async def _step(self, name: StepName, info: StepInfo) -> None:
        src = info.get("src") or info.get("target")
        if isinstance(src, Path):
            op = "restore" if "target" in info else "archive"
            self.stream.emit(FileStep(op, self._rel(src), name, 0, 0))
        await self.user_step(name, info)

    def _rel(self, path: Path) -> str:
        # String work, not PurePath.relative_to: this runs for every step of
        # every file on the event loop (~50 µs each with pathlib).
        full, root = str(path), str(self.settings.live_root).rstrip(os.sep) + os.sep
        return full[len(root) :] if full.startswith(root) else full

    # read-only ---------------------------------------------------------------

    async def _readonly_manifest(self) -> Manifest | None:
        try:
            return await Manifest.open(self.layout.manifest, readonly=True)
        except ManifestError:
            if not await asyncio.to_thread(self.layout.manifest.exists):
                return None
            raise

    async def status(self) -> Status:
        holder = await asyncio.to_thread(read_holder, self.layout.lock)
        manifest = await self._readonly_manifest()
        counts: dict[str, tuple[int, int, int]] = {}
        failures = intents = 0
        passes: list[PassRecord] = []
        attention: list[Entry] = []
        if manifest is not None:
            async with manifest:
                counts = await manifest.status_counts()
                attention = await manifest.entries_needing_attention(limit=500)
                failures = await manifest.verify_failure_count()
                intents = len(await manifest.restore_intents())
                passes = await manifest.passes(5)
        return Status(
            self.settings.config_path,
            self.settings.live_root,
            self.settings.archive_root,
            self.settings.mode,
            holder,
            holder.alive if holder else False,
            SCHEMA_VERSION if manifest is not None else None,
            counts,
            failures,
            intents,
            passes,
            attention,
        )

    async def select(self, selection: Selection) -> list[Entry]:
        """The entries a restore of ``selection`` would take (read-only, no lock)."""
        manifest = await self._readonly_manifest()
        if manifest is None:
            return []
        async with manifest:
            return await select_entries(manifest, selection)

    async def plan(self) -> PlanReport:
        """The backlog, and what recovery would settle; nothing is written."""
        async with await self._manifest_or_empty() as manifest:
            plan = await make_plan(self.settings, manifest, now_ms=self.clock())
            return PlanReport(plan, await self._recovery_scan(manifest))

    async def backlog(self) -> Plan:
        """The backlog alone: cheap to recount, even on a huge archive."""
        async with await self._manifest_or_empty() as manifest:
            return await make_plan(self.settings, manifest, now_ms=self.clock())

    async def recovery_scan(self) -> RecoveryReport:
        """What recovery would settle (it walks the archive: slower on a big one)."""
        async with await self._manifest_or_empty() as manifest:
            return await self._recovery_scan(manifest)

    async def _manifest_or_empty(self) -> Manifest:
        # No manifest yet: an empty one in memory, so every gzip shows as an orphan.
        return await self._readonly_manifest() or await Manifest.open(Path(":memory:"))

    async def _recovery_scan(self, manifest: Manifest) -> RecoveryReport:
        # The holder is read before and after the walk: one that took the lock
        # during it, or finished during it, may have partials in it.
        before = await asyncio.to_thread(read_holder, self.layout.lock)
        report = await Recovery(self._mover(manifest)).scan()
        after = await asyncio.to_thread(read_holder, self.layout.lock)
        busy = [h for h in (after, before) if h is not None and h.alive]
        if busy:
            report.set_aside_in_flight(busy[0].describe())
        return report

    # mutating ----------------------------------------------------------------

    async def recover(self, cancel: CancelToken | None = None) -> RecoveryReport:
        async with self.session("recover", cancel=cancel) as current:
            mover = current.mover
            self.stream.emit(Started("recover"))
            report = await self._recover(mover, cancel)
            status: PassStatus = "failed" if report.errors or report.missing else "ok"
            self._finish(current, "recover", status, recovery_counts(report))
            return report

    async def _recover(
        self, mover: FileMover, cancel: CancelToken | None, current_pass: int | None = None
    ) -> RecoveryReport:
        self.stream.emit(Phase("recovery", 0))
        report = await Recovery(mover, cancel, current_pass=current_pass).run()
        for pass_id in report.interrupted:
            self.stream.notice(
                "warning", f"pass {pass_id} died with its process; recorded as interrupted"
            )
        for p in report.partials:
            self.stream.emit(OrphanSeen(self.layout.rel(p), "", "partial_removed"))
        for o in report.orphans:
            self._emit_orphan(o)
        for e in report.missing:
            self.stream.notice(
                "error",
                f"entry {e.id} ({e.relpath}): its gzip {e.gz_path} is MISSING from the archive",
            )
        return report

    def _emit_orphan(self, o: Orphan) -> None:
        self.stream.emit(OrphanSeen(self.layout.rel(o.gz), o.relpath, o.outcome, o.detail))

    async def adopt(
        self, gz_paths: list[str] | None = None, cancel: CancelToken | None = None
    ) -> list[Orphan]:
        """Settle orphan gzips (paths relative to archive_root; None: all)."""
        async with self.session("adopt", {"gz": gz_paths or "all"}, cancel) as current:
            mover = current.mover
            self.stream.emit(Started("adopt"))
            recovery = Recovery(mover, cancel)
            found = {self.layout.rel(o.gz): o.gz for o in (await recovery.scan()).orphans}
            wanted = list(found) if gz_paths is None else gz_paths
            done: list[Orphan] = []
            for rel in wanted:
                if rel not in found:
                    self.stream.notice("warning", f"{rel} is not an orphan gzip; left alone")
                    continue
                orphan = await recovery.settle_orphan(found[rel])
                self._emit_orphan(orphan)
                done.append(orphan)
            failed = any(o.outcome == "error" for o in done) or len(done) < len(wanted)
            counts: dict[str, Any] = {o: n for o, n in Counter(o.outcome for o in done).items()}
            self._finish(current, "adopt", "failed" if failed else "ok", counts)
            return done

    async def sweep(self) -> list[Path]:
        """Remove leftover ``.partial`` files and intent-named restore partials."""
        async with self.session("sweep") as current:
            mover = current.mover
            self.stream.emit(Started("sweep"))
            report = await Recovery(mover).scan()
            removed: list[Path] = []
            for p in report.partials:
                if await asyncio.to_thread(unlink_if_present, p):
                    removed.append(p)
            removed += (await clear_restore_intents(mover.manifest))[0]
            self._finish(current, "sweep", "ok", {"removed": [str(p) for p in removed]})
            return removed

    async def checkpoint(self) -> CheckpointResult:
        """One live WAL checkpoint now (PASSIVE unless configured otherwise)."""
        db = self.settings.state_db
        if db is None:
            raise EventsError("no state_db is configured: there is nothing to checkpoint")
        async with self.session("checkpoint") as current:
            mover = current.mover
            results: list[CheckpointResult] = []
            done = asyncio.Event()
            loop = asyncio.get_running_loop()

            def arrived(r: CheckpointResult) -> None:
                results.append(r)
                loop.call_soon_threadsafe(done.set)

            cfg = self.settings.events
            cp = await asyncio.to_thread(
                LiveCheckpointer,
                db,
                arrived,
                timeout_s=cfg.checkpoint_timeout_s,
                busy_timeout_s=cfg.busy_timeout_ms / 1000,
                mode=cfg.checkpoint_mode,
            )
            try:
                if cp.dead or not cp.request():
                    raise EventsError(cp.dead or "the checkpointer is busy")
                await done.wait()
            finally:
                await asyncio.to_thread(cp.close)
            await record_checkpoint(mover.manifest, results[0])
            self._emit_checkpoint(results[0])
            return results[0]

    def _emit_checkpoint(self, r: CheckpointResult) -> None:
        self.stream.emit(
            CheckpointRan(
                r.busy, r.log, r.checkpointed, r.ms, r.wal_before, r.wal_after, r.mode, r.error
            )
        )

    def _emit_batch(self, b: BatchDone) -> None:
        self.stream.emit(
            BatchMoved(
                b.number, b.first_id, b.last_id, b.moved, b.already, b.months, b.wal_bytes, b.locked
            )
        )

    async def restore(
        self, selection: Selection, to: Path | None = None, cancel: CancelToken | None = None
    ) -> RestoreReport:
        """Files back from the archive: to their live paths (held for hold_days),
        or under ``to``."""
        root = check_restore_root(to, self.settings.archive_root) if to else None
        args = {**asdict(selection), "to": str(root) if root else None}
        async with self.session("restore", args, cancel) as current:
            mover = current.mover
            entries = await select_entries(mover.manifest, selection)
            self.stream.emit(Started("restore", f"{len(entries)} files"))
            report = await restore_files(
                mover,
                entries,
                to=root,
                hold_days=self.settings.hold_days,
                stream=self.stream,
                cancel=cancel,
            )
            status: PassStatus = "failed" if report.failed else "ok"
            self._finish(current, "restore", status, report.counts)
            return report

    async def restore_events(
        self,
        kinds: set[str] | None = None,
        months: list[str] | None = None,
        cancel: CancelToken | None = None,
    ) -> EventsRestoreReport:
        """Event rows back into live, held for hold_days."""
        args = {"kinds": sorted(kinds or []), "months": months}
        async with self.session("restore-events", args, cancel) as current:
            mover = current.mover
            self.stream.emit(Started("restore-events"))
            report = await restore_events(
                self.settings,
                self.layout.events,
                mover.manifest,
                kinds=kinds,
                months=months,
                hold_days=self.settings.hold_days,
                cancel=cancel,
            )
            status: PassStatus = "failed" if report.conflicts else "ok"
            summary = {"restored": report.restored, "already_live": report.already_live}
            self._finish(current, "restore-events", status, summary)
            return report

    async def verify(
        self,
        sample: float | None = None,
        max_duration: float | None = None,
        cancel: CancelToken | None = None,
    ) -> VerifyReport:
        args = {"sample": sample, "max_duration": max_duration}
        async with self.session("verify", args, cancel) as current:
            mover = current.mover
            self.stream.emit(Started("verify"))
            report = await verify_entries(
                mover,
                self.stream,
                sample=sample,
                max_duration=max_duration,
                cancel=cancel,
                workers=self.workers,
            )
            summary = {"checked": report.checked, "ok": report.ok, "failed": len(report.problems)}
            self._finish(current, "verify", "failed" if report.failed else "ok", summary)
            return report

    async def rebuild_manifest(
        self, out: Path | None = None, cancel: CancelToken | None = None
    ) -> RebuildReport:
        """A new manifest from the gzips alone, at ``out`` (default: coldkeep.db,
        when there is none)."""
        target = out or self.layout.manifest
        lock = await ArchiveLock.acquire(
            self.settings.archive_root, f"coldkeep rebuild-manifest ({self.origin})", wait=self.wait
        )
        try:
            self.stream.emit(Started("rebuild-manifest"))
            report = await rebuild_manifest(
                self.layout, target, self.stream, limiter=self.limiter, cancel=cancel
            )
            status: PassStatus = "failed" if report.unreadable else "ok"
            summary = {"entries": report.entries, "unreadable": len(report.unreadable)}
            self.stream.emit(Finished("rebuild-manifest", status, summary))
            return report
        finally:
            lock.release()

    # the pass ----------------------------------------------------------------

    async def run_pass(self, cancel: CancelToken | None = None) -> PassSummary:
        """One pass as the config's mode says: ``on`` moves, ``plan`` only reports,
        ``off`` refuses."""
        mode = self.settings.mode
        if mode == "off":
            raise ModeOff(
                f'{self.settings.config_path}: mode = "off": passes are disabled '
                '(set mode = "plan" to count, or "on" to archive)'
            )
        cancel = cancel or CancelToken()
        if mode == "plan":
            return await self._plan_pass()
        async with self.session("pass", cancel=cancel) as current:
            summary = await self._pass(current.mover, cancel)
            current.settle(summary.status, "; ".join(summary.problems) or None)
            return summary

    async def _plan_pass(self) -> PassSummary:
        t0 = time.monotonic()
        summary = PassSummary("plan", started_at=self.clock())
        self.stream.emit(Started("pass", "mode plan: counting only"))
        report = await self.plan()
        if report.recovery is not None:
            summary.recovery = recovery_counts(report.recovery)
        summary.files.skipped = {k: int(v) for k, v in report.plan.skipped.items()}
        summary.files.eligible = report.plan.files
        summary.files.eligible_bytes = report.plan.bytes
        if report.plan.events is not None:
            summary.events = {"eligible_rows": report.plan.events.rows}
        summary.seconds = time.monotonic() - t0
        self.stream.emit(Finished("pass", "ok", summary.to_dict()))
        return summary

    async def _pass(self, mover: FileMover, cancel: CancelToken) -> PassSummary:
        manifest = mover.manifest
        t0 = time.monotonic()
        summary = PassSummary("on", started_at=self.clock())
        summary.pass_id = await manifest.start_pass("on", self.origin, summary.started_at)
        self.stream.emit(Started("pass", f"pass {summary.pass_id}"))
        try:
            recovery = await self._recover(mover, cancel, summary.pass_id)
            summary.recovery = recovery_counts(recovery)
            if recovery.missing:
                summary.problems.append(f"{len(recovery.missing)} entries have no gzip (missing)")
            if recovery.errors:
                summary.problems.append(f"{len(recovery.errors)} orphan gzips could not be read")
            await self._files(mover, cancel, summary)
            if self.settings.state_db is not None:
                await self._events(manifest, cancel, summary)
        except Cancelled:
            summary.status = "cancelled"
        except (ScanError, EventsError, OSError) as err:
            summary.status = "failed"
            summary.problems.append(str(err))
        finally:
            if summary.status == "ok" and summary.problems:
                summary.status = "failed"
            summary.seconds = time.monotonic() - t0
            await asyncio.shield(
                manifest.finish_pass(
                    summary.pass_id, summary.status, summary.to_dict(), self.clock()
                )
            )
            self.stream.emit(Finished("pass", summary.status, summary.to_dict()))
        return summary

    async def _files(self, mover: FileMover, cancel: CancelToken, summary: PassSummary) -> None:
        now = self.clock()
        held = await mover.manifest.held_relpaths(now)
        scan = await asyncio.to_thread(scan_files, self.settings, now_ns=now * 1_000_000, held=held)
        totals = summary.files
        totals.skipped = {k: int(v) for k, v in scan.skipped.items()}
        totals.eligible = len(scan.eligible)
        totals.eligible_bytes = sum(c.identity.size for c in scan.eligible)
        self.stream.emit(Phase("files", totals.eligible, totals.eligible_bytes))
        queue: asyncio.Queue[Candidate] = asyncio.Queue()
        for cand in scan.eligible:
            queue.put_nowait(cand)

        async def worker() -> None:
            while not queue.empty():
                cancel.check()
                cand = queue.get_nowait()
                await self._one_file(mover, cand, cancel, totals)

        tasks = [asyncio.create_task(worker()) for _ in range(min(self.workers, queue.qsize()))]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            cancel.cancel("the pass stopped")
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        if totals.verify_failed:
            summary.problems.append(f"{totals.verify_failed} files failed their verify")
        if totals.errors:
            summary.problems.append(f"{totals.errors} files could not be archived")
        if totals.legacy_kept:
            summary.problems.append(f"{totals.legacy_kept} legacy copies differ and were kept")

    async def _one_file(
        self, mover: FileMover, cand: Candidate, cancel: CancelToken, totals: FileTotals
    ) -> None:
        rel, size = cand.relpath, cand.identity.size
        self.stream.emit(FileStep("archive", rel, "started", 0, size))
        try:
            result = await mover.archive(
                rel, cancel=cancel, progress=thread_progress(self.stream, "archive", rel, size)
            )
        except Unarchivable as err:
            totals.skipped["not_regular"] = totals.skipped.get("not_regular", 0) + 1
            self.stream.emit(FileDone("archive", rel, "skipped", detail=str(err)))
            return
        except FileNotFoundError:
            totals.skipped["gone"] = totals.skipped.get("gone", 0) + 1
            self.stream.emit(FileDone("archive", rel, "gone", detail="removed since the scan"))
            return
        except OSError as err:
            totals.errors += 1
            self.stream.emit(FileDone("archive", rel, "error", detail=f"{rel}: {err}"))
            return
        if isinstance(result, Archived):
            e = result.entry
            totals.archived += 1
            totals.bytes_in += e.bytes
            totals.bytes_out += e.gz_bytes
            totals.legacy_removed += result.legacy == "removed"
            totals.legacy_kept += result.legacy == "kept"
            if result.legacy == "kept":
                self.stream.notice("warning", result.detail)
            self.stream.emit(
                FileDone("archive", rel, "archived", e.bytes, e.gz_bytes, result.unlinked)
            )
        elif result.kind == "changed":
            totals.changed += 1
            self.stream.emit(FileDone("archive", rel, "changed", detail=result.detail))
        else:
            totals.verify_failed += 1
            self.stream.emit(FileDone("archive", rel, "verify_failed", detail=result.detail))

    async def _events(self, manifest: Manifest, cancel: CancelToken, summary: PassSummary) -> None:
        self.stream.emit(Phase("events", 0))
        report = await move_events(
            self.settings,
            self.layout.events,
            manifest=manifest,
            now_ms=self.clock(),
            cancel=cancel,
            step=self.user_step,
            on_batch=self._emit_batch,
            on_checkpoint=self._emit_checkpoint,
        )
        summary.events = events_summary(report)
        if report.cancelled:
            raise Cancelled("cancelled during the event phase")
        if report.conflicts:
            summary.problems.append(f"{len(report.conflicts)} event rows conflict with the archive")
        for month, why in report.months_refused.items():
            summary.problems.append(f"event month {month} refused: {why}")
        if report.locked_rows:
            summary.problems.append(
                f"{report.locked_rows} archived rows are still live: the state DB stayed locked; "
                "the next pass deletes them"
            )
