"""``rebuild-manifest --from-remote``: a site's archive back from its remote tier,
on a fresh host with only the bucket, the credentials and ``coldkeep.toml``.

    manifest   the newest snapshot under ``<site>/manifest/`` that reads back
               whole (its server checksum) and passes ``integrity_check``,
               placed as ``coldkeep.db``, never over an existing one
    local      every shipped archive file with no local copy here is recorded as
               dropped: restore reads it from the remote. An entry with neither
               was never shipped; it is listed, and recovery marks it missing
    events     each event month's newest snapshot, fetched into ``events/`` where
               no database for the month is, checked against its recorded sha256;
               a month the snapshot says held more rows than its newest month
               snapshot (or that has none) is listed: those rows were never
               shipped (``remote/months.py``)

Without any snapshot, every archive file under ``<site>/files/`` is fetched into
``files/`` (each written to a partial, fsynced, renamed without replacing) and
the manifest is rebuilt from them as after losing ``coldkeep.db`` locally.

Sealed objects (client-side encryption) are opened with the identity given
(``--identity``): a sealed manifest snapshot (its name ends in
``.<set>.age``) read back as the server holds it, opened into a scratch file,
then checked as any snapshot; a sealed month snapshot as its row says. Without
an identity, a sealed newest snapshot stops the rebuild in one line naming
it. Without any snapshot, a sealed gzip of its own is opened into place; a
sealed bundle cannot be: its streams' places are only in the snapshot's
``sealed_spans``, so it is skipped and named in the report.

Invariants:
- Nothing local is overwritten: the manifest and every fetched file are placed
  with ``rename_noreplace``; a name already taken is left and reported.
- Run again after a crash, it goes on: a placed manifest is kept (its objects
  re-marked), fetched files already in place are skipped.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.cancel import CancelToken, in_thread
from ..base.codec import Digest, digest_path
from ..base.config import RemoteSettings
from ..base.durable import fsync
from ..base.errors import RemoteError, UsageError
from ..base.fsutil import ensure_dir, fsync_dir, open_file, rename_noreplace
from ..base.layout import Layout, UnsafePath
from ..base.ratelimit import RateLimiter
from ..base.stream import EventStream, FileDone, Phase
from ..base.times import now_ms
from ..files.bundle import is_bundle_name
from ..files.rebuild import rebuild_manifest
from ..store import expiry
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from ..store.schema import SCHEMA_VERSION
from .connect import connected
from .fetch import clear_scratch, downloaded, scratch_file
from .months import MonthLost, months_lost
from .objectstore import ObjectStore
from .sealing import Identities, IdentityNeeded, WrongIdentity
from .unseal import SealedUnreadable, identity_for, open_into, unsealed_name


class FromRemoteError(UsageError):
    """The remote holds nothing to rebuild from, or the local side is in the way;
    the message says which and what to do."""


@dataclass
class FromRemoteReport:
    out: Path
    snapshot: str | None = None  # the manifest snapshot used; None: rebuilt from the files
    entries: int = 0
    remote_only: int = 0  # archive files now read from the remote
    months: int = 0  # event month databases fetched
    fetched: int = 0  # archive files fetched (no snapshot)
    never_shipped: list[str] = field(default_factory=list)  # entries' gzips in neither place
    # Sealed bundles fetched without a snapshot: not split without its sealed_spans.
    sealed_skipped: list[str] = field(default_factory=list)
    events_never_shipped: list[MonthLost] = field(default_factory=list)  # rows in no snapshot
    problems: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return bool(self.problems)

    @property
    def lost(self) -> bool:
        """Something the lost host archived is known to be in no copy."""
        return bool(self.never_shipped or self.events_never_shipped)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "snapshot": self.snapshot,
            "entries": self.entries,
            "remote_only": self.remote_only,
            "months": self.months,
            "fetched": self.fetched,
            "never_shipped": self.never_shipped,
            "sealed_skipped": self.sealed_skipped,
            "events_never_shipped": [m.to_dict() for m in self.events_never_shipped],
            "problems": self.problems,
        }


def check_db(path: Path) -> str | None:
    """Why the database at ``path`` cannot serve as the manifest, or None."""
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            if db.execute("PRAGMA integrity_check").fetchone() != ("ok",):
                return "it fails integrity_check"
            version = db.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as err:
        return f"it is not a database ({err})"
    if version > SCHEMA_VERSION:
        return f"its schema {version} is newer than this coldkeep's {SCHEMA_VERSION}: upgrade"
    return None


async def read_back_problem(store: ObjectStore, key: str, path: Path, root: Path) -> str | None:
    """Why the object ``key``, downloaded to ``path``, is not what the server
    holds (its checksum, where it keeps one), or None."""
    info = await store.head(key)
    got = (await asyncio.to_thread(digest_path, path, root=root, cancel=CancelToken())).sha256
    if info is not None and info.sha256 not in (None, got):
        return f"{store.where(key)}: it reads back as {got}, not the server's {info.sha256}"
    return None


async def snapshot_problem(store: ObjectStore, key: str, path: Path, root: Path) -> str | None:
    """Why the manifest snapshot ``key``, downloaded to ``path``, cannot serve:
    it did not read back as the server holds it, or it is no sound manifest."""
    why = await read_back_problem(store, key, path, root)
    if why is not None:
        return why
    why = await asyncio.to_thread(check_db, path)
    return None if why is None else f"{store.where(key)}: {why}"


def open_path(
    src: Path,
    fd: int,
    identities: Identities,
    *,
    root: Path,
    what: str,
    sealed_to: str | None,
    cancel: CancelToken,
    expect: Digest | int | None = None,
) -> Digest:
    """The sealed object downloaded to ``src`` (all of it one age stream) opened
    into ``fd``, then fsynced: the caller may place it. Synchronous."""
    with open(open_file(src, os.O_RDONLY, root=root), "rb", buffering=0) as f:
        length = os.fstat(f.fileno()).st_size
        got = open_into(
            f,
            fd,
            identities,
            length=length,
            what=what,
            sealed_to=sealed_to,
            cancel=cancel,
            expect=expect,
        )
    fsync(fd, "fetch.scratch")
    return got


@asynccontextmanager
async def snapshot_fetched(
    store: ObjectStore, key: str, layout: Layout, what: str, identities: Identities | None
) -> AsyncIterator[tuple[Path, str | None]]:
    """The manifest snapshot ``key`` in a scratch file (fsynced, for the caller
    to place), a sealed one opened with ``identities``, and why it cannot serve
    (None: it can). A sealed one without an identity, or with a wrong one, is
    ``SealedUnreadable``."""
    sealed = unsealed_name(key)
    async with downloaded(store, key, layout, what) as tmp:
        if sealed is None:
            yield tmp, await snapshot_problem(store, key, tmp, layout.root)
            return
        where = store.where(key)
        ids = identity_for(identities, where, sealed[1])
        why = await read_back_problem(store, key, tmp, layout.root)
        async with scratch_file(layout, f"{what}-opened") as (plain, fd):
            if why is None:
                cancel = CancelToken()
                await in_thread(
                    cancel,
                    lambda: open_path(
                        tmp,
                        fd,
                        ids,
                        root=layout.root,
                        what=where,
                        sealed_to=sealed[1],
                        cancel=cancel,
                    ),
                )
                db_why = await asyncio.to_thread(check_db, plain)
                why = None if db_why is None else f"{where}: {db_why}"
            yield plain, why


class RemoteRebuild:
    def __init__(
        self,
        layout: Layout,
        store: ObjectStore,
        site: str,
        *,
        stream: EventStream,
        limiter: RateLimiter,
        cancel: CancelToken,
        identities: Identities | None = None,
    ) -> None:
        self.layout = layout
        self.store = store
        self.site = site
        self.stream = stream
        self.limiter = limiter
        self.cancel = cancel
        self.identities = identities  # opens sealed objects (None: they are refused)

    def key(self, path: str) -> str:
        return f"{self.site}/{path}"

    async def fetch_to(self, key: str, dest: Path, size: int, sha256: str | None) -> bool:
        """``key`` (``size`` bytes, through the rate cap) placed at ``dest`` under
        archive_root (scratch file, fsync, rename without replacing, directory
        fsync); False if ``dest`` exists already. With ``sha256``, bytes that
        differ are refused before they are placed."""
        root = self.layout.root
        await asyncio.to_thread(self.limiter.take, size, self.cancel)
        async with downloaded(self.store, key, self.layout, "dr") as tmp:
            if sha256 is not None:
                got = (
                    await asyncio.to_thread(digest_path, tmp, root=root, cancel=self.cancel)
                ).sha256
                if got != sha256:
                    raise RemoteError(
                        f"{self.store.where(key)}: its bytes hash to {got}, not the recorded "
                        f"{sha256}; not placed"
                    )
            return await self._place(tmp, dest)

    async def _place(self, tmp: Path, dest: Path) -> bool:
        """The scratch ``tmp`` (fsynced) renamed to ``dest`` unless it exists, its
        folder fsynced; whether it was placed."""
        root = self.layout.root
        await asyncio.to_thread(ensure_dir, dest.parent, root=root)
        placed = await asyncio.to_thread(rename_noreplace, tmp, dest, root=root)
        if placed == "renamed":
            await asyncio.to_thread(fsync_dir, dest.parent, root=root, site="rebuild.placed")
        return placed == "renamed"

    async def fetch_sealed(
        self, key: str, dest: Path, size: int, sealed_to: str, expect: Digest | None
    ) -> bool:
        """The sealed object ``key`` (one age stream of ``size`` bytes) opened
        with the identity and placed at ``dest`` as ``fetch_to`` places; its
        plaintext checked against ``expect`` first (when known)."""
        where = self.store.where(key)
        ids = identity_for(self.identities, where, sealed_to)
        root, cancel = self.layout.root, self.cancel
        await asyncio.to_thread(self.limiter.take, size, cancel)
        async with (
            downloaded(self.store, key, self.layout, "dr-sealed") as ct,
            scratch_file(self.layout, "dr") as (tmp, fd),
        ):
            await in_thread(
                cancel,
                lambda: open_path(
                    ct,
                    fd,
                    ids,
                    root=root,
                    what=where,
                    sealed_to=sealed_to,
                    cancel=cancel,
                    expect=expect,
                ),
            )
            return await self._place(tmp, dest)

    async def fetch_object(self, obj: RemoteObject, dest: Path) -> bool:
        """The object of row ``obj`` placed at ``dest`` (``fetch_to``), opened
        first when it is sealed."""
        if obj.sealed_to is None:
            return await self.fetch_to(self.key(obj.path), dest, obj.bytes, obj.sha256)
        expect = Digest(obj.local_bytes, obj.local_sha256)
        return await self.fetch_sealed(self.key(obj.key), dest, obj.bytes, obj.sealed_to, expect)

    async def run(self, out: Path) -> FromRemoteReport:
        await asyncio.to_thread(clear_scratch, self.layout)
        report = FromRemoteReport(out)
        snapshots = sorted(
            [i.key async for i in self.store.list_objects(self.key("manifest/"))], reverse=True
        )
        if await asyncio.to_thread(out.exists):
            report.snapshot = "(the manifest already in place)"
        else:
            await self._place_snapshot(snapshots, out, report)
        if report.snapshot is None:
            return report  # rebuilt from the files by the caller
        async with await Manifest.open(out) as manifest:
            await self._mark_remote_only(manifest, report)
            # Before the fetch: a month database already here is not lost.
            report.events_never_shipped = await months_lost(self.layout, manifest)
            report.months, problems = await self.fetch_months(manifest)
            report.problems += problems
        return report

    async def _place_snapshot(
        self, snapshots: list[str], out: Path, report: FromRemoteReport
    ) -> None:
        root = self.layout.root
        for key in snapshots:
            self.cancel.check()
            try:
                async with snapshot_fetched(
                    self.store, key, self.layout, "dr-manifest", self.identities
                ) as (tmp, why):
                    if why is not None:
                        report.problems.append(f"{why}; skipped")
                        continue
                    placed = await asyncio.to_thread(rename_noreplace, tmp, out, root=root)
            except SealedUnreadable as err:
                if isinstance(err.cause, IdentityNeeded | WrongIdentity):
                    raise err.cause from None  # an older snapshot would lose what it holds
                report.problems.append(f"{err}; trying an older snapshot")
                continue
            except RemoteError as err:
                report.problems.append(f"{err}; trying an older snapshot")
                continue
            if placed == "exists":
                raise FromRemoteError(f"{out} appeared meanwhile; left as it is")
            await asyncio.to_thread(
                fsync_dir, out.parent, root=root, site="rebuild.manifest_placed"
            )
            report.snapshot = key
            return

    async def _mark_remote_only(self, manifest: Manifest, report: FromRemoteReport) -> None:
        """Shipped files with no local copy here are read from the remote. Read
        from the remote tier's rows still relied on here and the index of what
        was never shipped: not every path of an archive of millions."""
        objects = RemoteObjects(manifest)
        candidates = await objects.relied_on_here()
        gone = await asyncio.to_thread(
            lambda: [path for path in candidates if not self._exists(path)]
        )
        await objects.mark_remote_only(gone, now_ms())
        unshipped = await objects.pending_files()
        report.entries = await manifest.entry_count()
        report.remote_only = (await objects.totals()).remote_only
        report.never_shipped = await asyncio.to_thread(
            lambda: [path for path in unshipped if not self._exists(path)]
        )

    def _exists(self, path: str) -> bool:
        try:
            return self.layout.abs(path).is_file()
        except UnsafePath:
            return False

    async def fetch_months(self, manifest: Manifest) -> tuple[int, list[str]]:
        """Each event month's newest snapshot, into ``events/`` where no database
        for the month is (an expired month's, which the bucket's lock may still
        keep, never): how many were fetched, and what went wrong."""
        latest = await RemoteObjects(manifest).latest_months()
        expired = {m for m, _ in await expiry.expired_months(manifest, sorted(latest))}
        missing = {
            month: obj
            for month, obj in sorted(latest.items())
            if month not in expired
            and not await asyncio.to_thread((self.layout.events / f"{month}.db").exists)
        }
        self.stream.emit(Phase("fetch", len(missing), sum(o.bytes for o in missing.values())))
        fetched, problems = 0, []
        for month, obj in missing.items():
            self.cancel.check()
            try:
                dest = self.layout.events / f"{month}.db"
                if await self.fetch_object(obj, dest):
                    fetched += 1
                    self.stream.emit(FileDone("fetch", obj.path, "fetched", obj.bytes))
            except SealedUnreadable as err:
                if isinstance(err.cause, IdentityNeeded | WrongIdentity):
                    raise err.cause from None  # every sealed month would say the same
                problems.append(str(err))
            except RemoteError as err:
                problems.append(str(err))
        return fetched, problems

    async def fetch_files(self, report: FromRemoteReport) -> None:
        """No snapshot: every archive file of the site into ``files/``."""
        prefix = self.key("files/")
        found = [i async for i in self.store.list_objects(prefix)]
        if not found:
            raise FromRemoteError(
                f"{self.store.where(self.key(''))}: neither a manifest snapshot nor any archive "
                "file is there (check remote.url and remote.site)"
            )
        self.stream.emit(Phase("fetch", len(found), sum(i.size for i in found)))
        for info in found:
            self.cancel.check()
            try:
                if await self._fetch_listed(info.key, info.size, report):
                    report.fetched += 1
            except (RemoteError, UnsafePath) as err:
                report.problems.append(f"{info.key}: {err}")

    async def _fetch_listed(self, key: str, size: int, report: FromRemoteReport) -> bool:
        """An object listed under ``files/`` placed at its path (a sealed gzip of
        its own opened; a sealed bundle skipped, named in the report)."""
        path = key[len(self.site) + 1 :]
        sealed = unsealed_name(path)
        if sealed is None:
            placed = await self.fetch_to(key, self.layout.abs(path), size, None)
        elif is_bundle_name(sealed[0].rsplit("/", 1)[-1]):
            report.sealed_skipped.append(self.store.where(key))
            return False
        else:
            path = sealed[0]
            placed = await self.fetch_sealed(key, self.layout.abs(path), size, sealed[1], None)
        if placed:
            self.stream.emit(FileDone("fetch", path, "fetched", size))
        return placed


@asynccontextmanager
async def rebuilding(
    layout: Layout,
    remote: RemoteSettings,
    *,
    stream: EventStream,
    cancel: CancelToken | None,
    identities: Identities | None = None,
) -> AsyncIterator[RemoteRebuild]:
    """What reads a lost archive back from the remote, its store open for the
    block; sealed objects opened with ``identities``."""
    async with connected(remote) as store:
        yield RemoteRebuild(
            layout,
            store,
            remote.site,
            stream=stream,
            limiter=RateLimiter(remote.bytes_per_s),
            cancel=cancel or CancelToken(),
            identities=identities,
        )


async def rebuild_from_remote(
    layout: Layout,
    remote: RemoteSettings,
    *,
    stream: EventStream,
    reads: RateLimiter,
    cancel: CancelToken | None,
    identities: Identities | None = None,
) -> FromRemoteReport:
    """This site's manifest, event months and the knowledge of what is remote,
    back from the remote tier; without a manifest snapshot, every archive file
    fetched and the manifest rebuilt from them (``reads``: the cap on reading
    them back); sealed objects opened with ``identities``. The caller holds
    the lock."""
    async with rebuilding(
        layout, remote, stream=stream, cancel=cancel, identities=identities
    ) as rebuild:
        report = await rebuild.run(layout.manifest)
        if report.snapshot is None:
            await rebuild.fetch_files(report)
            local = await rebuild_manifest(
                layout, layout.manifest, stream, limiter=reads, cancel=cancel
            )
            report.entries = local.entries
            report.problems += [f"unreadable: {u}" for u in local.unreadable]
            report.problems += [f"refused: {r}" for r in local.refused]
            report.problems += [
                f"{where}: sealed bundle not fetched: its streams are found only with the "
                "manifest snapshot's sealed_spans"
                for where in report.sealed_skipped
            ]
    return report


async def fetch_lost_months(
    layout: Layout,
    remote: RemoteSettings | None,
    manifest: Manifest,
    *,
    stream: EventStream,
    cancel: CancelToken | None,
    identities: Identities | None = None,
) -> None:
    """Event month databases gone from here and shipped: fetched back (before a
    restore of event rows; sealed ones opened with ``identities``), what
    happened told to the stream."""
    if remote is None:
        return
    async with rebuilding(
        layout, remote, stream=stream, cancel=cancel, identities=identities
    ) as rebuild:
        fetched, problems = await rebuild.fetch_months(manifest)
    if fetched:
        stream.notice("info", f"{fetched} event months fetched from {remote.url}")
    for problem in problems:
        stream.notice("warning", problem)
