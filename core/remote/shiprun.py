"""One ship's state, shared by its phases (ship.py, shipmonths.py, shipreplace.py,
shipsnapshot.py, shipdrops.py): the placer every object goes through, the
site's view of the bucket, the report it fills, and how a phase tells the
stream and the step hook what it did.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..base.cancel import CancelToken
from ..base.config import Settings
from ..base.ratelimit import UNLIMITED, RateLimiter
from ..base.signing import SiteKey
from ..base.steps import StepHook, StepName, no_step
from ..base.stream import EventStream, FileDone, Level
from ..base.times import now_ms
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject
from .objectstore import ObjectStore
from .place import Placer, Sent


@dataclass
class ShipReport:
    uploaded: int = 0  # objects sent
    already: int = 0  # objects found at their key with the same bytes, recorded
    bytes: int = 0  # sent
    months: int = 0  # event month snapshots shipped
    snapshot: str | None = None  # the manifest snapshot's key
    dropped: int = 0  # local copies removed
    dropped_bytes: int = 0
    held: int = 0  # local copies a legal hold keeps
    pending: int = 0  # archive files still to ship (after a problem or a stop)
    locked: int = 0  # objects shipped with a retain-until (object_lock)
    holds_placed: int = 0  # S3 legal holds placed on objects shipped before
    holds_lifted: int = 0
    snapshots_kept: int = 0  # old manifest snapshots the bucket's lock still keeps
    loose_deleted: int = 0  # copies no row records (a stopped upload's, rekey's old ones) deleted
    loose_kept: int = 0  # of those, the ones the bucket's lock still keeps (tracked)
    superseded: int = 0  # event month snapshots no kept manifest snapshot names, let go
    heartbeat: str | None = None  # the beat this ship put (its key under the site)
    lake: int = 0  # event months written to the fleet's lake ([lake])
    lake_deleted: int = 0  # superseded lake objects deleted
    problems: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # about the server, said once

    @property
    def failed(self) -> bool:
        return bool(self.problems)

    def to_dict(self) -> dict[str, Any]:
        return {
            "uploaded": self.uploaded,
            "already": self.already,
            "bytes": self.bytes,
            "months": self.months,
            "snapshot": self.snapshot,
            "dropped": self.dropped,
            "dropped_bytes": self.dropped_bytes,
            "held": self.held,
            "pending": self.pending,
            "locked": self.locked,
            "holds_placed": self.holds_placed,
            "holds_lifted": self.holds_lifted,
            "snapshots_kept": self.snapshots_kept,
            "loose_deleted": self.loose_deleted,
            "loose_kept": self.loose_kept,
            "superseded": self.superseded,
            "heartbeat": self.heartbeat,
            "lake": self.lake,
            "lake_deleted": self.lake_deleted,
            "problems": self.problems,
            "notices": self.notices,
        }


@dataclass(frozen=True)
class MonthSnap:
    """An event month's snapshot: its month, its database's signature when taken,
    its rows."""

    month: str
    sig: str
    rows: int


def draft_row(path: str, now: int, month: MonthSnap | None = None) -> RemoteObject:
    """The row of ``path`` shipped at ``now`` (``month``: the event month whose
    snapshot it is) before the bucket confirms it: the placer fills in the
    object's place, size, sha256, lock and version from what it said."""
    return RemoteObject(
        path,
        0,
        "",
        now,
        month=month.month if month else None,
        source_sig=month.sig if month else None,
        row_count=month.rows if month else None,
    )


class ShipRun:
    """A ship's state and what every phase reports through."""

    def __init__(
        self,
        settings: Settings,
        manifest: Manifest,
        store: ObjectStore,
        *,
        stream: EventStream,
        step: StepHook = no_step,
        clock: Callable[[], int] = now_ms,
        reads: RateLimiter = UNLIMITED,
        cancel: CancelToken | None = None,
    ) -> None:
        # Every object goes into the bucket, and every copy no row records
        # leaves it, through the placer; the ship shares its view of the site.
        self.placer = placer = Placer(
            settings, manifest, store, step=step, clock=clock, reads=reads, cancel=cancel
        )
        self.settings, self.remote, self.layout = settings, placer.remote, placer.layout
        self.manifest, self.objects, self.store = manifest, placer.objects, store
        self.step, self.clock, self.cancel = step, clock, placer.cancel
        self.seal = placer.seal
        self.stream = stream
        self.report = ShipReport()
        self._counted = False  # a month's row count changed: the manifest snapshot says it
        self._key: SiteKey | str | None = None  # signing_key's answer, once asked

    def key(self, path: str) -> str:
        return self.placer.key(path)

    def _notice(self, level: Level, notice: str) -> None:
        self.report.notices.append(notice)
        self.stream.notice(level, notice)

    async def _announce(self, name: StepName, path: str) -> None:
        await self.step(name, {"label": path})

    async def settle_loose(self) -> None:
        """What a ship or rekey stopped partway left in the bucket at a key no
        row records (a sealed upload never read back, an object sealed again and
        its old copy not yet deleted, a month's superseded snapshot): deleted,
        or tracked while the bucket's lock keeps it (``Placer.settle_loose``)."""
        done = await self.placer.settle_loose()
        self.report.loose_deleted += done.deleted
        self.report.loose_kept += done.kept
        self.report.problems += done.problems

    def _accepted(self, sent: Sent, row: RemoteObject | str) -> None:
        """An upload read back and recorded as ``row`` (else why not), counted."""
        if isinstance(row, str):
            self._problem(sent.path, row)
            return
        self.report.locked += row.retain_until is not None
        if sent.created:
            self.report.uploaded += 1
            self.report.bytes += sent.size
        else:
            self.report.already += 1
        how = "shipped" if sent.created else "exists"
        self.stream.emit(FileDone("ship", sent.path, how, sent.size))

    def _problem(self, path: str, message: str) -> None:
        self.report.problems.append(message)
        self.stream.emit(FileDone("ship", path, "error", detail=message))
