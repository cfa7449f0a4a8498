"""Prometheus metrics: a site's state, read from its config and its manifest, as
gauges and counters (docs/operations.md, "Metrics", says what each one means).

- ``read_site`` reads everything once, on the event loop, into an immutable
  ``Snapshot``: it reuses what ``coldkeep status`` (``read_status``), the plan
  (``make_plan``) and the job runner (``sched.jobs``) read, and runs no query of
  its own. The manifest is opened read-only and the lock is never taken.
- ``SnapshotCollector`` builds the metric families at each scrape from the
  snapshot it was given last. A scrape may come from any thread (the HTTP
  server's): it never touches a manifest, and it reads the published state once,
  so it sees one snapshot whole while the loop publishes the next.
- ``Publisher`` keeps that snapshot fresh inside ``coldkeep run``: every
  ``every_s``, and soon after a job ends. The backlog (a walk of the live tree)
  is recounted at most every ``backlog_every_s``, and after each pass.
- ``write_textfile`` replaces node_exporter's textfile atomically and durably.

Each family group is one function of a ``Snapshot`` (``GROUPS``): a new group is
a field of the snapshot and one more function.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from ..base.config import Settings
from ..base.configjobs import JOB_NAMES
from ..base.durable import fsync
from ..base.fsutil import fsync_dir
from ..base.ioerror import naming
from ..base.layout import Layout
from ..base.times import DAY_MS, now_ms
from ..base.version import version
from ..files.scan import ScanError
from ..ops.plan import make_plan
from ..ops.status import Status, read_status
from ..store import audit, expiry, legalholds
from ..store.connection import ManifestError
from ..store.jobruns import JobRun, last_runs, latest_finished, run_counts
from ..store.manifest import Manifest
from .daemon import job_names

# What a read can fail with that says nothing about the metrics code itself: the
# manifest or the live database unreadable, the live tree not walkable.
READ_ERRORS = (ManifestError, ScanError, sqlite3.Error, OSError)


@dataclass(frozen=True)
class JobFacts:
    last_ok_ms: int | None  # the last successful run's start
    last_duration_s: float | None  # the last ended run's, its wait for a turn left out
    runs: Mapping[str, int]  # status -> ended runs the audit still holds


@dataclass(frozen=True)
class Backlog:
    counted_at: float  # seconds since the epoch
    files: int
    bytes: int
    event_rows: int | None  # None: no live database, or it could not be read


@dataclass(frozen=True)
class Snapshot:
    at: float  # seconds since the epoch
    jobs: Mapping[str, JobFacts]
    status: Status
    backlog: Backlog
    wal_bytes: int | None  # None: no live database configured
    holds: int = 0  # legal holds in force
    expired_months: int = 0  # event months expired (their tombstones)
    archived_24h: tuple[int, int, int] = (0, 0, 0)  # entries, bytes, gz bytes archived


async def read_site(settings: Settings, *, backlog: Backlog | None = None) -> Snapshot:
    """Everything the metrics say, read once. ``backlog``: a recent count to reuse
    (None: the live tree is walked and the live database counted now)."""
    layout = Layout(settings.archive_root)
    manifest = await Manifest.open_existing(layout.manifest)
    async with contextlib.AsyncExitStack() as on_error:
        if manifest is not None:
            on_error.push_async_callback(manifest.close)
        jobs = await _jobs(settings, manifest)
        holds, months = await _lifecycle(manifest)
        recent = await _archived_24h(manifest)
        if backlog is None:
            plan = await make_plan(settings, manifest)
            rows = plan.events.rows if plan.events is not None else None
            backlog = Backlog(time.time(), plan.files, plan.bytes, rows)
        wal = None
        if settings.state_db is not None:
            wal = await asyncio.to_thread(_size, Path(f"{settings.state_db}-wal"))
        on_error.pop_all()  # read_status closes the manifest, whatever happens in it
    status = await read_status(settings, layout, manifest)
    return Snapshot(time.time(), jobs, status, backlog, wal, holds, months, recent)


async def _archived_24h(manifest: Manifest | None) -> tuple[int, int, int]:
    """Entries, bytes and gz bytes archived in the last 24 hours (a range of the
    archived_at index)."""
    if manifest is None:
        return 0, 0, 0
    now = now_ms()
    return await manifest.archived_between(now - DAY_MS, now + 1)


async def _lifecycle(manifest: Manifest | None) -> tuple[int, int]:
    """Legal holds in force, and event months expired."""
    if manifest is None:
        return 0, 0
    holds = await legalholds.listing(manifest, now_ms())
    return len(holds), await expiry.month_count(manifest)


async def _jobs(settings: Settings, manifest: Manifest | None) -> dict[str, JobFacts]:
    # The jobs this config runs, and any job the audit remembers (one since
    # disabled keeps its history).
    names = {n for n, j in settings.jobs.jobs.items() if j.enabled} & job_names(settings)
    if manifest is None:
        return {n: JobFacts(None, None, {}) for n in sorted(names)}
    runs_ok = await last_runs(manifest)
    # A job's success, or the same action run by hand: the CLI from cron or a
    # systemd timer, the console (the audit records every one).
    audited = {a: at for a, at in (await audit.last_ok(manifest)).items() if a in JOB_NAMES}
    last_ok = {
        n: max(runs_ok.get(n, 0), audited.get(n, 0)) for n in runs_ok.keys() | audited.keys()
    }
    finished = await latest_finished(manifest)
    counts = await run_counts(manifest)
    names |= last_ok.keys() | finished.keys() | {job for job, _ in counts}
    return {
        n: JobFacts(
            last_ok.get(n),
            _run_seconds(finished[n]) if n in finished else None,
            {status: k for (job, status), k in counts.items() if job == n},
        )
        for n in sorted(names)
    }


def _run_seconds(run: JobRun) -> float:
    assert run.ended_at is not None
    waited = float(run.summary.get("waited_s", 0.0))
    return max((run.ended_at - run.started_at) / 1000 - waited, 0.0)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


# the families -------------------------------------------------------------------


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def job_families(s: Snapshot) -> Iterator[Metric]:
    last_ok = GaugeMetricFamily(
        "coldkeep_job_last_success_timestamp_seconds",
        "When the job's last successful run started (0: it never succeeded).",
        labels=["job"],
    )
    duration = GaugeMetricFamily(
        "coldkeep_job_last_duration_seconds",
        "How long the job's last ended run took, however it ended (its wait for "
        "another job's turn left out).",
        labels=["job"],
    )
    runs = CounterMetricFamily(
        "coldkeep_job_runs",
        "Ended runs of the job by outcome, counted in the retained job_runs audit "
        "(pruned by [jobs] retention_days/retention_rows: a prune lowers it).",
        labels=["job", "outcome"],
    )
    for name, job in s.jobs.items():
        last_ok.add_metric([name], (job.last_ok_ms or 0) / 1000)
        if job.last_duration_s is not None:
            duration.add_metric([name], job.last_duration_s)
        for outcome, n in sorted(job.runs.items()):
            runs.add_metric([name, outcome], n)
    yield from (last_ok, duration, runs)


def backlog_families(s: Snapshot) -> Iterator[Metric]:
    b = s.backlog
    yield _gauge(
        "coldkeep_backlog_files", "Live files eligible for archiving, not yet archived.", b.files
    )
    yield _gauge(
        "coldkeep_backlog_bytes", "The size of the live files eligible for archiving.", b.bytes
    )
    if b.event_rows is not None:
        yield _gauge(
            "coldkeep_backlog_event_rows",
            "Live event rows eligible for archiving, not yet moved.",
            b.event_rows,
        )
    yield _gauge(
        "coldkeep_backlog_timestamp_seconds",
        "When the backlog was counted (it is recounted less often than the rest).",
        b.counted_at,
    )


def activity_families(s: Snapshot) -> Iterator[Metric]:
    files, size, gz_size = s.archived_24h
    for name, doc, value in (
        ("coldkeep_archived_24h_files", "Files archived in the last 24 hours.", files),
        ("coldkeep_archived_24h_bytes", "Their original size.", size),
        ("coldkeep_archived_24h_gz_bytes", "Their compressed size.", gz_size),
    ):
        yield _gauge(name, doc, value)
    # The pass log has every pass, however it was started (the job's duration
    # has only the scheduler's).
    last = next((p for p in s.status.last_passes if p.finished_at is not None), None)
    if last is not None and last.finished_at is not None:
        yield _gauge(
            "coldkeep_pass_last_duration_seconds",
            "How long the last pass that ended ran, however it ended and whoever ran it.",
            max(last.finished_at - last.started_at, 0) / 1000,
        )
        yield _gauge(
            "coldkeep_pass_last_end_timestamp_seconds",
            "When that pass ended.",
            last.finished_at / 1000,
        )


def archive_families(s: Snapshot) -> Iterator[Metric]:
    families = [
        GaugeMetricFamily(name, doc, labels=["status"])
        for name, doc in (
            ("coldkeep_archive_files", "Archived files in the manifest, by entry status."),
            ("coldkeep_archive_bytes", "The original size of archived files, by entry status."),
            (
                "coldkeep_archive_gz_bytes",
                "The compressed size of archived files, by entry status.",
            ),
        )
    ]
    for status, values in sorted(s.status.entries.items()):
        for family, value in zip(families, values, strict=True):
            family.add_metric([status], value)
    yield from families
    failures = GaugeMetricFamily(
        "coldkeep_verify_failures",
        "Archive files whose last verify failed (local: entries; remote: objects).",
        labels=["tier"],
    )
    failures.add_metric(["local"], s.status.verify_failures)
    if s.status.remote is not None:
        failures.add_metric(["remote"], s.status.remote.totals.verify_failed)
    yield failures
    quarantined = GaugeMetricFamily(
        "coldkeep_file_problems",
        "Live files a pass could not settle, left as they were (coldkeep status), by kind.",
        labels=["kind"],
    )
    kinds: dict[str, int] = {}
    for p in s.status.file_problems:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    for kind, n in sorted(kinds.items()):
        quarantined.add_metric([kind], n)
    yield quarantined


def remote_families(s: Snapshot) -> Iterator[Metric]:
    if s.status.remote is None:
        return
    t = s.status.remote.totals
    for name, doc, value in (
        ("coldkeep_remote_files", "Archive files (gzips, bundles) shipped.", t.shipped),
        ("coldkeep_remote_bytes", "The size of the archive files shipped.", t.shipped_bytes),
        ("coldkeep_remote_only_files", "Shipped files whose local copy is dropped.", t.remote_only),
        ("coldkeep_remote_only_bytes", "The size of those remote-only files.", t.remote_only_bytes),
        ("coldkeep_remote_pending_files", "Archive files not shipped yet.", t.pending_files),
        ("coldkeep_remote_pending_bytes", "The gzip bytes not shipped yet.", t.pending_bytes),
    ):
        yield _gauge(name, doc, value)
    if t.pending_since is not None:
        yield _gauge(
            "coldkeep_remote_pending_oldest_timestamp_seconds",
            "When the oldest archive file not shipped yet was archived (absent: none is).",
            t.pending_since / 1000,
        )
    yield _gauge(
        "coldkeep_remote_locked_objects",
        "Objects the bucket's Object Lock retains now, as read back by HEAD when shipped: "
        "archive files, event month snapshots, copies left to delete (not manifest snapshots).",
        s.status.remote.locked,
    )
    yield _gauge(
        "coldkeep_remote_locked_expired_objects",
        "Of those, the ones expired here that only the lock keeps (an expiry after it deletes "
        "them).",
        s.status.remote.locked_expired,
    )
    yield _gauge(
        "coldkeep_remote_legal_held_objects",
        "Objects under an S3 legal hold (mirrored from the site's legal holds), as the "
        "bucket last confirmed.",
        s.status.remote.legal_held,
    )
    yield _gauge(
        "coldkeep_remote_encrypted_objects",
        "Objects sealed to age recipients before they shipped ([remote] encrypt_to).",
        s.status.remote.sealed,
    )
    pending = s.status.remote.pending_events
    yield _gauge(
        "coldkeep_remote_pending_event_rows",
        "Archived event rows no month snapshot on the remote holds yet.",
        pending.rows,
    )
    yield _gauge(
        "coldkeep_remote_pending_event_months",
        "Event months whose archived rows are not all on the remote yet.",
        len(pending.months),
    )


def live_families(s: Snapshot) -> Iterator[Metric]:
    if s.wal_bytes is not None:
        yield _gauge(
            "coldkeep_live_wal_bytes",
            "The size of the live database's WAL file (0: none).",
            s.wal_bytes,
        )


def lifecycle_families(s: Snapshot) -> Iterator[Metric]:
    # Expired files are coldkeep_archive_files{status="expired"}: their tombstones.
    yield _gauge(
        "coldkeep_holds_active",
        "Legal holds in force: what they cover is neither expired nor dropped.",
        s.holds,
    )
    yield _gauge(
        "coldkeep_expired_event_months",
        "Event months whose database was expired (kept as tombstones).",
        s.expired_months,
    )


GROUPS: tuple[Callable[[Snapshot], Iterator[Metric]], ...] = (
    job_families,
    backlog_families,
    activity_families,
    archive_families,
    remote_families,
    live_families,
    lifecycle_families,
)


class SnapshotCollector(Collector):
    """The families of the last published snapshot, built at each scrape."""

    def __init__(self, settings: Settings) -> None:
        self.mode = settings.mode
        self.version = version()
        # One reference, replaced whole: a scrape on another thread reads it once.
        self._state: tuple[Snapshot | None, str | None] = (None, None)

    def publish(self, snapshot: Snapshot) -> None:
        self._state = (snapshot, None)

    def failed(self, error: str) -> None:
        """The last read failed: the snapshot before it stays, and ``up`` says 0."""
        self._state = (self._state[0], error)

    def collect(self) -> Iterator[Metric]:
        snapshot, error = self._state
        ok = snapshot is not None and error is None
        yield _gauge(
            "coldkeep_up",
            "1: the last read of the site succeeded; 0: it failed or has not happened "
            "yet (the other values are then from the last read that succeeded, if any).",
            1 if ok else 0,
        )
        yield InfoMetricFamily(
            "coldkeep",
            "coldkeep's version and the config's mode.",
            {
                "version": self.version,
                "mode": self.mode,
            },
        )
        if snapshot is None:
            return
        yield _gauge(
            "coldkeep_snapshot_timestamp_seconds", "When these values were read.", snapshot.at
        )
        for group in GROUPS:
            yield from group(snapshot)


def registry_for(collector: SnapshotCollector) -> CollectorRegistry:
    # No auto-describe: registering must not read anything.
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def write_textfile(path: Path, data: bytes) -> None:
    """``path`` replaced by ``data`` atomically and durably: written under a
    temporary name beside it (not ending in ``.prom``, so node_exporter never reads
    it half-written), fsynced, renamed over, the directory fsynced. Synchronous:
    run it in a thread."""
    path = path.absolute()
    # A new name each time, created O_EXCL and never through a link: the
    # textfile directory may be writable by others, and a file or a link planted
    # at a predictable name is never written to or truncated.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        # 0644: node_exporter reads it as another user.
        with naming(tmp), os.fdopen(os.open(tmp, flags, 0o644), "wb") as out:
            out.write(data)
            out.flush()
            fsync(out.fileno(), "metrics.data")
        with naming(path):
            os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    fsync_dir(path.parent, root=path.parent, site="metrics.placed")


class Publisher:
    """The collector's snapshot, kept fresh from the event loop, and the textfile
    written after each read. Everything runs on the loop (the manifest through
    its own connection's thread, the walk and the writes in threads): no
    connection is shared with another thread, and the loop never blocks."""

    def __init__(
        self,
        settings: Settings,
        collector: SnapshotCollector,
        *,
        textfile: Path | None = None,
        on_error: Callable[[str], None] = lambda _e: None,
        every_s: float = 15.0,
        backlog_every_s: float = 300.0,
    ) -> None:
        self.settings = settings
        self.collector = collector
        self.textfile = textfile
        self.on_error = on_error
        self.every_s = every_s
        self.backlog_every_s = backlog_every_s
        self._backlog: Backlog | None = None
        self._recount = True
        self._wake = asyncio.Event()
        self._registry = registry_for(collector)

    def kick(self, *, recount: bool = False) -> None:
        """Read again now (a job ended); ``recount``: the backlog too (a pass ended)."""
        self._recount = self._recount or recount
        self._wake.set()

    async def refresh(self) -> None:
        """One read, published; the textfile written. A failure is reported to
        ``on_error`` and leaves the last snapshot with ``coldkeep_up`` 0."""
        reuse = self._backlog
        if self._recount or reuse is None or time.time() - reuse.counted_at >= self.backlog_every_s:
            reuse = None
        # Cleared before the read: a pass that ends during it asks again.
        self._recount = False
        try:
            snapshot = await read_site(self.settings, backlog=reuse)
        except READ_ERRORS as err:
            if reuse is None:
                self._recount = True  # the count it was due did not happen
            self.collector.failed(str(err))
            self.on_error(f"metrics: the site could not be read: {err}")
        else:
            self._backlog = snapshot.backlog
            self.collector.publish(snapshot)
        if self.textfile is not None:
            data = generate_latest(self._registry)
            try:
                await asyncio.to_thread(write_textfile, self.textfile, data)
            except OSError as err:
                self.on_error(f"metrics: {err}")

    async def run(self) -> None:
        """Read, then again every ``every_s`` or when kicked, until cancelled."""
        while True:
            await self.refresh()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.every_s)
            self._wake.clear()
