"""The core API: one ``Archiver`` per config, driven alike by the console, the CLI
and the scheduler.

    status()            what is archived, who holds the lock, the last pass
    plan()              the backlog and what recovery would do; writes nothing
    run_pass()          recovery, then the files, then the event rows (passes.py)
    recover()           recovery alone
    adopt(gzs | None)   settle orphan gzips (all, or the ones named)
    sweep()             remove leftover partials and restore partials
    restore(sel, to)    files back from the archive (files/restore.py)
    restore_events(…)   event rows back into live (events/restore.py)
    verify(…)           re-read gzips against the manifest (files/verify.py)
    ship_plan()         what a ship would send and drop now; writes nothing
    ship()              the archive to the remote tier, local copies dropped (ship.py)
    verify_remote(…)    the remote copies read back; bad ones shipped again (remoteverify.py)
    rebuild_manifest()  a manifest from the gzips alone (files/rebuild.py)
    rebuild_from_remote()  the manifest back from the remote tier (fromremote.py)
    checkpoint()        one live WAL checkpoint now

Each mutating call is a short method over one ``session``: the archive lock, the
manifest and a file mover, the audit row, the event socket attached consoles
watch (and stop) it through; the operation's ``Started`` and ``Finished`` go
through the session's ``Operation``.

Invariants:
- Every mutating call holds the archive lock for its whole length; ``status`` and
  ``plan`` never take it and never write (nor does a pass in mode plan).
- Every mutating call is audited from start to end; a refusal because the lock
  was held is audited too, and an exception settles the row as ``error`` (or
  ``cancelled``) on its own.
- Every call reports through ``stream`` as it goes (started, phases, each file's
  steps and result, batches, orphans, checkpoints, finished) and can be cancelled
  through its ``CancelToken``: work stops at the next safe point (between files or
  batches, or mid-file with its partial removed) and what is left is exactly what
  recovery handles.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from .base.cancel import Cancelled, CancelToken
from .base.codec import Codec
from .base.config import RemoteSettings, Settings
from .base.errors import UsageError
from .base.fsutil import unlink_if_present
from .base.layout import Layout
from .base.lock import ArchiveLock
from .base.ratelimit import RateLimiter
from .base.space import OutOfSpace, ensure_reserve, out_of_space, release_reserve
from .base.steps import EXPIRE_STEPS, SHIP_STEPS, Recorder, StepHook, StepInfo, StepName, no_step
from .base.stream import CheckpointRan, EventStream, FileStep
from .base.times import now_ms
from .events.checkpoint import checkpoint_now
from .events.eventschema import EventsError
from .events.restore import EventsRestoreReport, restore_events
from .files.filemove import FileMover
from .files.orphanbundle import Orphan
from .files.rebuild import RebuildReport, rebuild_manifest
from .files.recovery import (
    AdoptReport,
    Recovery,
    RecoveryReport,
    ScanProgress,
    SweepReport,
    clear_restore_intents,
)
from .files.restore import (
    RestoreReport,
    Selection,
    check_restore_root,
    restore_files,
    select_entries,
)
from .files.verify import VerifyReport, verify_entries
from .ops.attach import AttachServer
from .ops.expire import ExpirePlan, Expirer, ExpireReport, expire_plan
from .ops.passes import (
    EventsMoved,
    EventsPlanned,
    Pass,
    PassSetup,
    PassSummary,
    emit_orphan,
    planned_summary,
    recovery_counts,
    run_recovery,
)
from .ops.plan import Plan, PlanReport, make_plan
from .ops.session import Operation, Session, locked
from .ops.status import Status, read_status
from .remote.connect import open_store
from .remote.fetch import RemoteReader, clear_scratch
from .remote.rebuild import FromRemoteReport, RemoteRebuild
from .remote.ship import Shipper, ShipPlan, ShipReport, ship_plan
from .remote.verify import RemoteVerifier, RemoteVerifyReport
from .store import audit, legalholds
from .store.checkpointlog import record_checkpoint
from .store.legalholds import Hold
from .store.manifest import Entry, Manifest, ManifestError

# The API, and the results its clients read (made where the work is done).
__all__ = [
    "Archiver",
    "EventsMoved",
    "EventsPlanned",
    "ModeOff",
    "Operation",
    "PassSummary",
    "PlanReport",
    "Session",
    "Status",
    "recovery_counts",
]


class NoRemote(UsageError):
    """An operation on the remote tier with none configured."""


class ModeOff(UsageError):
    """``mode = "off"``: passes are disabled by the config."""


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

    # the session --------------------------------------------------------------

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
        async with (
            locked(
                self.settings.archive_root,
                self._holder(command),
                wait=self.wait,
                refused=partial(self._audit_refusal, command, args),
            ) as lock,
            await Manifest.open(self.layout.manifest) as manifest,
        ):
            audit_id = await self._begin(manifest, command, args)
            mover = self._mover(manifest, step=self._hook())
            current = Session(command, self.stream, manifest=manifest, mover=mover)
            server = await self._serve(lock, command, cancel)
            try:
                yield current
            except Cancelled:
                current.outcome = "cancelled"
                raise
            except (OSError, sqlite3.Error) as err:
                if not out_of_space(err):
                    current.settle("error", f"{type(err).__name__}: {err}")
                    raise
                full = err if isinstance(err, OutOfSpace) else self._full(manifest, err)
                # Room to record the failure: the reserve goes first.
                await asyncio.to_thread(release_reserve, self.settings.archive_root)
                current.settle("failed", str(full))
                if full is err:
                    raise
                raise full from err
            except BaseException as err:
                current.settle("error", f"{type(err).__name__}: {err}")
                raise
            finally:
                if server is not None:
                    await server.close()
                await asyncio.shield(audit.end(manifest, audit_id, current.outcome, current.detail))

    async def _begin(self, manifest: Manifest, command: str, args: dict[str, Any]) -> int:
        """The audit row, then the reserve. A filesystem already full before the
        operation began is said as what it is."""
        try:
            audit_id = await audit.begin(
                manifest, at=self.clock(), origin=self.origin, action=command, args=args
            )
        except sqlite3.Error as err:
            if out_of_space(err):
                full = self._full(manifest, err)
                await asyncio.to_thread(release_reserve, self.settings.archive_root)
                raise full from err
            raise
        await asyncio.to_thread(ensure_reserve, self.settings.archive_root)
        return audit_id

    def _full(self, manifest: Manifest, err: OSError | sqlite3.Error) -> OutOfSpace:
        """A full filesystem no step of the operation named: the manifest's (a
        database write), or the path the OS error carries."""
        if isinstance(err, OSError) and err.filename:
            return OutOfSpace(Path(err.filename), err, doing="writing")
        return OutOfSpace(manifest.path, err, doing="recording in")

    def _holder(self, command: str) -> str:
        """What the lock file says about us while we hold it."""
        return f"coldkeep {command} ({self.origin})"

    async def _serve(
        self, lock: ArchiveLock, command: str, cancel: CancelToken | None
    ) -> AttachServer | None:
        if not self.serve_events:
            return None
        hello = {**asdict(lock.holder), "operation": command}
        on_stop = (cancel or CancelToken()).cancel
        return await AttachServer.serve(self.settings.archive_root, self.stream, hello, on_stop)

    async def _audit_refusal(self, command: str, args: dict[str, Any], why: str) -> None:
        try:
            await audit.record_refusal(
                self.layout.manifest,
                at=self.clock(),
                origin=self.origin,
                action=command,
                args=args,
                why=why,
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

    def _hook(self) -> StepHook:
        """Each step is recorded on the stream; with a caller's hook (a test's),
        the step also waits for it."""
        if self.user_step is no_step:
            return Recorder(self._record)
        return self._step

    async def _step(self, name: StepName, info: StepInfo) -> None:
        self._record(name, info)
        await self.user_step(name, info)

    def _record(self, name: StepName, info: StepInfo) -> None:
        src = info.get("src") or info.get("target")
        label = info.get("label")
        if isinstance(label, str):
            op = "ship" if name in SHIP_STEPS else "expire" if name in EXPIRE_STEPS else "bundle"
            self.stream.emit(FileStep(op, label, name, 0, 0))
        elif isinstance(src, Path):
            op = "restore" if "target" in info else "archive"
            self.stream.emit(FileStep(op, self._rel(src), name, 0, 0))

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
        """What is archived, who holds the lock, the last passes."""
        return await read_status(self.settings, self.layout, await self._readonly_manifest())

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

    async def recovery_scan(self, progress: ScanProgress | None = None) -> RecoveryReport:
        """What recovery would settle. It walks the archive, slower on a big one:
        ``progress`` is given what was found so far as the walk goes."""
        async with await self._manifest_or_empty() as manifest:
            return await self._recovery_scan(manifest, progress)

    async def _manifest_or_empty(self) -> Manifest:
        # No manifest yet: an empty one in memory, so every gzip shows as an orphan.
        return await self._readonly_manifest() or await Manifest.open(Path(":memory:"))

    async def _recovery_scan(
        self, manifest: Manifest, progress: ScanProgress | None = None
    ) -> RecoveryReport:
        return await Recovery(manifest, self._mover(manifest)).scan_unlocked(progress)

    # mutating ----------------------------------------------------------------

    async def run_pass(self, cancel: CancelToken | None = None) -> PassSummary:
        """One pass as the config's mode says: ``on`` moves, ``plan`` only reports,
        ``off`` refuses."""
        mode = self.settings.mode
        if mode == "off":
            raise ModeOff(
                f'{self.settings.config_path}: mode = "off": passes are disabled '
                '(set mode = "plan" to count, or "on" to archive)'
            )
        if mode == "plan":
            return await self._plan_pass()
        cancel = cancel or CancelToken()
        setup = PassSetup(
            self.settings, self.stream, self.clock, self.origin, self.workers, self.user_step
        )
        async with self.session("pass", cancel=cancel) as current:
            return await Pass(setup, current, cancel).run()

    async def _plan_pass(self) -> PassSummary:
        # Counting only: no lock, no audit, nothing written; the stream is told.
        op = Operation("pass", self.stream)
        t0, started_at = time.monotonic(), self.clock()
        op.start("mode plan: counting only")
        report = await self.plan()
        seconds = time.monotonic() - t0
        summary = planned_summary(
            report.plan, report.recovery, started_at=started_at, seconds=seconds
        )
        op.finish("ok", summary.to_dict())
        return summary

    async def recover(self, cancel: CancelToken | None = None) -> RecoveryReport:
        async with self.session("recover", cancel=cancel) as current:
            current.start()
            report = await run_recovery(current.manifest, current.mover, self.stream, cancel)
            failed = report.errors or report.missing
            current.finish("failed" if failed else "ok", recovery_counts(report))
            return report

    async def adopt(
        self, gz_paths: list[str] | None = None, cancel: CancelToken | None = None
    ) -> AdoptReport:
        """Settle orphan gzips (paths relative to archive_root; None: all)."""
        async with self.session("adopt", {"gz": gz_paths or "all"}, cancel) as current:
            current.start()
            recovery = Recovery(current.manifest, current.mover, cancel)
            found = {self.layout.rel(o.gz): o.gz for o in (await recovery.scan()).orphans}
            wanted = list(found) if gz_paths is None else gz_paths
            done: list[Orphan] = []
            for rel in wanted:
                if rel not in found:
                    self.stream.notice("warning", f"{rel} is not an orphan gzip; left alone")
                    continue
                for orphan in await recovery.settle(found[rel]):
                    emit_orphan(self.stream, self.layout, orphan)
                    done.append(orphan)
            report = AdoptReport(done, len(wanted))
            counts: dict[str, Any] = dict(Counter(o.outcome for o in done))
            current.finish("failed" if report.failed else "ok", counts)
            return report

    async def sweep(self) -> SweepReport:
        """Remove leftover ``.partial`` files, intent-named restore partials and
        the remote tier's scratch files."""
        async with self.session("sweep") as current:
            current.start()
            report = await Recovery(current.manifest, current.mover).scan()
            root = self.layout.root
            removed = [
                p
                for p in report.partials
                if await asyncio.to_thread(partial(unlink_if_present, p, root=root))
            ]
            removed += (await clear_restore_intents(current.manifest, current.mover.live_root))[0]
            removed += await asyncio.to_thread(clear_scratch, self.layout)
            current.finish("ok", {"removed": [str(p) for p in removed]})
            return SweepReport(removed)

    async def checkpoint(self) -> CheckpointRan:
        """One live WAL checkpoint now (PASSIVE unless configured otherwise); told
        to the stream as the checkpoint it is, not as an operation."""
        db = self.settings.state_db
        if db is None:
            raise EventsError("no state_db is configured: there is nothing to checkpoint")
        async with self.session("checkpoint") as current:
            result = await checkpoint_now(db, self.settings.events)
            await record_checkpoint(current.manifest, result)
            self.stream.emit(result)
            return result

    async def restore(
        self, selection: Selection, to: Path | None = None, cancel: CancelToken | None = None
    ) -> RestoreReport:
        """Files back from the archive: to their live paths (left alone by passes
        for hold_days, their restore grace), or under ``to``."""
        root = check_restore_root(to, self.settings.archive_root) if to else None
        args = {**asdict(selection), "to": str(root) if root else None}
        async with (
            self.session("restore", args, cancel) as current,
            self._remote_reader(current.manifest) as remote,
        ):
            entries = await select_entries(current.manifest, selection)
            current.start(f"{len(entries)} files")
            report = await restore_files(
                current.mover,
                entries,
                to=root,
                grace_days=self.settings.hold_days,
                stream=self.stream,
                cancel=cancel,
                remote=remote,
            )
            current.finish("failed" if report.failed else "ok", report.counts)
            return report

    async def restore_events(
        self,
        kinds: set[str] | None = None,
        months: list[str] | None = None,
        cancel: CancelToken | None = None,
    ) -> EventsRestoreReport:
        """Event rows back into live, left alone by passes for hold_days."""
        args = {"kinds": sorted(kinds or []), "months": months}
        async with self.session("restore-events", args, cancel) as current:
            current.start()
            await self._fetch_lost_months(current.manifest, cancel)
            report = await restore_events(
                self.settings,
                self.layout.events,
                current.manifest,
                kinds=kinds,
                months=months,
                grace_days=self.settings.hold_days,
                cancel=cancel,
            )
            summary = {
                "restored": report.restored,
                "already_live": report.already_live,
                "refused": report.refused,
            }
            current.finish("failed" if report.conflicts or report.refused else "ok", summary)
            return report

    async def verify(
        self,
        sample: float | None = None,
        max_duration: float | None = None,
        cancel: CancelToken | None = None,
    ) -> VerifyReport:
        args = {"sample": sample, "max_duration": max_duration}
        async with self.session("verify", args, cancel) as current:
            current.start()
            report = await verify_entries(
                current.manifest,
                current.mover,
                self.stream,
                sample=sample,
                max_duration=max_duration,
                cancel=cancel,
                workers=self.workers,
            )
            summary = {"checked": report.checked, "ok": report.ok, "failed": len(report.problems)}
            current.finish("failed" if report.failed else "ok", summary)
            return report

    def _remote(self) -> RemoteSettings:
        if self.settings.remote is None:
            where = self.settings.config_path or "coldkeep.toml"
            raise NoRemote(
                f"{where}: no [remote] is configured "
                '(add [remote] with url = "s3://bucket/prefix" or "file:///path")'
            )
        return self.settings.remote

    @asynccontextmanager
    async def _remote_reader(self, manifest: Manifest) -> AsyncIterator[RemoteReader | None]:
        """The remote tier's copies, for reading (None: no remote configured)."""
        remote = self.settings.remote
        if remote is None:
            yield None
            return
        await asyncio.to_thread(clear_scratch, self.layout)
        store = open_store(remote)
        try:
            limiter = RateLimiter(remote.bytes_per_s)
            yield RemoteReader(store, remote.site, manifest, self.layout, limiter)
        finally:
            await store.close()

    @asynccontextmanager
    async def _rebuilder(
        self, remote: RemoteSettings, cancel: CancelToken | None
    ) -> AsyncIterator[RemoteRebuild]:
        """What reads a lost archive back from the remote, its store open."""
        store = open_store(remote)
        try:
            yield RemoteRebuild(
                self.layout,
                store,
                remote.site,
                stream=self.stream,
                limiter=RateLimiter(remote.bytes_per_s),
                cancel=cancel or CancelToken(),
            )
        finally:
            await store.close()

    async def _fetch_lost_months(self, manifest: Manifest, cancel: CancelToken | None) -> None:
        """Event month databases gone from here and shipped: fetched back first."""
        remote = self.settings.remote
        if remote is None:
            return
        async with self._rebuilder(remote, cancel) as rebuild:
            fetched, problems = await rebuild.fetch_months(manifest)
        if fetched:
            self.stream.notice("info", f"{fetched} event months fetched from {remote.url}")
        for problem in problems:
            self.stream.notice("warning", problem)

    async def ship_plan(self) -> ShipPlan:
        """What ``ship`` would send and drop now (read-only, no lock)."""
        remote = self._remote()
        manifest = await self._readonly_manifest()
        if manifest is None:
            return ShipPlan(f"{remote.url}/{remote.site}", 0, 0, 0, 0, 0, remote.keep_local_days)
        async with manifest:
            return await ship_plan(self.settings, manifest, self.clock())

    async def ship(self, cancel: CancelToken | None = None) -> ShipReport:
        """What is archived and not yet remote, to the remote tier; then local
        copies past ``keep_local_days`` dropped (ship.py)."""
        remote = self._remote()
        async with self.session("ship", {"url": remote.url}, cancel) as current:
            current.start(f"to {remote.url}/{remote.site}")
            store = open_store(remote)
            try:
                report = await Shipper(
                    self.settings,
                    current.manifest,
                    store,
                    stream=self.stream,
                    step=self._hook(),
                    clock=self.clock,
                    reads=self.limiter,
                    cancel=cancel,
                ).run()
            finally:
                await store.close()
            current.finish("failed" if report.failed else "ok", report.to_dict())
            return report

    # retention and legal holds ---------------------------------------------------

    async def expire_plan(self) -> ExpirePlan:
        """What ``expire`` would delete now, and what holds keep (no lock)."""
        async with await self._manifest_or_empty() as manifest:
            return await expire_plan(self.settings, manifest, self.clock())

    async def expire(
        self, cancel: CancelToken | None = None, only: frozenset[str] | None = None
    ) -> ExpireReport:
        """Archived data past its retention deleted, locally and remotely;
        never what a hold covers (expire.py). ``only``: of those, the paths an
        operator was shown and confirmed."""
        async with self.session("expire", {}, cancel) as current:
            current.start("archived data past its retention")
            remote = self.settings.remote
            store = open_store(remote) if remote is not None else None
            try:
                report = await Expirer(
                    self.settings,
                    current.manifest,
                    store,
                    step=self._hook(),
                    clock=self.clock,
                    origin=self.origin,
                    cancel=cancel,
                    only=only,
                ).run()
            finally:
                if store is not None:
                    await store.close()
            current.finish("failed" if report.failed else "ok", report.to_dict())
            return report

    async def holds(self, *, all_holds: bool = False) -> list[Hold]:
        async with await self._manifest_or_empty() as manifest:
            return await legalholds.listing(manifest, self.clock(), all_holds=all_holds)

    async def place_hold(
        self, scope: str, target: str, reason: str, until: int | None = None
    ) -> Hold:
        """A legal hold placed and audited. No lock: a hold must go on even
        while a long pass or an expiry runs (the expiry checks each item)."""
        async with await Manifest.open(self.layout.manifest) as manifest:
            at = self.clock()
            hold = await legalholds.place(
                manifest, scope, target, reason, until=until, at=at, by=audit.who()[0]
            )
            await self._audit_hold(manifest, "hold", hold, at)
            return hold

    async def release_hold(self, hold_id: int) -> Hold:
        async with await Manifest.open(self.layout.manifest) as manifest:
            at = self.clock()
            hold = await legalholds.release(manifest, hold_id, at=at, by=audit.who()[0])
            await self._audit_hold(manifest, "hold-release", hold, at)
            return hold

    async def _audit_hold(self, manifest: Manifest, action: str, hold: Hold, at: int) -> None:
        args = {"id": hold.id, "scope": hold.scope, "target": hold.target, "until": hold.until}
        await audit.record(
            manifest,
            at=at,
            origin=self.origin,
            action=action,
            args=args,
            outcome="ok",
            detail=hold.describe(),
        )

    async def verify_remote(
        self, sample: float | None = None, cancel: CancelToken | None = None
    ) -> RemoteVerifyReport:
        """The remote copies read back (all, or ``sample`` of them, rotating);
        a bad one shipped again from its local copy where there is one."""
        remote = self._remote()
        args = {"sample": sample, "remote": True}
        async with self.session("verify", args, cancel) as current:
            current.start(f"remote copies at {remote.url}/{remote.site}")
            store = open_store(remote)
            try:
                token = cancel or CancelToken()
                manifest = current.manifest
                shipper = Shipper(
                    self.settings,
                    manifest,
                    store,
                    stream=self.stream,
                    clock=self.clock,
                    reads=self.limiter,
                    cancel=token,
                )
                verifier = RemoteVerifier(
                    manifest, store, shipper, stream=self.stream, cancel=token
                )
                report = await verifier.run(sample)
            finally:
                await store.close()
            current.finish("failed" if report.failed else "ok", report.to_dict())
            return report

    async def rebuild_from_remote(self, cancel: CancelToken | None = None) -> FromRemoteReport:
        """This site's manifest, event months and the knowledge of what is remote,
        back from the remote tier (fromremote.py): for a fresh host after the old
        one was lost. The lock, no session (there is no manifest yet)."""
        remote = self._remote()
        await asyncio.to_thread(self.layout.root.mkdir, parents=True, exist_ok=True)
        holder = self._holder("rebuild-manifest --from-remote")
        async with locked(self.settings.archive_root, holder, wait=self.wait):
            op = Operation("rebuild-manifest", self.stream)
            op.start(f"from {remote.url}/{remote.site}")
            async with self._rebuilder(remote, cancel) as rebuild:
                report = await rebuild.run(self.layout.manifest)
                if report.snapshot is None:
                    await rebuild.fetch_files(report)
                    local = await rebuild_manifest(
                        self.layout,
                        self.layout.manifest,
                        self.stream,
                        limiter=self.limiter,
                        cancel=cancel,
                    )
                    report.entries = local.entries
                    report.problems += [f"unreadable: {u}" for u in local.unreadable]
                    report.problems += [f"refused: {r}" for r in local.refused]
            op.finish("failed" if report.failed else "ok", report.to_dict())
            return report

    async def rebuild_manifest(
        self, out: Path | None = None, cancel: CancelToken | None = None
    ) -> RebuildReport:
        """A new manifest from the gzips alone, at ``out`` (default: coldkeep.db,
        when there is none). The lock, but no session: there is no manifest to
        open (or it is the one being written), so nothing is audited."""
        holder = self._holder("rebuild-manifest")
        async with locked(self.settings.archive_root, holder, wait=self.wait):
            op = Operation("rebuild-manifest", self.stream)
            op.start()
            report = await rebuild_manifest(
                self.layout,
                out or self.layout.manifest,
                self.stream,
                limiter=self.limiter,
                cancel=cancel,
            )
            summary = {
                "entries": report.entries,
                "unreadable": len(report.unreadable),
                "refused": len(report.refused),
            }
            op.finish("failed" if report.unreadable or report.refused else "ok", summary)
            return report
