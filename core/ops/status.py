"""What ``coldkeep status`` shows: the archive's state, read without the lock and
without writing (the manifest is opened read-only, the lock file only read).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..base.config import Settings
from ..base.configremote import RemoteSettings
from ..base.layout import Layout
from ..base.lock import Holder, read_holder
from ..base.times import now_ms
from ..remote.cold import wait_of
from ..remote.months import PendingEvents, pending_events
from ..store import passlog, problems, thaws
from ..store.audit import AuditRecord, last_of
from ..store.entries import Entry
from ..store.lakeobjects import LakeObjects, LakeTotals
from ..store.manifest import Manifest
from ..store.passlog import PassRecord
from ..store.problems import FileProblem
from ..store.remoteobjects import RemoteObjects, RemoteTotals
from ..store.schema import SCHEMA_VERSION
from .siteops import SiteIdentity, read_identity

ATTENTION_LISTED = 500


@dataclass(frozen=True)
class ClassShare:
    """What the bucket holds of this site in one S3 storage class: the archive
    files and event months recorded there, and their monthly cost."""

    storage_class: str
    objects: int
    bytes: int
    usd_a_month: float  # at [remote.prices] (list prices unless set), an estimate


@dataclass(frozen=True)
class ColdState:
    """Archive files in a cold storage class, and the thaws asked of them."""

    storage_class: str
    objects: int  # shipped objects held in it (gzips and bundles)
    bytes: int
    usd_a_month: float  # at [remote.prices] (list prices unless set), an estimate
    thaws_asked: int  # objects whose thaw was asked, its copy not yet past its days
    restores_waiting: int  # restore --thaw requests the scheduler has not finished
    oldest_asked_at: int | None = None  # ms: the oldest of those thaws
    oldest_wait: str | None = None  # its tier's usual wait, as AWS states it


@dataclass(frozen=True)
class RemoteState:
    """The remote tier as the manifest knows it."""

    url: str
    site: str
    keep_local_days: float
    totals: RemoteTotals
    last_ship: AuditRecord | None
    pending_events: PendingEvents = field(default_factory=PendingEvents)  # rows no snapshot holds
    object_lock: str = "off"  # [remote] object_lock
    # What the bucket's Object Lock keeps now, as the rows the HEADs confirmed
    # say it (manifest snapshots have none: not counted): objects retained,
    # those of them expired here that only the lock keeps, objects under an S3
    # legal hold.
    locked: int = 0
    locked_expired: int = 0
    legal_held: int = 0
    sealed_to: str | None = None  # the age recipient set new objects are sealed to
    sealed: int = 0  # objects sealed to age recipients (any set)
    cold: ColdState | None = None  # storage_class GLACIER or DEEP_ARCHIVE (None: another)
    classes: tuple[ClassShare, ...] = ()  # an S3 remote's objects by storage class
    lake: LakeTotals | None = None  # the site's files in the fleet's lake (None: no [lake])

    def to_dict(self) -> dict[str, Any]:
        last = self.last_ship
        return {
            "url": self.url,
            "site": self.site,
            "keep_local_days": self.keep_local_days,
            **asdict(self.totals),
            "pending_event_months": len(self.pending_events.months),
            "pending_event_rows": self.pending_events.rows,
            "object_lock": self.object_lock,
            "locked_objects": self.locked,
            "locked_expired_objects": self.locked_expired,
            "legal_held_objects": self.legal_held,
            "sealed_to": self.sealed_to,
            "sealed_objects": self.sealed,
            "cold": asdict(self.cold) if self.cold else None,
            "classes": [asdict(c) for c in self.classes],
            "lake": asdict(self.lake) if self.lake else None,
            "last_ship": (
                {"at": last.at, "outcome": last.outcome, "detail": last.detail} if last else None
            ),
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
    attention: list[Entry]  # stale, missing or failed verify (the first ATTENTION_LISTED)
    remote: RemoteState | None = None  # None: no remote tier configured
    # Files quarantined (store/problems.py): each with its reason and remedy.
    file_problems: list[FileProblem] = field(default_factory=list)
    site: SiteIdentity | None = None  # None: no manifest yet

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
                    "gz_path": e.location,
                    "status": e.status,
                    "verify_error": e.verify_error,
                }
                for e in self.attention
            ],
            "remote": self.remote.to_dict() if self.remote else None,
            "file_problems": [p.to_dict() for p in self.file_problems],
            "site": self.site.to_dict() if self.site else None,
        }


async def read_status(settings: Settings, layout: Layout, manifest: Manifest | None) -> Status:
    """The status of the archive ``manifest`` describes (None: there is none yet);
    closes ``manifest``, however it ends: cancelled at any await (a daemon
    told to stop while its metrics read), it is closed all the same, or its
    connection's thread would keep the process from exiting."""
    counts: dict[str, tuple[int, int, int]] = {}
    failures = intents = 0
    passes: list[PassRecord] = []
    attention: list[Entry] = []
    remote = None
    quarantined: list[FileProblem] = []
    site = None
    async with manifest or contextlib.nullcontext():
        holder = await asyncio.to_thread(read_holder, layout.lock)
        if manifest is not None:
            counts = await manifest.status_counts()
            attention = await manifest.entries_needing_attention(limit=ATTENTION_LISTED)
            failures = await manifest.verify_failure_count()
            intents = len(await manifest.restore_intents())
            passes = await passlog.recent(manifest, 5)
            remote = await remote_state(settings, manifest, layout)
            quarantined = await problems.listing(manifest)
            site = await read_identity(manifest, layout)
    return Status(
        settings.config_path,
        settings.live_root,
        settings.archive_root,
        settings.mode,
        holder,
        holder.alive if holder else False,
        SCHEMA_VERSION if manifest is not None else None,
        counts,
        failures,
        intents,
        passes,
        attention,
        remote,
        quarantined,
        site,
    )


async def remote_state(
    settings: Settings, manifest: Manifest, layout: Layout
) -> RemoteState | None:
    """What is shipped, pending and dropped, the event rows no snapshot holds yet,
    and the last ship (None: no remote)."""
    if settings.remote is None:
        return None
    r = settings.remote
    objects = RemoteObjects(manifest)
    totals = await objects.totals()
    last = await last_of(manifest, "ship")
    pending = await pending_events(layout, objects)
    locks = await objects.lock_counts(now_ms())
    sealed_to = r.encrypt_to.fingerprint if r.encrypt_to is not None else None
    sealed = await objects.sealed_count()
    classes = await _classes(r, objects) if r.folder is None else ()
    cold = await _cold_state(r, manifest, classes) if r.cold else None
    return RemoteState(
        r.url,
        r.site,
        r.keep_local_days,
        totals,
        last,
        pending,
        r.object_lock,
        locks.locked,
        locks.expired,
        locks.held,
        sealed_to,
        sealed,
        cold,
        classes,
        await LakeObjects(manifest).totals() if settings.lake.enabled else None,
    )


async def _classes(remote: RemoteSettings, objects: RemoteObjects) -> tuple[ClassShare, ...]:
    return tuple(
        ClassShare(cls, n, size, remote.prices.storage_usd(cls, size))
        for cls, n, size in await objects.by_class(remote)
    )


async def _cold_state(
    remote: RemoteSettings, manifest: Manifest, classes: tuple[ClassShare, ...]
) -> ColdState:
    cls = remote.storage_class
    held = next((c for c in classes if c.storage_class == cls), ClassShare(cls, 0, 0, 0.0))
    asked = await thaws.current(manifest, now_ms())
    waiting = await thaws.restores(manifest, ("waiting",))
    oldest = asked[0] if asked else None
    return ColdState(
        cls, held.objects, held.bytes, held.usd_a_month, len(asked), len(waiting),
        oldest.asked_at if oldest else None, wait_of(cls, oldest.tier) if oldest else None,
    )  # fmt: skip
