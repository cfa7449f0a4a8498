"""The fleet view's core (``coldkeep console --remote URL``): every site under a
remote prefix, read from the manifest snapshots their ships left, searched
together and restored from, without any site's host or coldkeep.toml.

Each site's newest snapshot is downloaded once into ``cache/<site>/coldkeep.db``
(a new snapshot replaces it at the next open); a restore reads the files from
the remote (``RemoteReader``) into a folder the operator names, never in place.

Invariants:
- Read-only towards the remote: nothing is written under the prefix.
- The cache holds each site's snapshot and the marker naming it, the
  statements and heartbeats its last load read (``reads.json``: a warm load
  reads only what is new; smallreads.py) and their listing (``listing.json``:
  a warm load lists the site again only when the fleet's index of beats says
  it beat since, or an hour on; keptlisting.py); the scratch
  files of a fetch (and what SQLite left beside one while checking it) are
  removed after it, and those a killed view left at the site's next load.
- A snapshot is used only if it reads back whole (the server's checksum) and
  passes ``integrity_check``; a site without a usable one is listed with why.
  A sealed snapshot (client-side encryption) is opened with the identity the
  view was given; without one its site is listed with "sealed: give
  --identity" as its problem.
- A restored file's sha256 is checked against its entry before it is placed,
  as in any restore; a file that was never shipped is reported ``missing``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import resource
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ..base.cancel import CancelToken
from ..base.codec import Codec
from ..base.configremote import RemoteSettings
from ..base.errors import RemoteError
from ..base.fsutil import fsync_dir, rename_noreplace, unlink_if_present
from ..base.layout import Layout
from ..base.ratelimit import RateLimiter
from ..base.stream import EventStream
from ..base.times import now_ms
from ..base.userdirs import user_dir
from ..files.catalog import Catalog, load_catalog
from ..files.filemove import FileMover
from ..files.find import FleetFound, Found, NothingFound, find
from ..files.restore import RestoreReport, check_restore_root, restore_files
from ..remote import heartbeat
from ..remote.bucketlock import snapshot_taken_at
from ..remote.connect import open_store
from ..remote.fetch import RemoteReader, clear_scratch
from ..remote.heartbeat import Heard
from ..remote.keptlisting import Entry, KeptListing, beat_index
from ..remote.lakelayout import LAKE_DIR
from ..remote.objectstore import ObjectInfo, ObjectStore, RemoteNoBucket
from ..remote.rebuild import snapshot_fetched
from ..remote.sealing import Identities, IdentityNeeded
from ..remote.smallreads import SmallReads
from ..remote.snapshots import NoTrust, Seen, Statement, Trust, resolve_trust, survey
from ..remote.unseal import SealedUnreadable
from ..store.connection import ManifestError, reading
from ..store.manifest import Manifest
from ..store.remoteobjects import read_lock_counts
from .health import NO_BEAT, Health, HealthRules, judge

# Statements read per site: the newest by the generation their names say.
FLEET_STATEMENTS = 3
UNJUDGED = Health("silent", (NO_BEAT,), None)
DEFAULT_RULES = HealthRules()
# Sites read at once (each a few requests: its statements, its beats, a snapshot;
# at 30 ms a request, a thousand sites want this many to be read in seconds).
SITES_IN_FLIGHT = 32
# A site's catalog has an index of paths from this many entries (fewer are
# filtered quicker by a scan: load_catalog).
INDEX_FROM = 50_000
# Open files a fleet leaves for everything but its catalogs' kept connections
# (the S3 client's sockets, a restore's files, SQLite's temporary files).
FILES_SPARE = 256
# A site whose newest snapshot is sealed, listed without an identity.
SEALED = "sealed: give --identity"


def fleet_cache(remote: RemoteSettings) -> Path:
    """Where the fleet view keeps the snapshots it fetched for ``remote``:
    ``$XDG_CACHE_HOME/coldkeep/fleet/<sha of the URL>`` (~/.cache by default;
    the endpoint counts too, when there is one: another server, other data)."""
    name = remote.url if remote.endpoint_url is None else f"{remote.endpoint_url} {remote.url}"
    return user_dir("cache") / "fleet" / hashlib.sha256(name.encode()).hexdigest()[:16]


async def find_across(remote: RemoteSettings, cache: Path, pattern: str) -> FleetFound:
    """``pattern`` found in every site's newest snapshot under ``remote``'s prefix
    (fetched into ``cache`` when it is not there yet; nothing written remotely)."""
    fleet = Fleet(remote, cache)
    try:
        await fleet.load()
    finally:
        await fleet.close()
    return await fleet.find(pattern)


@dataclass(frozen=True)
class FleetSite:
    site: str
    snapshot: str | None  # the manifest snapshot in use (its key)
    problem: str | None = None  # why there is none
    locked: int = 0  # objects its bucket's Object Lock retains now, as its snapshot says
    legal_held: int = 0  # objects under an S3 legal hold
    sealed: int = 0  # objects sealed to age recipients
    taken_at: int | None = None  # ms: when its snapshot was taken, as signed (or named)
    heard: Heard | None = None  # its newest believable heartbeat (None: none could be)
    health: Health = UNJUDGED

    @property
    def usable(self) -> bool:
        return self.snapshot is not None


def files_to_keep(wanted: int) -> int:
    """How many of ``wanted`` files this process may keep open besides what
    it needs otherwise (``FILES_SPARE``), its soft limit on open files raised
    toward the hard one as far as that takes: a thousand sites' catalogs
    kept open would pass a soft limit of 1,024, as most systems set."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + FILES_SPARE
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(need, hard)
        with contextlib.suppress(ValueError, OSError):  # refused: the limit there is
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(0, min(wanted, soft - FILES_SPARE))


def rollback_journal(snapshot: Path) -> None:
    """A cached snapshot in rollback-journal mode, as it is not already (it is
    only ever read): a thousand sites' catalogs kept open hold a thousand
    files, not 3,000. Blocking."""
    with snapshot.open("rb") as f:
        header = f.read(20)
    if header[18:20] == b"\x01\x01":
        return
    with contextlib.closing(sqlite3.connect(snapshot)) as db:
        try:
            db.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.OperationalError:  # another view reading it now: next time
            return


class Fleet:
    """The sites under one remote prefix, their snapshots cached under ``cache``."""

    def __init__(
        self,
        remote: RemoteSettings,
        cache: Path,
        identities: Identities | None = None,
        rules: HealthRules = DEFAULT_RULES,
    ) -> None:
        self.remote = remote
        self.cache = cache
        self.identities = identities  # opens sealed snapshots and copies
        self.store: ObjectStore = open_store(remote)
        self.sites: list[FleetSite] = []
        self.rules = rules
        # The sites a load has finished so far, as they finish (the view shows them).
        self.loaded: dict[str, FleetSite] = {}

    async def close(self) -> None:
        await self.store.close()

    def layout(self, site: str) -> Layout:
        return Layout(self.cache / site)

    async def site_names(self) -> list[str]:
        """The sites under the prefix: its folders but the fleet's lake."""
        return [n for n in await self.store.list_dirs("") if n != LAKE_DIR]

    async def load(self) -> list[FleetSite]:
        """Every site and its newest usable snapshot, fetched when not cached,
        and its health. What each one's bucket locks is read by ``counted``
        (a read of each snapshot: ``fleet status`` goes without, and the fleet
        view reads them once its table is full)."""
        await asyncio.to_thread(self.cache.mkdir, parents=True, exist_ok=True)
        try:
            names = await self.site_names()
        except RemoteNoBucket as err:  # the URL came from --remote, not a remote.url
            raise err.said_for("check the URL given to --remote") from err
        index = await beat_index(self.store)
        gate = asyncio.Semaphore(SITES_IN_FLIGHT)
        self.loaded = {}

        async def one(name: str) -> FleetSite:
            async with gate:
                site = await self._site(name, index.get(name))
            now = await self.store.server_now()
            site = replace(site, health=judge(site.problem, site.heard, now, self.rules))
            self.loaded[name] = site
            return site

        self.sites = list(await asyncio.gather(*(one(name) for name in names)))
        return self.sites

    async def find(self, pattern: str) -> FleetFound:
        """``pattern`` found in each site's snapshot as ``load`` last fetched it
        (the fleet view's sites; nothing is fetched or listed again)."""
        found: dict[str, Found] = {}
        problems = {s.site: s.problem or "no snapshot" for s in self.sites if not s.usable}
        for s in self.sites:
            if not s.usable:
                continue
            try:
                found[s.site] = await find(self.layout(s.site).manifest, pattern, None)
            except NothingFound:
                continue
            except ManifestError as err:  # a snapshot this coldkeep cannot read as it is
                problems[s.site] = str(err)
        if not found:
            searched = f" ({len(problems)} could not be searched)" if problems else ""
            raise NothingFound(
                f"nothing archived matches {pattern!r} at any of the {len(self.sites)} sites "
                f"under {self.remote.url}{searched}"
            )
        return FleetFound(pattern, found, problems)

    async def _snapshots(
        self, site: str, reads: SmallReads, listed: list[ObjectInfo]
    ) -> tuple[list[Seen], Trust | None] | str:
        """The site's own snapshots, newest first, as far as the bucket alone
        can tell (the only site id and the only key signing its snapshots
        there); an older coldkeep's unsigned ones where none is signed; else
        why none can be trusted. Only the newest few statements are read: a
        view of a thousand sites cannot read every one of each."""
        found = await survey(self.store, site, newest=FLEET_STATEMENTS, reads=reads, listed=listed)
        if not found.seen:
            return "no manifest snapshot (has it shipped yet?)"
        if not found.signed():
            unsigned = [s for s in found.seen if snapshot_taken_at(s.key) is not None]
            if not unsigned:
                return "no manifest snapshot"
            return sorted(unsigned, key=lambda s: s.key, reverse=True), None
        try:
            trust = resolve_trust(found, self.store.where(f"{site}/manifest/"))
        except NoTrust as err:
            return str(err)
        now = await self.store.server_now()
        return [s for s in found.judged(trust, now) if s.verdict == "own"], trust

    async def _site(self, site: str, indexed: list[Entry] | None) -> FleetSite:
        """The site as it is now; ``indexed``: its entries in the fleet's index
        of beats, as listed just now (None: it has none)."""
        layout = self.layout(site)
        now = now_ms()
        reads, kept, cached = await asyncio.to_thread(self._cached, site)
        beats, statements = f"{site}/{heartbeat.PREFIX}", f"{site}/manifest/"
        listed = kept.serves(indexed, now)
        if listed is None:
            # Its statements and its beats in one listing where the store can.
            listed = await self.store.list_under([beats, statements])
            if indexed or kept.holds:
                await asyncio.to_thread(kept.save, layout.scratch("listing"), indexed, listed, now)
        found = await self._snapshots(site, reads, listed[statements])
        if isinstance(found, str):
            return FleetSite(site, None, found)
        snapshots, trust = found
        if trust is None:  # an older coldkeep's: no key to believe a beat by
            heard = Heard(None, problem=f"{NO_BEAT} (its snapshots are not signed)")
        else:
            heard = await heartbeat.newest(self.store, site, trust, reads, listed[beats])
        await reads.save(layout.scratch("reads"))
        return replace(await self._snapshot(site, snapshots, cached), heard=heard)

    def _cached(self, site: str) -> tuple[SmallReads, KeptListing, str | None]:
        """What the cache holds of ``site`` (its folder made, and what a view
        killed mid-fetch left cleared): the statements and beats its last
        load read (a warm load reads only those that are new), their listing,
        and the key of the snapshot in place. One thread's work:
        a thousand sites' steps each on a thread of its own kept the loop
        waiting for the lock every thread takes in turn. Blocking."""
        layout = self.layout(site)
        layout.root.mkdir(exist_ok=True)
        clear_scratch(layout)
        reads = SmallReads.loaded(self.store, layout.root / "reads.json")
        kept = KeptListing.loaded(layout.root / "listing.json")
        marker = layout.root / "snapshot"
        in_place = marker.exists() and layout.manifest.exists()
        return reads, kept, marker.read_text() if in_place else None

    async def _snapshot(self, site: str, snapshots: list[Seen], cached: str | None) -> FleetSite:
        """The site with the newest of ``snapshots`` that reads back whole in
        place in the cache (``cached``: the key of the one there), or why
        none does."""
        if not snapshots:
            return FleetSite(site, None, "none of its snapshots is the site's own")
        layout = self.layout(site)
        marker = layout.root / "snapshot"
        problems = []
        for seen in snapshots:
            key = f"{site}/{seen.key}"
            if key == cached:
                return self._usable(site, seen)
            why = await self._fetch_snapshot(key, layout, seen.statement)
            if why is None:
                await asyncio.to_thread(marker.write_text, key)
                return self._usable(site, seen)
            if why == SEALED:  # an older snapshot would hide what the newest holds
                return FleetSite(site, None, SEALED)
            problems.append(why)
        return FleetSite(site, None, "; ".join(problems))

    async def counted(self) -> list[FleetSite]:
        """The sites as ``load`` left them, each usable one with what its bucket
        locks as its snapshot says."""
        gate = asyncio.Semaphore(SITES_IN_FLIGHT)

        async def one(site: FleetSite) -> FleetSite:
            if not site.usable:
                return site
            async with gate:
                locked, held, sealed = await asyncio.to_thread(self._lock_counts, site.site)
            return replace(site, locked=locked, legal_held=held, sealed=sealed)

        self.sites = list(await asyncio.gather(*(one(s) for s in self.sites)))
        return self.sites

    def _lock_counts(self, site: str) -> tuple[int, int, int]:
        with reading(self.layout(site).manifest) as db:
            return read_lock_counts(db, now_ms())

    def _usable(self, site: str, seen: Seen) -> FleetSite:
        """A site whose snapshot ``seen`` is in place."""
        taken = seen.statement.taken_at if seen.statement else snapshot_taken_at(seen.key)
        return FleetSite(site, f"{site}/{seen.key}", taken_at=taken)

    async def _fetch_snapshot(
        self, key: str, layout: Layout, statement: Statement | None
    ) -> str | None:
        """``key`` (with its signed ``statement``) in place as the site's cached
        manifest; None, or why not."""
        root = layout.root
        try:
            async with snapshot_fetched(
                self.store, key, layout, "fleet", self.identities, statement
            ) as (tmp, why):
                if why is not None:
                    return why
                await asyncio.to_thread(unlink_if_present, layout.manifest, root=root)
                await asyncio.to_thread(rename_noreplace, tmp, layout.manifest, root=root)
        except SealedUnreadable as err:
            if isinstance(err.cause, IdentityNeeded):
                return SEALED
            return str(err)
        except RemoteError as err:
            return str(err)
        await asyncio.to_thread(fsync_dir, root, root=root, site="fleet.cached")
        return None

    async def catalogs(self) -> dict[str, Catalog]:
        """Each usable site's entries, for searching across hosts, as many as
        the process may keep open with their connection kept (the caller
        closes them); the others open one for each filter."""
        usable = [s.site for s in self.sites if s.usable]
        kept = await asyncio.to_thread(files_to_keep, len(usable))
        loaded = await asyncio.gather(
            *(asyncio.to_thread(self._catalog, s, i < kept) for i, s in enumerate(usable))
        )
        return dict(zip(usable, loaded, strict=True))

    def _catalog(self, site: str, keep_open: bool) -> Catalog:
        """The site's catalog; one kept open in rollback-journal mode first (a
        reader of a WAL database holds three files open). Blocking."""
        manifest = self.layout(site).manifest
        if keep_open:
            rollback_journal(manifest)
        return load_catalog(manifest, keep_open=keep_open, index_from=INDEX_FROM)

    @asynccontextmanager
    async def _mover(self, site: str) -> AsyncIterator[tuple[Manifest, FileMover, RemoteReader]]:
        layout = self.layout(site)
        async with await Manifest.open(layout.manifest) as manifest:
            limiter = RateLimiter(self.remote.bytes_per_s)
            # live_root is never written: a fleet restore always goes --to a folder.
            mover = FileMover(layout.root, layout, manifest, Codec("zlib", 6), limiter)
            reader = RemoteReader(
                self.store, site, manifest, layout, limiter, identities=self.identities
            )
            yield manifest, mover, reader

    async def restore(
        self,
        site: str,
        entry_ids: list[int],
        to: Path,
        *,
        stream: EventStream,
        cancel: CancelToken | None = None,
    ) -> RestoreReport:
        """The entries of ``site`` named, from the remote, under ``to`` (checked as
        ``restore --to`` is, and outside the snapshot cache)."""
        to = check_restore_root(to, self.cache)
        async with self._mover(site) as (manifest, mover, reader):
            entries = [e for i in entry_ids if (e := await manifest.entry(i)) is not None]
            return await restore_files(
                mover, entries, to=to, grace_days=0, stream=stream, cancel=cancel, remote=reader
            )
