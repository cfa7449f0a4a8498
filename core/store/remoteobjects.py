"""What the manifest knows about the remote tier: one row per object shipped
(``remote_objects``), and what is still to ship.

Invariants:
- A row exists only for an object whose size and SHA-256 the server gave back
  equal to the local file's: the row is the proof that the copy is there.
- ``local_gone_at`` is set (committed) before the local copy is unlinked: a
  crash between leaves a local copy that the next ship removes, never an entry
  whose only copy nobody knows about.
- A path whose local copy is gone is read from the remote by everything that
  reads gzips; local checks (recovery's "missing", local verify) pass it by.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ..base.configremote import RemoteSettings
from ..base.names import db_params
from .connection import Statement, in_statements
from .entries import HAS_GZIP, KEPT_SQL
from .manifest import Manifest

# Kept entries (their gzip kept in the archive: what is shipped) with no remote
# copy, read from the schema's partial index of them (its WHERE is this one;
# named, or the planner took the status index and read every kept entry):
# reading them costs what is still to ship, not the archive.
_UNSHIPPED = f"remote = 0 AND {HAS_GZIP}"
_UNSHIPPED_ENTRIES = f"entries INDEXED BY entries_unshipped WHERE {_UNSHIPPED}"
# The objects whose local copy is still relied on, read from the schema's
# partial index of them: few, where the table holds every object shipped.
_HERE = "remote_objects INDEXED BY remote_objects_here WHERE local_gone_at IS NULL"


@dataclass(frozen=True)
class RemoteObject:
    path: str  # under archive_root, and under <prefix>/<site>/
    bytes: int
    sha256: str
    shipped_at: int  # ms since the epoch
    verified_at: int | None = None
    verify_error: str | None = None
    local_gone_at: int | None = None  # the local copy's drop recorded
    local_present: bool = True  # its unlink not yet confirmed
    month: str | None = None  # an event month's snapshot
    source_sig: str | None = None  # its database's size:mtime_ns when taken
    row_count: int | None = None  # a month snapshot's rows (None: shipped before they were counted)
    retain_until: int | None = None  # ms: the bucket's Object Lock keeps it until then
    legal_hold: bool = False  # its S3 legal hold is on
    sealed_to: str | None = None  # the age recipient set it is sealed to (its fingerprint)
    stored_as: str | None = None  # its key under the site's prefix, where not its path
    plain_bytes: int | None = None  # sealed: the local file's size (bytes: the stored object's)
    plain_sha256: str | None = None  # sealed: the local file's sha256
    version: str | None = None  # as the HEAD that confirmed it said (VersionId, else ETag)
    storage_class: str | None = None  # the S3 class it was put in (None: a folder, or before 24)
    seek_points: str | None = None  # a month's gzip: its seek points (None: the database itself)

    @property
    def key(self) -> str:
        """Its key under the site's prefix."""
        return self.path if self.stored_as is None else self.stored_as

    @property
    def local_bytes(self) -> int:
        """The local file's size (the object's, unless it is sealed)."""
        return self.bytes if self.plain_bytes is None else self.plain_bytes

    @property
    def local_sha256(self) -> str:
        return self.sha256 if self.plain_sha256 is None else self.plain_sha256

    @property
    def local(self) -> bool:
        """Its local copy is to be relied on (no drop recorded)."""
        return self.local_gone_at is None


_COLUMNS = ", ".join(f.name for f in fields(RemoteObject))


# The newest snapshot of the month of the remote_objects row at hand (the one
# ``latest_months`` takes).
_NEWEST = (
    "SELECT o.path FROM remote_objects AS o WHERE o.month = remote_objects.month "
    "ORDER BY o.shipped_at DESC, o.path DESC LIMIT 1"
)

# A key written down as loose (schema 19), or written down again; with the lock
# the copy at it is known to carry (schema 20), where known.
_LOOSE = (
    "INSERT OR REPLACE INTO remote_loose (key, path, at, retain_until, legal_hold) "
    "VALUES (?, ?, ?, ?, ?)"
)


@dataclass(frozen=True)
class Loose:
    """A key the bucket may hold that no row records: where it is under the
    site's prefix, the archive file it was a copy of, and the lock the copy
    there was last known to carry (None and False: none known)."""

    key: str
    path: str
    retain_until: int | None = None
    legal_hold: bool = False


def sealed_key(path: str, sealed_to: str) -> str:
    """A new key under the site's prefix for archive file ``path`` sealed to the
    set ``sealed_to``: ``<path>.<set>-<random>.age``. Age seals the same bytes
    differently each time, so an object an interrupted ship left at a key can
    never be told to hold what this one would: each sealing gets a key of its
    own, create-only, and new recipients a new object beside the old one."""
    return f"{path}.{sealed_to}-{secrets.token_hex(4)}.age"


def _unrecorded(path: str) -> list[Statement]:
    """The statements that drop ``path``'s row and its age streams."""
    return [
        ("DELETE FROM remote_objects WHERE path = ?", [path]),
        ("DELETE FROM sealed_spans WHERE path = ?", [path]),
    ]


def _row(r: Any) -> RemoteObject:
    obj = RemoteObject(*r)
    return replace(obj, local_present=bool(obj.local_present), legal_hold=bool(obj.legal_hold))


# A sealed object's age stream: (plaintext offset, plaintext length, offset in
# the object, length).
Stream = tuple[int, int, int, int]


def _streams(path: str, streams: Sequence[Stream]) -> list[Statement]:
    return [
        (
            "INSERT INTO sealed_spans (path, plain_offset, plain_length, offset, length) "
            "VALUES (?, ?, ?, ?, ?)",
            [path, *s],
        )
        for s in streams
    ]


@dataclass(frozen=True)
class MonthCount:
    """A local event month database as the last ship counted it."""

    rows: int
    sig: str  # its signature then


@dataclass(frozen=True)
class RemoteTotals:
    pending_files: int  # archive files (gzips and bundles) not yet shipped
    pending_entries: int
    shipped: int  # objects
    shipped_bytes: int
    remote_only: int  # objects whose local copy is dropped
    remote_only_bytes: int
    verify_failed: int
    pending_bytes: int = 0  # the gzip bytes of the pending entries
    pending_since: int | None = None  # the oldest pending entry's archived_at (None: none)


_COPIES = "SELECT path, local_gone_at IS NULL FROM remote_objects WHERE path IN"
# What the bucket's Object Lock keeps, as the HEADs that confirmed each object
# said it (never the lock asked for): the objects rows record, each counted from
# its partial index, and the copies left to delete that the lock keeps
# (remote_loose, few). Manifest snapshots have no rows: not counted, nor one
# remote_loose tracks (an upload of one never read back).
_LOCKED = (
    "SELECT count(*) FROM remote_objects INDEXED BY remote_objects_locked WHERE retain_until > ?"
)
_NOT_SNAPSHOT = "path NOT LIKE 'manifest/%'"
_LOOSE_LOCKED = f"SELECT count(*) FROM remote_loose WHERE retain_until > ? AND {_NOT_SNAPSHOT}"
_HELD = "SELECT count(*) FROM remote_objects INDEXED BY remote_objects_held WHERE legal_hold"
_LOOSE_HELD = f"SELECT count(*) FROM remote_loose WHERE legal_hold AND {_NOT_SNAPSHOT}"
# Of the locked rows, those whose expiry is recorded here and waits on the lock
# (a month's snapshots by their month's database, the path its expiry notes).
_LOCKED_EXPIRED = (
    f"{_LOCKED} AND (path IN (SELECT path FROM expiring) OR (month IS NOT NULL AND "
    "'events/' || month || '.db' IN (SELECT path FROM expiring)))"
)
_SEALED = (
    "SELECT count(*) FROM remote_objects INDEXED BY remote_objects_sealed "
    "WHERE sealed_to IS NOT NULL"
)


@dataclass(frozen=True)
class LockCounts:
    """What the bucket's Object Lock keeps now, as the rows the HEADs confirmed
    say it: objects retained (archive files, event month snapshots, copies left
    to delete; not manifest snapshots), those of them expired here that only the
    lock keeps, and objects under an S3 legal hold."""

    locked: int
    expired: int
    held: int


def read_lock_counts(db: sqlite3.Connection, now: int) -> tuple[int, int, int]:
    """(locked, legal held, sealed) as ``lock_counts`` counts them, on a plain
    connection (a fleet site's snapshot); what a manifest older than Object
    Lock, sealing or tracked leftovers has no table or column for counts none."""
    counts = []
    for sqls, params in (
        ((_LOCKED, _LOOSE_LOCKED), [now]),
        ((_HELD, _LOOSE_HELD), []),
        ((_SEALED,), []),
    ):
        total = 0
        for sql in sqls:
            try:
                [(n,)] = db.execute(sql, params).fetchall()
            except sqlite3.OperationalError:
                n = 0
            total += int(n)
        counts.append(total)
    return counts[0], counts[1], counts[2]


def read_copies(db: sqlite3.Connection, paths: Iterable[str]) -> dict[str, bool]:
    """``copies_of`` on a plain connection (``manifest.reading``: the restore
    browser's page, read in a thread); none from a manifest older than the
    remote tier (a fleet site's snapshot)."""
    found: dict[str, bool] = {}
    try:
        for sql, params in in_statements(_COPIES, (), db_params(dict.fromkeys(paths))):
            found.update((r[0], bool(r[1])) for r in db.execute(sql, params))
    except sqlite3.OperationalError:
        return {}
    return found


async def copies_of(manifest: Manifest, paths: Iterable[str]) -> dict[str, bool]:
    """Those of ``paths`` with a remote copy, and whether the local copy is still
    relied on (bound as parameters: a path that is not UTF-8 is a BLOB)."""
    found: dict[str, bool] = {}
    for sql, params in in_statements(_COPIES, (), dict.fromkeys(paths)):
        found.update((r[0], bool(r[1])) for r in await manifest.rows(sql, params))
    return found


class RemoteObjects:
    """The remote tier's rows in an open manifest."""

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest

    async def pending_files(self) -> list[str]:
        """Archive files (a gzip, or a bundle once for all its members) with kept
        entries and no remote copy, in path order."""
        rows = await self.manifest.rows(
            f"SELECT DISTINCT gz_path FROM {_UNSHIPPED_ENTRIES} ORDER BY gz_path"
        )
        return [r[0] for r in rows]

    async def pending_bytes(self) -> int:
        """The bytes ``pending_files`` holds (their entries' gzips)."""
        rows = await self.manifest.rows(
            f"SELECT coalesce(sum(gz_bytes), 0) FROM {_UNSHIPPED_ENTRIES}"
        )
        return int(rows[0][0])

    async def record(self, obj: RemoteObject, streams: Sequence[Stream] = ()) -> None:
        """``obj`` recorded, with its age streams (sealed: one per plaintext span);
        its key no longer loose."""
        marks = ", ".join("?" * len(fields(RemoteObject)))
        await self.manifest.transaction(
            [
                (
                    f"INSERT INTO remote_objects ({_COLUMNS}) VALUES ({marks})",
                    [getattr(obj, f.name) for f in fields(RemoteObject)],
                ),
                *_streams(obj.path, streams),
                ("DELETE FROM remote_loose WHERE key = ?", [obj.key]),
            ]
        )

    # Keys the bucket may hold that no row records (schema 19): written down
    # before the step that may leave one, cleared by the step that settles it.

    async def loose(self, key: str, path: str, at: int) -> None:
        """``key`` (a copy of archive file ``path``) written down before it is
        uploaded: a ship stopped before its row is recorded leaves it behind."""
        await self.manifest.run(_LOOSE, [key, path, at, None, 0])

    async def track(self, key: str, retain_until: int | None, legal_hold: bool) -> None:
        """Loose ``key``'s copy carries this lock, as the bucket said it (or the
        row it had said it): kept until the lock lets it go."""
        await self.manifest.run(
            "UPDATE remote_loose SET retain_until = ?, legal_hold = ? WHERE key = ?",
            [retain_until, int(legal_hold), key],
        )

    async def settled(self, key: str) -> None:
        """``key`` recorded, or gone from the bucket: no longer loose."""
        await self.manifest.run("DELETE FROM remote_loose WHERE key = ?", [key])

    async def loose_keys(self) -> list[Loose]:
        """Every key written down and not settled, with no row recording an
        object at it (those are settled here and left out), in key order."""
        await self.manifest.run(
            "DELETE FROM remote_loose WHERE EXISTS (SELECT 1 FROM remote_objects AS o "
            "WHERE o.path = remote_loose.path AND coalesce(o.stored_as, o.path) = remote_loose.key)"
        )
        rows = await self.manifest.rows(
            "SELECT key, path, retain_until, legal_hold FROM remote_loose ORDER BY key"
        )
        return [Loose(str(k), str(p), until, bool(held)) for k, p, until, held in rows]

    async def set_loose_hold(self, key: str, on: bool) -> None:
        await self.manifest.run(
            "UPDATE remote_loose SET legal_hold = ? WHERE key = ?", [int(on), key]
        )

    async def loose_held(self) -> list[str]:
        """The loose keys whose copy's S3 legal hold is on, in key order."""
        rows = await self.manifest.rows(
            "SELECT key FROM remote_loose WHERE legal_hold ORDER BY key"
        )
        return [str(r[0]) for r in rows]

    async def stream_of(self, path: str, offset: int, length: int) -> tuple[int, int, int] | None:
        """The age stream of sealed object ``path`` that holds the local file's
        bytes [offset, offset + length) (a bundle member): its (offset, length)
        in the object, and how many plaintext bytes of it come first; None
        where no stream ends with them."""
        rows = await self.manifest.rows(
            "SELECT plain_offset, plain_length, offset, length FROM sealed_spans "
            "WHERE path = ? AND plain_offset <= ? ORDER BY plain_offset DESC LIMIT 1",
            [path, offset],
        )
        if not rows:
            return None
        p_off, p_len, off, n = (int(v) for v in rows[0])
        if p_off + p_len != offset + length:
            return None
        return off, n, offset - p_off

    async def get(self, path: str) -> RemoteObject | None:
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM remote_objects WHERE path = ?", [path]
        )
        return _row(rows[0]) if rows else None

    async def of_paths(self, paths: Iterable[str]) -> dict[str, RemoteObject]:
        """The rows of those of ``paths`` that have one (bound as parameters: a
        path that is not UTF-8 is a BLOB)."""
        found: dict[str, RemoteObject] = {}
        sql = f"SELECT {_COLUMNS} FROM remote_objects WHERE path IN"
        for statement, params in in_statements(sql, (), dict.fromkeys(paths)):
            rows = await self.manifest.rows(statement, params)
            found.update((o.path, o) for o in map(_row, rows))
        return found

    async def month_sizes(self) -> dict[str, list[int]]:
        """Each event month's snapshots' sizes (read from the months' own index)."""
        sizes: dict[str, list[int]] = {}
        for month, size in await self.manifest.rows(
            "SELECT month, bytes FROM remote_objects WHERE month IS NOT NULL ORDER BY month, path"
        ):
            sizes.setdefault(month, []).append(size)
        return sizes

    async def month_snapshots(self) -> dict[str, list[str]]:
        """Each event month's snapshots' paths (read from the months' own index)."""
        paths: dict[str, list[str]] = {}
        for month, path in await self.manifest.rows(
            "SELECT month, path FROM remote_objects WHERE month IS NOT NULL ORDER BY month, path"
        ):
            paths.setdefault(month, []).append(path)
        return paths

    async def after(self, path: str | None, limit: int) -> list[RemoteObject]:
        """Up to ``limit`` objects after ``path`` (None: from the first), in path
        order: a page of the table read by its key, at any size."""
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM remote_objects WHERE path > ? ORDER BY path LIMIT ?",
            ["" if path is None else path, limit],
        )
        return [_row(r) for r in rows]

    async def span(self, path: str | None, limit: int) -> tuple[int, int]:
        """(how many, their bytes) of ``after(path, limit)``, without reading them."""
        [(n, size)] = await self.manifest.rows(
            "SELECT count(*), coalesce(sum(bytes), 0) FROM (SELECT bytes FROM remote_objects "
            "WHERE path > ? ORDER BY path LIMIT ?)",
            ["" if path is None else path, limit],
        )
        return int(n), int(size)

    async def latest_months(self) -> dict[str, RemoteObject]:
        """Each event month's newest snapshot."""
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM remote_objects WHERE month IS NOT NULL "
            f"AND path = ({_NEWEST}) ORDER BY month"
        )
        return {obj.month: obj for obj in map(_row, rows) if obj.month}

    async def name_newest_months(self, generation: int) -> None:
        """Each event month's newest snapshot (``latest_months``') marked as
        named by the manifest snapshot of ``generation``, about to be taken."""
        await self.manifest.run(
            "UPDATE remote_objects SET newest_in = ? "
            f"WHERE month IS NOT NULL AND path = ({_NEWEST})",
            [generation],
        )

    async def superseded_months(self, kept_from: int) -> list[RemoteObject]:
        """The event month snapshots that no manifest snapshot of generation
        ``kept_from`` or later names as its month's newest, and no S3 legal
        hold is on."""
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM remote_objects WHERE month IS NOT NULL "
            f"AND coalesce(newest_in, 0) < ? AND NOT legal_hold AND path != ({_NEWEST}) "
            "ORDER BY path",
            [kept_from],
        )
        return [_row(r) for r in rows]

    async def supersede(self, objs: Sequence[RemoteObject], at: int) -> None:
        """``objs`` no longer recorded, each written down as loose with the
        lock its row says it carries, in one transaction: the placer deletes
        them, or tracks them while the bucket's lock keeps them."""
        statements: list[Statement] = []
        for obj in objs:
            statements.append(
                (_LOOSE, [obj.key, obj.path, at, obj.retain_until, int(obj.legal_hold)])
            )
            statements += _unrecorded(obj.path)
        await self.manifest.transaction(statements)

    async def of_month(self, month: str) -> list[RemoteObject]:
        """Every snapshot shipped of event month ``month``."""
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM remote_objects WHERE month = ? ORDER BY path", [month]
        )
        return [_row(r) for r in rows]

    async def newest_by_unit(self, gz_path: str) -> dict[str, int]:
        """Each unit's newest mtime (ns) among the entries of archive file
        ``gz_path`` not expired: when retention lets the file go."""
        rows = await self.manifest.rows(
            "SELECT unit, max(mtime_ns) FROM entries INDEXED BY entries_location "
            "WHERE gz_path = ? AND status != 'expired' GROUP BY unit",
            [gz_path],
        )
        return {str(unit): int(newest) for unit, newest in rows}

    async def streams_of(self, path: str) -> list[Stream]:
        """Sealed object ``path``'s age streams, in the order of the file they
        tile (none: one stream, the whole object)."""
        rows = await self.manifest.rows(
            "SELECT plain_offset, plain_length, offset, length FROM sealed_spans "
            "WHERE path = ? ORDER BY plain_offset",
            [path],
        )
        return [(int(a), int(b), int(c), int(d)) for a, b, c, d in rows]

    async def not_sealed_to(self, fingerprint: str) -> list[RemoteObject]:
        """Every object stored unsealed or sealed to another recipient set, in
        path order: what ``rekey`` seals again."""
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM remote_objects WHERE sealed_to IS NULL "
            "OR sealed_to != ? ORDER BY path",
            [fingerprint],
        )
        return [_row(r) for r in rows]

    async def member_spans(self, gz_path: str) -> list[tuple[int, int]]:
        """The members of bundle ``gz_path`` (offset, length), every entry's that
        has one whatever its status: the bundle's bytes hold them all."""
        rows = await self.manifest.rows(
            "SELECT DISTINCT member_offset, member_length FROM entries INDEXED BY "
            "entries_location WHERE gz_path = ? AND member_offset IS NOT NULL "
            "ORDER BY member_offset",
            [gz_path],
        )
        return [(int(o), int(n)) for o, n in rows]

    async def shipped_files(self) -> list[str]:
        """Every archive file shipped (not event months), in path order."""
        rows = await self.manifest.rows(
            "SELECT path FROM remote_objects WHERE month IS NULL AND path LIKE 'files/%' "
            "ORDER BY path"
        )
        return [r[0] for r in rows]

    async def legal_held(self) -> list[str]:
        """The objects whose S3 legal hold is on, in path order."""
        rows = await self.manifest.rows(
            "SELECT path FROM remote_objects INDEXED BY remote_objects_held WHERE legal_hold "
            "ORDER BY path"
        )
        return [r[0] for r in rows]

    async def any_legal_hold(self) -> bool:
        """Whether the bucket was told to put an S3 legal hold on anything still
        there: an object a row records, or a loose copy."""
        rows = await self.manifest.rows(
            "SELECT 1 FROM remote_objects INDEXED BY remote_objects_held WHERE legal_hold "
            "UNION ALL SELECT 1 FROM remote_loose WHERE legal_hold LIMIT 1"
        )
        return bool(rows)

    async def set_legal_hold(self, path: str, on: bool) -> None:
        await self.manifest.run(
            "UPDATE remote_objects SET legal_hold = ? WHERE path = ?", [int(on), path]
        )

    async def lock_counts(self, now: int) -> LockCounts:
        """What the bucket's lock keeps after ``now``, as the rows say it."""
        counts = []
        for sql, params in (
            (_LOCKED, [now]),
            (_LOOSE_LOCKED, [now]),
            (_LOCKED_EXPIRED, [now]),
            (_HELD, []),
            (_LOOSE_HELD, []),
        ):
            [(n,)] = await self.manifest.rows(sql, params)
            counts.append(int(n))
        locked, loose_locked, expired, held, loose_held = counts
        return LockCounts(locked + loose_locked, expired, held + loose_held)

    async def sealed_count(self) -> int:
        """Objects sealed to age recipients (from their partial index)."""
        [(n,)] = await self.manifest.rows(_SEALED)
        return int(n)

    async def droppable(self, shipped_before: int) -> list[RemoteObject]:
        """Archive files shipped before ``shipped_before`` whose local copy is still
        there and whose remote copy has not failed a verify."""
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM {_HERE} AND month IS NULL AND path LIKE 'files/%' "
            "AND verify_error IS NULL AND shipped_at <= ? ORDER BY path",
            [shipped_before],
        )
        return [_row(r) for r in rows]

    async def relied_on_here(self) -> list[str]:
        """Archive files shipped whose local copy is still relied on (no drop
        recorded), in path order."""
        rows = await self.manifest.rows(f"SELECT path FROM {_HERE} AND month IS NULL ORDER BY path")
        return [r[0] for r in rows]

    async def mark_local_gone(self, path: str, at: int) -> None:
        await self.manifest.run(
            "UPDATE remote_objects SET local_gone_at = ? WHERE path = ?", [at, path]
        )

    async def any_gone(self) -> bool:
        rows = await self.manifest.rows(
            "SELECT 1 FROM remote_objects WHERE local_gone_at IS NOT NULL LIMIT 1"
        )
        return bool(rows)

    async def count_under(self, prefix: str) -> int:
        """How many objects are recorded with paths starting with ``prefix``."""
        [(n,)] = await self.manifest.rows(
            "SELECT count(*) FROM remote_objects WHERE path >= ? AND path < ?",
            [prefix, prefix + "\U0010ffff"],
        )
        return int(n)

    async def by_class(self, remote: RemoteSettings) -> list[tuple[str, int, int]]:
        """Each storage class the recorded objects are in, with their count and
        bytes (a row from before classes were recorded: its kind's class now)."""
        rows = await self.manifest.rows(
            "SELECT coalesce(storage_class, CASE substr(path, 1, 6) WHEN 'files/' THEN ? "
            "WHEN 'events' THEN ? ELSE ? END) AS cls, count(*), coalesce(sum(bytes), 0) "
            "FROM remote_objects GROUP BY cls ORDER BY cls",
            [remote.storage_class, remote.events_storage_class, remote.meta_class],
        )
        return [(str(c), int(n), int(b)) for c, n, b in rows]

    async def size_under(self, prefix: str) -> tuple[int, int]:
        """How many objects are recorded with paths starting with ``prefix``, and
        their bytes."""
        [(n, size)] = await self.manifest.rows(
            "SELECT count(*), coalesce(sum(bytes), 0) FROM remote_objects "
            "WHERE path >= ? AND path < ?",
            [prefix, prefix + "\U0010ffff"],
        )
        return int(n), int(size)

    async def gone_under(self, prefix: str) -> list[str]:
        """The remote-only paths starting with ``prefix`` (a range of the key)."""
        rows = await self.manifest.rows(
            "SELECT path FROM remote_objects WHERE path >= ? AND path < ? "
            "AND local_gone_at IS NOT NULL",
            [prefix, prefix + "\U0010ffff"],
        )
        return [r[0] for r in rows]

    async def mark_remote_only(self, paths: list[str], at: int) -> None:
        """``paths`` have no local copy here (a new host after a disaster): their
        drop recorded and confirmed at once, in one transaction."""
        # Bound as parameters, never as JSON: a path that is not UTF-8 is a BLOB.
        await self.manifest.transaction(
            [
                (
                    "UPDATE remote_objects SET local_gone_at = ?, local_present = 0 "
                    f"WHERE path IN ({', '.join('?' * len(chunk))})",
                    [at, *chunk],
                )
                for chunk in (paths[i : i + 500] for i in range(0, len(paths), 500))
            ]
        )

    async def confirm_local_gone(self, path: str) -> None:
        await self.manifest.run(
            "UPDATE remote_objects SET local_present = 0 WHERE path = ?", [path]
        )

    async def unconfirmed_drops(self) -> list[str]:
        """Drops recorded whose unlink was never confirmed (a crash between)."""
        rows = await self.manifest.rows(
            "SELECT path FROM remote_objects WHERE local_gone_at IS NOT NULL AND local_present = 1"
        )
        return [r[0] for r in rows]

    async def set_source_sig(self, path: str, sig: str, rows: int) -> None:
        """A month snapshot found to hold what its database holds now (signature
        ``sig``, ``rows`` rows)."""
        await self.manifest.run(
            "UPDATE remote_objects SET source_sig = ?, row_count = ? WHERE path = ?",
            [sig, rows, path],
        )

    async def month_counts(self) -> dict[str, MonthCount]:
        """Each event month's local database as the last ship counted it."""
        rows = await self.manifest.rows(
            "SELECT month, row_count, source_sig FROM event_months ORDER BY month"
        )
        return {str(m): MonthCount(int(n), str(sig)) for m, n, sig in rows}

    async def count_month(self, month: str, rows: int, sig: str, at: int) -> None:
        """Event month ``month``'s local database holds ``rows`` rows (signature
        ``sig``) as of ``at``: what the next manifest snapshot tells the bucket."""
        await self.manifest.run(
            "INSERT INTO event_months (month, row_count, source_sig, counted_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (month) DO UPDATE SET row_count = excluded.row_count, "
            "source_sig = excluded.source_sig, counted_at = excluded.counted_at",
            [month, rows, sig, at],
        )

    async def mark_verified(
        self, path: str, at: int, error: str | None, version: str | None = None
    ) -> None:
        """The object read back at ``at``: ``error`` why it is not the one shipped
        (None: it is), and ``version``, the version of it whose bytes proved it
        (None: the one recorded is kept). A row shipped before versions were
        recorded gets one so; one whose object was put again, the same bytes,
        gets the new one (reads pinned to the old would fail for good)."""
        await self.manifest.run(
            "UPDATE remote_objects SET verified_at = ?, verify_error = ?, "
            "version = coalesce(?, version) WHERE path = ?",
            [at, error, version, path],
        )

    async def replace_row(
        self, obj: RemoteObject, streams: Sequence[Stream] = (), *, at: int = 0
    ) -> None:
        """``obj``'s row (and its streams) instead of the one its path has: a copy
        shipped again, or sealed again to new recipients, once read back. The
        key it had, where another, is loose from then until its object is
        deleted (``settled``), with the lock its row said the copy there has.
        The row is updated in place: which manifest snapshot names it as its
        month's newest stays."""
        old = await self.get(obj.path)
        was = (
            [(_LOOSE, [old.key, obj.path, at, old.retain_until, int(old.legal_hold)])]
            if old is not None and old.key != obj.key
            else []
        )
        columns = [f.name for f in fields(RemoteObject)]
        await self.manifest.transaction(
            [
                *was,
                ("DELETE FROM remote_loose WHERE key = ?", [obj.key]),
                ("DELETE FROM sealed_spans WHERE path = ?", [obj.path]),
                (
                    f"INSERT INTO remote_objects ({_COLUMNS}) "
                    f"VALUES ({', '.join('?' * len(columns))}) ON CONFLICT (path) DO UPDATE SET "
                    + ", ".join(f"{c} = excluded.{c}" for c in columns if c != "path"),
                    [getattr(obj, c) for c in columns],
                ),
                *_streams(obj.path, streams),
            ]
        )

    async def failed_verify(self) -> list[RemoteObject]:
        rows = await self.manifest.rows(
            f"SELECT {_COLUMNS} FROM remote_objects WHERE verify_error IS NOT NULL ORDER BY path"
        )
        return [_row(r) for r in rows]

    async def verify_cursor(self) -> str | None:
        """The last path the previous sampled verify read (None: start over)."""
        rows = await self.manifest.rows("SELECT verify_cursor FROM remote_state WHERE id = 1")
        return str(rows[0][0]) if rows and rows[0][0] else None

    async def set_verify_cursor(self, path: str | None) -> None:
        await self.manifest.run(
            "INSERT INTO remote_state (id, verify_cursor) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET verify_cursor = excluded.verify_cursor",
            [path or ""],
        )

    async def forget(self, path: str) -> None:
        """A remote copy found bad or missing, to be shipped again from local."""
        await self.manifest.transaction(_unrecorded(path))

    async def kept_bytes_shipped(self) -> tuple[int, int]:
        """The gzip bytes of kept entries with a remote copy: (those whose local
        copy is kept too, those whose local copy is dropped), from the totals
        the schema keeps per status and copies (entry_totals): a few rows."""
        rows = await self.manifest.rows(
            "SELECT remote, coalesce(sum(gz_bytes), 0) FROM entry_totals "
            f"WHERE remote > 0 AND status {KEPT_SQL} GROUP BY remote"
        )
        found = {int(remote): int(size) for remote, size in rows}
        return found.get(1, 0), found.get(2, 0)

    async def totals(self) -> RemoteTotals:
        # The pending bytes and age come with the count: the rows are read anyway.
        [(files, entries, pending, since)] = await self.manifest.rows(
            "SELECT count(DISTINCT gz_path), count(*), coalesce(sum(gz_bytes), 0), "
            f"min(archived_at) FROM {_UNSHIPPED_ENTRIES}"
        )
        # Kept by the schema's triggers (remote_totals): one row, at any size.
        [(n, size, gone, gone_bytes, bad)] = await self.manifest.rows(
            "SELECT objects, bytes, gone, gone_bytes, bad FROM remote_totals"
        )
        return RemoteTotals(files, entries, n, size, gone, gone_bytes, bad, pending, since)
