"""The core API: one ``Archiver`` per config, driven alike by the console, the CLI
and the scheduler.

    status()            what is archived, who holds the lock, the last pass
    trends(days)        per-day bytes and backlog, passes, months, tiers (ops/trends.py)
    plan()              the backlog and what recovery would do; writes nothing
    run_pass()          recovery, then the files, then the event rows (ops/passes.py)
    recover(), adopt(gzs | None), sweep(), rebuild_manifest(): what a crash or a loss left
    restore(sel, to), thaw(sel, …), restore_thawing(sel, to, …)
                        files back from the archive, cold ones thawed first (ops/restore.py)
    find(pattern), versions(path): archived versions looked up, read-only (files/find.py)
    cat(path, version, out, expired)
                        one archived file's bytes to a stream, read-only (ops/cat.py)
    restore_events(…)   event rows back into live (ops/restore.py)
    events_query(span)  read-only SQL over every event row (events/query.py)
    verify(…)           re-read gzips against the manifest (files/verify.py)
    ship_plan(), ship(), verify_remote(…), rebuild_from_remote(), rekey_plan(), rekey(…)
                        the remote tier (ops/tier.py)
    expire_plan(), expire(): what is past its retention, deleted (ops/expire.py)
    holds(), place_hold(…), release_hold(…): legal holds (ops/holds.py)
    new_site_key()      a new key for the site's signed snapshots (ops/siteops.py)
    checkpoint()        one live WAL checkpoint now

Each mutating call is a short method over one ``session``: the archive lock, the
manifest and a file mover, the audit row, the event socket attached consoles
watch (and stop) it through; the operation's ``Started`` and ``Finished`` go
through the session's ``Operation``. The work is done by the module that owns it
(an operation of ``ops`` opens its own session through ``Sessions``); what is
here is the API, and the sessions of the operations that are one call each.

Invariants:
- Every mutating call holds the archive lock for its whole length; ``status``,
  ``plan``, ``find`` and ``versions`` never take it and never write (nor does a
  pass in mode plan).
- Every mutating call is audited from start to end (but the rebuilds: there is
  no manifest to write to, or it is the one being written); a refusal because the
  lock was held is audited too, and an exception settles the row as ``error`` (or
  ``cancelled``) on its own.
- Every call reports through ``stream`` as it goes (started, phases, each file's
  steps and result, batches, orphans, checkpoints, finished) and can be cancelled
  through its ``CancelToken``: work stops at the next safe point (between files or
  batches, or mid-file with its partial removed) and what is left is exactly what
  recovery handles.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from .base.cancel import CancelToken
from .base.codec import Codec, keep_freed_buffers
from .base.errors import UsageError
from .base.layout import Layout
from .base.lazy import lazy
from .base.ratelimit import RateLimiter
from .base.steps import StepHook, no_step
from .base.stream import EventStream
from .base.times import now_ms
from .ops.session import Operation, Session, Sessions, StepFeed
from .store.manifest import Manifest

# The modules that do the work, each imported when a method first calls it: a
# command pays at its start only for what it runs (docs/performance.md, "The
# CLI's start").
if TYPE_CHECKING:
    from .base.config import Settings
    from .base.configremote import RemoteSettings
    from .base.stream import CheckpointRan
    from .events import checkpoint, query
    from .events.restore import EventsRestoreReport
    from .files import find as finding
    from .files import recovery
    from .files.rebuild import RebuildReport
    from .files.restore import RestoreReport, Selection
    from .files.verify import VerifyReport
    from .ops import cat as cat_ops
    from .ops import expire as expire_ops
    from .ops import fleet, lake, localverify, passes, settle, siteops, tier
    from .ops import holds as holding
    from .ops import plan as plan_ops
    from .ops import restore as restoring
    from .ops import status as status_ops
    from .ops import trends as trending
    from .remote import monthvfs, rebuild
    from .remote import verify as remote_verify
    from .remote.lakebackfill import LakePlan
    from .remote.rekey import RekeyPlan, RekeyReport
    from .remote.shipplan import ShipPlan
    from .remote.shiprun import ShipReport
    from .remote.thaw import ThawPlan
    from .store import legalholds
    from .store.entries import Entry
else:
    globals().update(lazy(__package__, checkpoint="events.checkpoint", query="events.query",
        finding="files.find", recovery="files.recovery", cat_ops="ops.cat", expire_ops="ops.expire",
        fleet="ops.fleet", lake="ops.lake", localverify="ops.localverify", passes="ops.passes",
        plan_ops="ops.plan", settle="ops.settle", siteops="ops.siteops", status_ops="ops.status",
        tier="ops.tier", holding="ops.holds", restoring="ops.restore", trending="ops.trends",
        rebuild="remote.rebuild", remote_verify="remote.verify", legalholds="store.legalholds",
        monthvfs="remote.monthvfs",
    ))  # fmt: skip

__all__ = ["Archiver", "ModeOff"]


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
        self.clock = clock  # ms since the epoch: what "old enough" is measured against
        self.layout = Layout(settings.archive_root)
        self.stream = stream or EventStream()
        self.origin = origin
        self.steps = StepFeed(self.stream, settings.live_root, step)
        self.limiter = RateLimiter(settings.io.bytes_per_s)
        self.sessions = Sessions(
            settings,
            self.stream,
            self.steps,
            origin=origin,
            clock=clock,
            wait=wait,
            serve_events=serve_events,
            codec=Codec(settings.gzip.engine, settings.gzip.level),
            limiter=self.limiter,
        )
        # By default two files per core: while one waits on an fsync or the
        # manifest commit, another compresses (docs/performance.md: +15-20 % on
        # many small files, the same on big ones). The console asks for one.
        self.workers = settings.io.workers or workers_per_core * (os.cpu_count() or 1)
        # A restore waits on the disk more than it computes (each file's fsync,
        # its directory's): twice as many files in flight keep the cores busy
        # (docs/performance.md, "Restore in parallel": 7-10 % on the mix).
        self.restore_workers = settings.io.workers or 2 * self.workers
        keep_freed_buffers()

    # the session --------------------------------------------------------------

    def session(
        self,
        command: str,
        args: dict[str, Any] | None = None,
        cancel: CancelToken | None = None,
    ) -> AbstractAsyncContextManager[Session]:
        """The lock held, the manifest open, a mover ready; the action audited from
        start to end, and its events served to attached consoles meanwhile (their
        "stop" trips ``cancel``): ``ops.session.Sessions.open``."""
        return self.sessions.open(command, args, cancel)

    # read-only ---------------------------------------------------------------

    async def _manifest_or_empty(self) -> Manifest:
        # No manifest yet: an empty one in memory, so every gzip shows as an orphan.
        existing = await Manifest.open_existing(self.layout.manifest)
        return existing or await Manifest.open(Path(":memory:"))

    async def status(self) -> status_ops.Status:
        """What is archived, who holds the lock, the last passes."""
        manifest = await Manifest.open_existing(self.layout.manifest)
        return await status_ops.read_status(self.settings, self.layout, manifest)

    async def trends(self, days: int = 30) -> trending.Trends:
        """What the archive did over the last ``days`` UTC days, its last passes,
        its event months and its bytes by tier (read-only, no lock; ops/trends.py).
        A site no pass has run on gives zeros."""
        async with await self._manifest_or_empty() as manifest:
            return await trending.read_trends(
                manifest, self.layout, days=days, now_s=self.clock() // 1000
            )

    async def select(self, selection: Selection) -> list[Entry]:
        """The entries a restore of ``selection`` would take, tombstones included
        (read-only, no lock)."""
        return await restoring.select(self.sessions, selection)

    async def find(self, pattern: str) -> finding.Found:
        """Every version of every archived path ``pattern`` matches (read-only, no
        lock; files/find.py)."""
        return await finding.find(self.layout.manifest, pattern, self.settings.live_root)

    async def find_fleet(self, pattern: str) -> finding.FleetFound:
        """``find`` over every site under the ``[remote]`` prefix, from their
        manifest snapshots (cached as the fleet view caches them; ops/fleet.py)."""
        remote = self.sessions.remote()
        return await fleet.find_across(remote, fleet.fleet_cache(remote), pattern)

    async def versions(self, path: str) -> finding.Versions:
        """Every version of the archived file at ``path``, newest first (no lock)."""
        return await finding.versions(self.layout.manifest, path, self.settings.live_root)

    async def cat(self, path: str, version: str | None, out: BinaryIO,
                  cancel: CancelToken | None, expired: bool = False,
    ) -> cat_ops.CatResult:  # fmt: skip
        """One archived file's bytes (``PATH[@VERSION]``) to ``out``, checked; no lock."""
        identities = self.sessions.identities
        return await cat_ops.cat_file(
            self.settings, path, version, out, cancel, identities, expired
        )

    def events_query(
        self,
        span: query.TimeRange,
        *,
        partial: bool = False,
        as_text: bool = False,
        engine: query.Engine = "duckdb",
        remote_reads: bool = True,
    ) -> query.EventsQuery:
        """Read-only SQL over every event row, live and archived, as one table
        (events/query.py); ``open`` it in a thread: both engines block. A month only
        the remote holds is read there (remote/monthvfs.py: in place by SQLite, sealed
        ones opened with the session's identities), unless ``remote_reads`` is off."""
        self.sessions.state_db("there are no event rows to query")
        remote = self.settings.remote if remote_reads else None
        return query.EventsQuery(
            self.settings,
            span,
            partial=partial,
            as_text=as_text,
            engine=engine,
            remote=None if remote is None else lambda: _remote_months(remote, self),
        )

    async def plan(self) -> plan_ops.PlanReport:
        """The backlog, and what recovery would settle; nothing is written."""
        async with await self._manifest_or_empty() as manifest:
            backlog = await plan_ops.make_plan(self.settings, manifest, now_ms=self.clock())
            recovering = recovery.Recovery(manifest, self.sessions.mover(manifest))
            return plan_ops.PlanReport(backlog, await recovering.scan_unlocked())

    async def backlog(self) -> plan_ops.Plan:
        """The backlog alone: cheap to recount, even on a huge archive."""
        async with await self._manifest_or_empty() as manifest:
            return await plan_ops.make_plan(self.settings, manifest, now_ms=self.clock())

    async def recovery_scan(
        self, progress: recovery.ScanProgress | None = None
    ) -> recovery.RecoveryReport:
        """What recovery would settle. It walks the archive, slower on a big one:
        ``progress`` is given what was found so far as the walk goes."""
        async with await self._manifest_or_empty() as manifest:
            recovering = recovery.Recovery(manifest, self.sessions.mover(manifest))
            return await recovering.scan_unlocked(progress)

    async def ship_plan(self) -> ShipPlan:
        """What ``ship`` would send and drop now (read-only, no lock)."""
        self.sessions.remote()
        return await tier.plan(self.sessions)

    async def expire_plan(self) -> expire_ops.ExpirePlan:
        """What ``expire`` would delete now, and what holds keep (no lock)."""
        async with await self._manifest_or_empty() as manifest:
            return await expire_ops.expire_plan(self.settings, manifest, self.clock())

    async def holds(self, *, all_holds: bool = False) -> list[legalholds.Hold]:
        async with await self._manifest_or_empty() as manifest:
            return await legalholds.listing(manifest, self.clock(), all_holds=all_holds)

    # mutating ----------------------------------------------------------------

    async def run_pass(self, cancel: CancelToken | None = None) -> passes.PassSummary:
        """One pass as the config's mode says: ``on`` moves, ``plan`` only reports,
        ``off`` refuses."""
        mode = self.settings.mode
        if mode == "off":
            raise ModeOff(
                f'{self.settings.config_path}: mode = "off": passes are disabled '
                '(set mode = "plan" to count, or "on" to archive)'
            )
        if mode == "plan":  # counting only: no lock, no audit, nothing written
            op, t0, started_at = Operation("pass", self.stream), time.monotonic(), self.clock()
            op.start("mode plan: counting only")
            report = await self.plan()
            seconds = time.monotonic() - t0
            summary = passes.planned_summary(report.plan, report.recovery, started_at, seconds)
            op.finish("ok", summary.to_dict())
            return summary
        cancel = cancel or CancelToken()
        setup = passes.PassSetup(
            self.settings, self.stream, self.clock, self.origin, self.workers, self.steps.user_step
        )
        async with self.session("pass", cancel=cancel) as current:
            return await passes.Pass(setup, current, cancel).run()

    async def recover(self, cancel: CancelToken | None = None) -> recovery.RecoveryReport:
        """Recovery alone (ops/settle.py)."""
        return await settle.recover(self.sessions, cancel)

    async def adopt(
        self, gz_paths: list[str] | None = None, cancel: CancelToken | None = None
    ) -> recovery.AdoptReport:
        """Settle orphan gzips (paths relative to archive_root; None: all)."""
        return await settle.adopt(self.sessions, gz_paths, cancel)

    async def sweep(self) -> recovery.SweepReport:
        """Remove leftover ``.partial`` files, intent-named restore partials and
        the remote tier's scratch files."""
        return await settle.sweep(self.sessions)

    async def checkpoint(self) -> CheckpointRan:
        """One live WAL checkpoint now (PASSIVE unless configured otherwise); told
        to the stream as the checkpoint it is, not as an operation."""
        db = self.sessions.state_db("there is no live WAL to checkpoint")
        async with self.session("checkpoint") as current:
            return await checkpoint.checkpoint_recorded(
                db, self.settings.events, current.manifest, self.stream
            )

    async def restore(
        self, selection: Selection, to: Path | None = None, cancel: CancelToken | None = None
    ) -> RestoreReport:
        """Files back from the archive: to their live paths (left alone by passes
        for hold_days, their restore grace), or under ``to`` (ops/restore.py);
        ``io.workers`` files at a time (by default twice a pass's)."""
        return await restoring.files(self.sessions, selection, to, cancel, self.restore_workers)

    async def thaw(
        self, selection: Selection, tier: str, days: int, ask: bool = False,
        cancel: CancelToken | None = None,
    ) -> ThawPlan:  # fmt: skip
        """The cold remote objects a restore of ``selection`` needs; with ``ask``,
        thawed for ``days`` at ``tier`` (ops/restore.py)."""
        return await restoring.thaw(self.sessions, selection, tier, days, ask, cancel)

    async def restore_thawing(
        self, selection: Selection, to: Path | None, tier: str, days: int,
        cancel: CancelToken | None = None,
    ) -> RestoreReport | ThawPlan:  # fmt: skip
        """``restore --thaw``: the restore now, or by the scheduler once its
        cold objects are thawed (ops/restore.py)."""
        return await restoring.restore_thawing(
            self.sessions, selection, to, tier, days, cancel, self.restore_workers
        )

    async def restore_events(
        self,
        kinds: set[str] | None = None,
        months: list[str] | None = None,
        cancel: CancelToken | None = None,
        span: query.TimeRange | None = None,
    ) -> EventsRestoreReport:
        """Event rows back into live (of ``kinds``, in ``months``, their time
        stamps in ``span``), left alone by passes for hold_days (ops/restore.py)."""
        return await restoring.events(self.sessions, kinds, months, span, cancel)

    async def verify(
        self,
        sample: float | None = None,
        max_duration: float | None = None,
        cancel: CancelToken | None = None,
    ) -> VerifyReport:
        """The archive's gzips read again (all, or ``sample`` of them, for at
        most ``max_duration`` s) and compared with the manifest."""
        return await localverify.verify(self.sessions, sample, max_duration, cancel, self.workers)

    # the remote tier, retention and legal holds -------------------------------

    async def ship(self, cancel: CancelToken | None = None) -> ShipReport:
        """What is archived and not yet remote, to the remote tier; then local
        copies past ``keep_local_days`` dropped (ops/tier.py)."""
        return await tier.ship(self.sessions, self.sessions.remote(), cancel)

    async def lake_plan(self, within: query.TimeRange) -> LakePlan:  # no lock
        return await lake.plan(self.sessions, within)  # ops/lake.py

    async def lake_export(self, months: list[str], cancel: CancelToken | None = None) -> ShipReport:
        return await lake.export(self.sessions, self.sessions.remote(), months, cancel)

    async def rekey_plan(self) -> RekeyPlan:  # what rekey would seal again (no lock)
        return await tier.rekey_plan(self.sessions, self.sessions.remote())

    async def rekey(self, cancel: CancelToken | None = None) -> RekeyReport:
        return await tier.rekey(self.sessions, self.sessions.remote(), cancel)  # remote/rekey.py

    async def verify_remote(
        self,
        sample: float | None = None,
        cancel: CancelToken | None = None,
        deep: bool = False,
        max_duration: float | None = None,
    ) -> remote_verify.RemoteVerifyReport:
        """The remote copies read back (all, or ``sample`` of them, rotating, for
        at most ``max_duration`` s; ``deep``: sealed ones opened too); a bad one
        shipped again from its local copy."""
        remote = self.sessions.remote()
        if await self.sessions.nothing_archived():
            return remote_verify.RemoteVerifyReport(nothing_archived=True)
        return await tier.verify(self.sessions, remote, sample, cancel, deep, max_duration)

    async def expire(
        self, cancel: CancelToken | None = None, only: frozenset[str] | None = None
    ) -> expire_ops.ExpireReport:
        """Archived data past its retention deleted, locally and remotely;
        never what a hold covers (ops/expire.py). ``only``: of those, the paths
        an operator was shown and confirmed."""
        return await expire_ops.expire_archive(self.sessions, cancel, only)

    async def place_hold(
        self,
        scope: str,
        target: str,
        reason: str,
        until: int | None = None,
        *,
        ahead: bool = False,
    ) -> holding.HoldChange:
        """A legal hold placed and audited, with no lock: it goes on even while a
        pass or an expiry runs. A unit or path hold that covers nothing archived
        now is refused unless placed ``ahead`` (ops/holds.py)."""
        return await holding.place(self.sessions, scope, target, reason, until, ahead)

    async def release_hold(self, hold_id: int) -> holding.HoldChange:
        return await holding.release(self.sessions, hold_id)

    async def new_site_key(self) -> siteops.NewKey:  # the old one lost or leaked (ops/siteops.py)
        return await siteops.make_new_key(self.sessions)

    # the rebuilds: the lock, no session (no manifest to open) -------------------

    async def rebuild_from_remote(
        self, cancel: CancelToken | None = None, choice: rebuild.DrChoice | None = None
    ) -> rebuild.FromRemoteReport:
        """A lost host's manifest, event months and what is remote, from the site's
        own signed snapshots (``choice``: the site, key or snapshot named)."""
        choice = choice or rebuild.NO_CHOICE
        return await tier.rebuild(self.sessions, self.sessions.remote(), cancel, choice)

    async def remote_snapshots(
        self, choice: rebuild.DrChoice | None = None
    ) -> rebuild.SnapshotList:  # no lock
        choice = choice or rebuild.NO_CHOICE
        return await tier.snapshots(self.sessions, self.sessions.remote(), choice)

    async def rebuild_manifest(
        self, out: Path | None = None, cancel: CancelToken | None = None
    ) -> RebuildReport:
        """A new manifest from the gzips alone, at ``out`` (default: coldkeep.db,
        when there is none): ops/settle.py."""
        return await settle.rebuild(self.sessions, out, cancel)


def _remote_months(remote: RemoteSettings, archiver: Archiver) -> query.RemoteMonths:
    """The reader of remote-only months, made when a query's range holds one:
    apsw and the store's client are loaded then, not by every query."""
    cache = archiver.settings.mount.cache_dir
    return monthvfs.RemoteMonths(remote, cache, archiver.sessions.identities)
