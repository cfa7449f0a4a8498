"""``rebuild-manifest --from-remote``: a site's archive back from its remote tier,
on a fresh host with only the bucket, the credentials and ``coldkeep.toml``.

    manifest   the newest of the site's own signed snapshots under
               ``<site>/manifest/`` (snapshots.py: its statement verifies with a
               trusted key, for the site's id) that reads back whole as signed,
               passes ``integrity_check`` and holds the generation signed,
               placed as ``coldkeep.db``, never over an existing one; every
               snapshot not taken named. The site key recovered from its sealed
               copy where it can be (identity.py)
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
from contextlib import asynccontextmanager, closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..base.cancel import CancelToken, in_thread
from ..base.codec import CorruptGzip, Digest, digest_path, inflate
from ..base.configremote import RemoteSettings
from ..base.durable import fsync
from ..base.errors import RemoteError, UsageError
from ..base.fsutil import ensure_dir, fsync_dir, open_file, rename_noreplace
from ..base.layout import Layout, UnsafePath
from ..base.ratelimit import RateLimiter
from ..base.signing import key_path, load_key, save_key
from ..base.site import read_site
from ..base.stream import EventStream, FileDone, Phase
from ..base.times import now_ms
from ..files.bundle import is_bundle_name
from ..files.rebuild import rebuild_manifest
from ..store import expiry, sitestate
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObject, RemoteObjects
from ..store.schema import SCHEMA_VERSION
from ..store.sitestate import read_keys_of, read_state_of
from .connect import connected
from .fetch import clear_scratch, downloaded, scratch_file
from .identity import recover_key
from .months import MonthLost, months_lost
from .objectstore import ObjectStore, RemoteMissing
from .sealing import Identities, IdentityNeeded, WrongIdentity
from .snapshots import NoTrust, Seen, Statement, Survey, Trust, resolve_trust, survey
from .unseal import SealedUnreadable, identity_for, open_into, unsealed_name


class FromRemoteError(UsageError):
    """The remote holds nothing to rebuild from, or the local side is in the way;
    the message says which and what to do."""


@dataclass(frozen=True)
class DrChoice:
    """What the operator says of the site to recover (each None: not said)."""

    site_key: str | None = None  # --site-key: the fingerprint written down
    site_id: str | None = None  # --site-id: of several sites found under one prefix
    snapshot: str | None = None  # --snapshot: a snapshot's key, picked by hand


NO_CHOICE = DrChoice()


@dataclass
class FromRemoteReport:
    out: Path
    snapshot: str | None = None  # the manifest snapshot used; None: rebuilt from the files
    generation: int | None = None  # the snapshot's, where signed
    site_id: str | None = None  # the site recovered
    trusted: str | None = None  # which keys were trusted, and why
    unsigned: bool = False  # an older coldkeep's snapshot, taken because it was picked
    others: list[str] = field(default_factory=list)  # snapshots not the site's own, named
    site_key: str | None = None  # the signing key on this host, in words
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
            "generation": self.generation,
            "site_id": self.site_id,
            "trusted": self.trusted,
            "unsigned": self.unsigned,
            "others": self.others,
            "site_key": self.site_key,
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
        # closing(): a connection's own ``with`` ends a transaction, not the
        # connection, and one left open kept the file locked until collected.
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            if db.execute("PRAGMA integrity_check").fetchone() != ("ok",):
                return "it fails integrity_check"
            version = db.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as err:
        return f"it is not a database ({err})"
    if version > SCHEMA_VERSION:
        return f"its schema {version} is newer than this coldkeep's {SCHEMA_VERSION}: upgrade"
    return None


async def read_back_problem(
    store: ObjectStore, key: str, path: Path, root: Path, signed: str | None = None
) -> str | None:
    """Why the object ``key``, downloaded to ``path``, is not what the server
    holds (its checksum, where it keeps one), or not the bytes whose SHA-256
    was ``signed``; or None."""
    info = await store.head(key)
    got = (await asyncio.to_thread(digest_path, path, root=root, cancel=CancelToken())).sha256
    if info is not None and info.sha256 not in (None, got):
        return f"{store.where(key)}: it reads back as {got}, not the server's {info.sha256}"
    if signed is not None and got != signed:
        return f"{store.where(key)}: its bytes are not the ones its statement signs"
    return None


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


def unpack_into(gz: Path, fd: int, cancel: CancelToken) -> Digest:
    """The gzip ``gz`` inflated into ``fd``, then fsynced: what it inflated to.
    Synchronous."""
    with os.fdopen(os.dup(fd), "wb") as out:
        got = inflate(gz, out=out, cancel=cancel)
        out.flush()
        fsync(out.fileno(), "fetch.scratch")
    return got


def manifest_problem(path: Path, where: str, statement: Statement | None) -> str | None:
    """Why the manifest snapshot ``where``, at ``path``, cannot serve: it is no
    sound manifest, or (with its ``statement``) not the one signed."""
    why = check_db(path)
    if why is None and statement is not None:
        why = _statement_problem(path, statement)
    return None if why is None else f"{where}: {why}"


def _statement_problem(path: Path, statement: Statement) -> str | None:
    """Why the manifest at ``path`` is not the one ``statement`` signs: its site
    id, its generation, or the key among the site's."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        state = read_state_of(db)
        keys = {k.fingerprint for k in read_keys_of(db)}
    if state is None or (state.site_id, state.generation) != (
        statement.site_id,
        statement.generation,
    ):
        return "the manifest inside is not the one its statement signs"
    if statement.key not in keys:
        return f"the manifest inside does not list the key {statement.key} that signed it"
    return None


@asynccontextmanager
async def snapshot_fetched(
    store: ObjectStore,
    key: str,
    layout: Layout,
    what: str,
    identities: Identities | None,
    statement: Statement | None = None,
) -> AsyncIterator[tuple[Path, str | None]]:
    """The manifest snapshot ``key`` in a scratch file (fsynced, for the caller
    to place), a sealed one opened with ``identities``, and why it cannot serve
    (None: it can): with its ``statement``, also when its bytes or the manifest
    inside are not the ones signed. A sealed one without an identity, or with
    a wrong one, is ``SealedUnreadable``."""
    sealed = unsealed_name(key)
    async with downloaded(store, key, layout, what) as tmp:
        signed = None if statement is None else statement.sha256
        why = await read_back_problem(store, key, tmp, layout.root, signed)
        where = store.where(key)
        if sealed is None:
            if why is None:
                why = await asyncio.to_thread(manifest_problem, tmp, where, statement)
            yield tmp, why
            return
        ids = identity_for(identities, where, sealed[1])
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
                why = await asyncio.to_thread(manifest_problem, plain, where, statement)
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
        async with self._downloaded(key, size, sha256, "dr") as tmp:
            return await self._place(tmp, dest)

    @asynccontextmanager
    async def _downloaded(
        self, key: str, size: int, sha256: str | None, what: str
    ) -> AsyncIterator[Path]:
        """``key`` (``size`` bytes, through the rate cap) in a scratch file,
        fsynced, for the life of the block; with ``sha256``, refused first
        unless its bytes hash to it."""
        await asyncio.to_thread(self.limiter.take, size, self.cancel)
        async with downloaded(self.store, key, self.layout, what) as tmp:
            if sha256 is not None:
                got = (
                    await asyncio.to_thread(
                        digest_path, tmp, root=self.layout.root, cancel=self.cancel
                    )
                ).sha256
                if got != sha256:
                    raise RemoteError(
                        f"{self.store.where(key)}: its bytes hash to {got}, not the recorded "
                        f"{sha256}; not placed"
                    )
            yield tmp

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
        async with (
            self._downloaded(key, size, None, "dr-sealed") as ct,
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

    async def fetch_unpacked(self, obj: RemoteObject, dest: Path) -> bool:
        """The packed month of row ``obj`` (monthgz.py) downloaded, checked
        against the gzip's recorded sha256, inflated into a scratch file that is
        checked against the database's and fsynced, and placed at ``dest`` as
        ``fetch_to`` places."""
        key, cancel = self.key(obj.path), self.cancel
        where = self.store.where(key)
        async with (
            self._downloaded(key, obj.bytes, obj.sha256, "dr-packed") as gz,
            scratch_file(self.layout, "dr") as (tmp, fd),
        ):
            try:
                back = await in_thread(cancel, lambda: unpack_into(gz, fd, cancel))
            except CorruptGzip as err:
                raise RemoteError(f"{where}: {err}; not placed") from err
            if back != Digest(obj.local_bytes, obj.local_sha256):
                raise RemoteError(
                    f"{where}: inflates to {back.bytes} bytes, sha256 {back.sha256}, not the "
                    f"database recorded ({obj.local_bytes} bytes, {obj.local_sha256}); not placed"
                )
            return await self._place(tmp, dest)

    async def fetch_object(self, obj: RemoteObject, dest: Path) -> bool:
        """The object of row ``obj`` placed at ``dest`` (``fetch_to``), opened
        first when it is sealed, inflated when it is a packed month."""
        if obj.seek_points is not None:
            return await self.fetch_unpacked(obj, dest)
        if obj.sealed_to is None:
            return await self.fetch_to(self.key(obj.path), dest, obj.bytes, obj.sha256)
        expect = Digest(obj.local_bytes, obj.local_sha256)
        return await self.fetch_sealed(self.key(obj.key), dest, obj.bytes, obj.sealed_to, expect)

    async def run(self, out: Path, choice: DrChoice) -> FromRemoteReport:
        await asyncio.to_thread(clear_scratch, self.layout)
        report = FromRemoteReport(out)
        newest: Seen | None = None
        if await asyncio.to_thread(out.exists):
            report.snapshot = "(the manifest already in place)"
        else:
            found = await survey(self.store, self.site)
            if not found.seen:
                return report  # no snapshot at all: rebuilt from the files by the caller
            newest = await self._place_snapshot(found, out, report, choice)
        async with await Manifest.open(out) as manifest:
            if newest is not None and newest.statement is not None:
                # Ships from here go on after the newest of the site's own.
                await sitestate.recovered(manifest, newest.statement.generation, newest.key)
            await self._mark_remote_only(manifest, report)
            # Before the fetch: a month database already here is not lost.
            report.events_never_shipped = await months_lost(self.layout, manifest)
            report.months, problems = await self.fetch_months(manifest)
            report.problems += problems
            report.site_key = await self._site_key(manifest)
        return report

    async def judged(
        self, found: Survey, choice: DrChoice
    ) -> tuple[Trust | None, list[Seen], str | None]:
        """Every snapshot ``found`` under the site's prefix judged for the site
        the operator's ``choice`` (or this host's record and key) names: the
        trust, the snapshots newest first, and why no trust could be had (its
        snapshots then unjudged)."""
        record = await asyncio.to_thread(read_site, self.layout)
        local = await asyncio.to_thread(load_key, self.layout.root)
        try:
            trust = resolve_trust(
                found,
                self.store.where(self.key("manifest/")),
                site_key=choice.site_key,
                site_id=choice.site_id or (record.site_id if record is not None else None),
                local_key=local.fingerprint if local is not None else None,
            )
        except NoTrust as err:
            return None, found.judged(Trust("", frozenset(), ""), 0), str(err)
        return trust, found.judged(trust, await self.store.server_now()), None

    async def _place_snapshot(
        self, found: Survey, out: Path, report: FromRemoteReport, choice: DrChoice
    ) -> Seen | None:
        """The newest of the site's own snapshots that opens (or the one
        picked) placed at ``out``; the newest own one, for the generation the
        site goes on after."""
        trust, judged, untrusted = await self.judged(found, choice)
        own = [s for s in judged if s.verdict == "own"]
        report.others = [s.describe() for s in judged if s.verdict != "own"]
        if trust is not None:
            report.site_id, report.trusted = trust.site_id, trust.why
        candidates = self._candidates(judged, own, choice, untrusted)
        for seen in candidates:
            self.cancel.check()
            if await self._place_one(seen, out, report):
                report.snapshot = self.key(seen.key)
                report.generation = seen.generation
                report.problems += self._newer_not_taken(judged, seen)
                return own[0] if own else None
            if seen is not candidates[-1]:
                report.problems[-1] += "; trying the next older snapshot of the site"
        raise FromRemoteError(
            f"{self.store.where(self.key('manifest/'))}: none of the site's own snapshots could "
            "be used (each says why above); nothing was placed"
        )

    def _newer_not_taken(self, judged: list[Seen], taken: Seen) -> list[str]:
        """The site's own snapshots of a later generation than the one taken
        that are dated in the bucket's future: never an older generation in
        silence."""
        return [
            f"{self.store.where(self.key(s.key))}: generation {s.generation}, newer than the "
            f"one taken, is {s.why}: not taken (--snapshot {s.key} takes it by hand)"
            for s in judged
            if s.verdict == "future" and (s.generation or 0) > (taken.generation or 0)
        ]

    def _candidates(
        self, judged: list[Seen], own: list[Seen], choice: DrChoice, untrusted: str | None
    ) -> list[Seen]:
        """The snapshots to try, newest first: the one picked by hand, else the
        site's own; ``FromRemoteError`` where there is none to try."""
        where = self.store.where(self.key("manifest/"))
        if choice.snapshot is not None:
            name = choice.snapshot.removeprefix(f"{self.site}/")
            picked = [s for s in judged if s.key == name]
            if not picked:
                raise FromRemoteError(f"{where}: no snapshot {name} is there (see --list)")
            if picked[0].verdict in ("own", "unsigned"):
                return picked  # unsigned: the operator's own choice, said in the report
            raise FromRemoteError(f"{self.store.where(self.key(name))}: {picked[0].why}; not taken")
        if untrusted is not None:
            raise FromRemoteError(untrusted)
        if not own:
            kinds = sorted({s.verdict for s in judged})
            raise FromRemoteError(
                f"{where}: none of the {len(judged)} snapshots there is this site's own "
                f"({', '.join(kinds)}); rebuild-manifest --from-remote --list says what each "
                "is; --snapshot KEY takes one by hand"
            )
        twins = [s for s in own if s.generation == own[0].generation]
        if len(twins) > 1:
            hosts = ", ".join(f"{s.key} from {s.statement.host}" for s in twins if s.statement)
            raise FromRemoteError(
                f"{where}: generation {own[0].generation} of this site was shipped twice "
                f"({hosts}): another host shipped as this site (a cloned VM?); pick one with "
                "--snapshot KEY"
            )
        return own

    async def _place_one(self, seen: Seen, out: Path, report: FromRemoteReport) -> bool:
        """``seen`` fetched, checked against its statement and placed at ``out``;
        False (the reason in the report) where it cannot serve."""
        root = self.layout.root
        key = self.key(seen.key)
        try:
            async with snapshot_fetched(
                self.store, key, self.layout, "dr-manifest", self.identities, seen.statement
            ) as (tmp, why):
                if why is not None:
                    report.problems.append(why)
                    return False
                placed = await asyncio.to_thread(rename_noreplace, tmp, out, root=root)
        except SealedUnreadable as err:
            if isinstance(err.cause, IdentityNeeded | WrongIdentity):
                raise err.cause from None  # an older snapshot would lose what it holds
            report.problems.append(str(err))
            return False
        except RemoteError as err:
            report.problems.append(str(err))
            return False
        if placed == "exists":
            raise FromRemoteError(f"{out} appeared meanwhile; left as it is")
        await asyncio.to_thread(fsync_dir, out.parent, root=root, site="rebuild.manifest_placed")
        if seen.statement is None:
            report.unsigned = True
        return True

    async def _site_key(self, manifest: Manifest) -> str:
        """The site's signing key on this host: kept, recovered from its sealed
        copy in the bucket, or why not (and what to do), in words."""
        current = [k for k in await sitestate.keys(manifest) if k.retired_at is None]
        if not current:
            return "the site had no signing key yet: the next ship makes one"
        want = current[-1].fingerprint
        local = await asyncio.to_thread(load_key, self.layout.root)
        if local is not None:
            if local.fingerprint == want:
                return f"the site key {want} is this host's {key_path(self.layout.root)}"
            return (
                f"{key_path(self.layout.root)} holds the key {local.fingerprint}, not the site's "
                f"{want}: ships will not sign snapshots until it is put back (or coldkeep site "
                "new-key)"
            )
        got = await recover_key(self.store, self.site, want, self.identities)
        if isinstance(got, str):
            return (
                f"{got}: ships will not sign snapshots until the key is put back at "
                f"{key_path(self.layout.root)}, or coldkeep site new-key makes a new one"
            )
        await asyncio.to_thread(save_key, self.layout.root, got)
        return f"the site key {want} was recovered from the bucket"

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
            except RemoteMissing:
                problems.append(
                    f"{self.store.where(self.key(obj.key))}: not there: a ship lets a month's "
                    "older snapshots go once two newer manifest snapshots name a newer one; "
                    f"a rebuild from one of the site's two newest snapshots gets {month}"
                )
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
    choice: DrChoice = NO_CHOICE,
) -> FromRemoteReport:
    """This site's manifest, event months and the knowledge of what is remote,
    back from the remote tier (from the newest of the site's own snapshots, or
    the one ``choice`` picks; its site and key as ``choice`` says); without
    any manifest snapshot, every archive file fetched and the manifest rebuilt
    from them (``reads``: the cap on reading them back); sealed objects opened
    with ``identities``. The caller holds the lock."""
    async with rebuilding(
        layout, remote, stream=stream, cancel=cancel, identities=identities
    ) as rebuild:
        report = await rebuild.run(layout.manifest, choice)
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


@dataclass
class SnapshotList:
    """Every snapshot under a site's prefix, judged: what ``rebuild-manifest
    --from-remote --list`` shows."""

    where: str
    snapshots: list[Seen]
    trusted: str | None  # which keys are trusted, and why
    untrusted: str | None = None  # why none could be (the snapshots then unjudged)

    def to_dict(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "trusted": self.trusted,
            "untrusted": self.untrusted,
            "snapshots": [
                {
                    "key": s.key,
                    "verdict": s.verdict,
                    "why": s.why,
                    "statement": None if s.statement is None else asdict(s.statement),
                }
                for s in self.snapshots
            ],
        }


async def list_snapshots(layout: Layout, remote: RemoteSettings, choice: DrChoice) -> SnapshotList:
    """Every snapshot under ``remote``'s site prefix, judged for the site
    ``choice`` names (or this host's, or the only one there); nothing written."""
    async with rebuilding(layout, remote, stream=EventStream(), cancel=None) as rebuild:
        found = await survey(rebuild.store, rebuild.site)
        trust, judged, untrusted = await rebuild.judged(found, choice)
        where = rebuild.store.where(rebuild.key("manifest/"))
        return SnapshotList(where, judged, trust.why if trust else None, untrusted)


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
