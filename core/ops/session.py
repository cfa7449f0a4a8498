"""One mutating operation: its session (the archive lock, the manifest, the audit
row, the reserve, the attach socket), as the stream and the audit see it, and its
protocol steps as the stream sees them.

``Sessions.open`` opens one for the archiver (``Archiver.session``); an exception
settles its audit row on its own (``error``, ``cancelled``, or ``failed`` for a
full filesystem, said in one line, once the reserve has made room to record it).
``Operation.start`` tells the stream the operation began; ``finish`` tells it how
it ended, with its summary, and settles the audit row the same way. ``locked``
takes the archive lock for a block and reports a refusal before raising it.
``StepFeed`` tells the stream each step an operation announces.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..base.cancel import Cancelled, CancelToken
from ..base.codec import Codec
from ..base.config import Settings
from ..base.configremote import RemoteSettings
from ..base.errors import UsageError
from ..base.layout import Layout
from ..base.lock import ArchiveLock, LockHeld
from ..base.ratelimit import RateLimiter
from ..base.site import check_site, read_site, record_site
from ..base.space import OutOfSpace, ensure_reserve, out_of_space, release_reserve
from ..base.steps import (
    EXPIRE_STEPS,
    LOOSE_STEPS,
    SHIP_STEPS,
    THAW_STEPS,
    Recorder,
    StepHook,
    StepInfo,
    StepName,
    no_step,
)
from ..base.stream import EventStream, FileStep, Finished, Started
from ..base.stream import Status as Outcome
from ..store import audit, sitestate
from ..store.connection import ManifestError
from ..store.manifest import Manifest
from .attach import AttachServer

if TYPE_CHECKING:
    from ..files.filemove import FileMover
    from ..remote.sealing import Identities


class NoRemote(UsageError):
    """An operation on the remote tier with none configured."""


class NoStateDb(UsageError):
    """An operation on the live database's event rows with no ``state_db``
    configured: the config lacks what the command needs (exit 2, as ``NoRemote``)."""


@dataclass
class Operation:
    """One operation as the stream and the audit see it: ``start`` says it began,
    ``finish`` says how it ended, with its summary; the audit row is settled with
    the same status and the summary as JSON (an exception settles it on its own)."""

    command: str
    stream: EventStream
    outcome: str = "ok"
    detail: str | None = None

    def start(self, detail: str = "") -> None:
        self.stream.emit(Started(self.command, detail))

    def finish(self, status: Outcome, summary: dict[str, Any]) -> None:
        self.settle(status, json.dumps(summary, sort_keys=True, default=str)[:2000])
        self.stream.emit(Finished(self.command, status, summary))

    def settle(self, outcome: str, detail: str | None = None) -> None:
        """How the audit row ends, without telling the stream."""
        self.outcome, self.detail = outcome, detail


@dataclass
class Session(Operation):
    """An operation under the lock, with the manifest open, and a mover on it."""

    manifest: Manifest = field(kw_only=True)
    mover: FileMover = field(kw_only=True)


async def open_manifest(layout: Layout, live_root: Path) -> Manifest:
    """The manifest of the archive at ``layout``, opened for writing (created on
    an archive that never had one), once the archive is known to belong to
    ``live_root`` and not to have lost its manifest (base/site.py); the record
    of the live tree and the site's id written when it is missing. A fresh
    manifest (one rebuilt from the gzips) takes the id the record keeps."""
    await asyncio.to_thread(check_site, layout, live_root)
    manifest = await Manifest.open(layout.manifest)
    try:
        state = await sitestate.read_state(manifest)
        record = await asyncio.to_thread(read_site, layout)
        site_id = state.site_id
        if record is not None and record.site_id not in (None, site_id) and state.fresh:
            site_id = record.site_id
            await sitestate.adopt_id(manifest, site_id)
        await asyncio.to_thread(record_site, layout, live_root, site_id)
    except BaseException:
        await manifest.close()
        raise
    return manifest


@asynccontextmanager
async def locked(
    archive_root: Path,
    holder: str,
    *,
    wait: float = 0.0,
    refused: Callable[[str], Awaitable[None]] | None = None,
) -> AsyncIterator[ArchiveLock]:
    """The archive lock for the whole block (waiting up to ``wait`` seconds for a
    holder to let go); ``refused`` hears why before ``LockHeld`` is raised."""
    try:
        lock = await ArchiveLock.acquire(archive_root, holder, wait=wait)
    except LockHeld as err:
        if refused is not None:
            await refused(str(err))
        raise
    try:
        yield lock
    finally:
        lock.release()


class StepFeed:
    """Each protocol step an operation announces, told to the stream as a
    ``FileStep`` (the console's in-flight pane, the CLI's progress); with a
    caller's hook (a test's, the crash driver's), each step also waits for it."""

    def __init__(self, stream: EventStream, live_root: Path, user_step: StepHook) -> None:
        self.stream = stream
        self.user_step = user_step
        self._root = str(live_root).rstrip(os.sep) + os.sep

    def hook(self) -> StepHook:
        """The hook for one operation's steps: a ``Recorder`` (posted in order from
        a worker thread, never waited for) unless a caller's hook must run."""
        if self.user_step is no_step:
            return Recorder(self.record)
        return self._step

    async def _step(self, name: StepName, info: StepInfo) -> None:
        self.record(name, info)
        await self.user_step(name, info)

    def record(self, name: StepName, info: StepInfo) -> None:
        src = info.get("src") or info.get("target")
        label = info.get("label")
        if isinstance(label, str):
            op = (
                "ship"
                if name in SHIP_STEPS or name in LOOSE_STEPS
                else "expire"
                if name in EXPIRE_STEPS
                else "thaw"
                if name in THAW_STEPS
                else "bundle"
            )
            self.stream.emit(FileStep(op, label, name, 0, 0))
        elif isinstance(src, Path):
            op = "restore" if "target" in info else "archive"
            self.stream.emit(FileStep(op, self._rel(src), name, 0, 0))

    def _rel(self, path: Path) -> str:
        # String work, not PurePath.relative_to: this runs for every step of
        # every file on the event loop (~50 µs each with pathlib).
        full = str(path)
        return full[len(self._root) :] if full.startswith(self._root) else full


class Sessions:
    """What every operation of one archiver shares (its settings, the stream, the
    step feed, the clock, the read cap), and how each opens its session: the lock
    (a refusal audited), the manifest, the audit row from start to end, the
    reserve, a mover on the manifest, the attach socket; and how an exception
    settles it. The operations of ``ops`` take it from the archiver."""

    def __init__(
        self,
        settings: Settings,
        stream: EventStream,
        steps: StepFeed,
        *,
        origin: str,
        clock: Callable[[], int],
        wait: float,
        serve_events: bool,
        codec: Codec,
        limiter: RateLimiter,
    ) -> None:
        self.settings = settings
        self.layout = Layout(settings.archive_root)
        self.stream = stream
        self.steps = steps
        self.origin = origin
        self.clock = clock
        self.wait = wait  # for a holder of the lock to let go
        self.serve_events = serve_events  # attached consoles can watch and stop
        self.codec = codec
        self.limiter = limiter
        # ``--identity``'s keys, set by the command: they open sealed remote copies.
        self.identities: Identities | None = None

    @asynccontextmanager
    async def open(
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
            await open_manifest(self.layout, self.settings.live_root) as manifest,
        ):
            audit_id = await self._begin(manifest, command, args)
            mover = self.mover(manifest, step=self.steps.hook())
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

    def state_db(self, what: str) -> Path:
        """The live database, or ``NoStateDb`` saying ``what`` cannot be done."""
        db = self.settings.state_db
        if db is None:
            where = self.settings.config_path or "coldkeep.toml"
            raise NoStateDb(
                f"{where}: no state_db is configured: {what} "
                '(add state_db = "path/to/the/application.db")'
            )
        return db

    def remote(self) -> RemoteSettings:
        """The ``[remote]`` settings, or ``NoRemote``."""
        if self.settings.remote is None:
            where = self.settings.config_path or "coldkeep.toml"
            raise NoRemote(
                f"{where}: no [remote] is configured "
                '(add [remote] with url = "s3://bucket/prefix" or "file:///path")'
            )
        return self.settings.remote

    async def nothing_archived(self) -> bool:
        """No coldkeep.db yet: a site no pass has run on (or one whose manifest
        was lost: rebuild-manifest). A command that would only read the archive
        says so and writes nothing: not the archive_root, not the lock. A lost
        manifest (base/site.py) is refused as such, never taken for a new site."""
        if await asyncio.to_thread(self.layout.manifest.exists):
            return False
        await asyncio.to_thread(check_site, self.layout, self.settings.live_root)
        return True

    def mover(self, manifest: Manifest, step: StepHook = no_step) -> FileMover:
        """A mover on ``manifest`` with this archive's roots, codec and cap."""
        # Here, not at the top: ``status`` and ``find`` make an archiver and
        # never move a file (docs/performance.md, "The CLI's start").
        from ..files.filemove import FileMover  # noqa: PLC0415

        return FileMover(
            self.settings.live_root,
            self.layout,
            manifest,
            self.codec,
            self.limiter,
            step=step,
            clock=self.clock,
        )

    @asynccontextmanager
    async def lock_only(self, command: str, holder: str) -> AsyncIterator[Operation]:
        """The lock alone and the operation as the stream sees it, without a
        session: for the rebuilds, which have no manifest to open (or write it)."""
        async with locked(self.settings.archive_root, self._holder(holder), wait=self.wait):
            yield Operation(command, self.stream)
