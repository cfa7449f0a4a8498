"""``coldkeep.db``'s connection, and the tables of archived file versions: the
entries, the restore intents that guard a restore's writes in a live directory,
and the verify cursor (``verify_state``) that walks the entries. SQLite in WAL
mode with ``synchronous = FULL``, reached through aiosqlite so the event loop
never waits on it; opening it checks and migrates the schema (schema.py) before
anything else is written.

Invariants:
- Only this module holds a connection to coldkeep.db: the ``Manifest`` (one
  thread, and one gate every trip to it takes, so no statement joins another
  coroutine's transaction), and the plain read-only one ``reading`` lends a
  worker thread for one bulk read.
- Each table's statements come from the module of ``store`` that owns it, which
  sends them through ``run``, ``rows``, ``insert``, ``run_many`` or
  ``transaction``; this module owns the three tables above. Entries are read
  through named queries (no caller's SQL condition is spliced into them).
- An entry is committed (durably) before its source may be unlinked (step 6 before
  step 7): a crash can leave a source with an entry, never an entry-less gzip that
  recovery cannot explain, nor a lost source.
- A restore intent is committed before a restore writes anything in a live
  directory, and cleared after, so a crash mid-restore leaves only names the
  intent lists (``<target>.restore-partial``), removed by recovery.
- Stored paths are relative to ``archive_root`` (gzips) or to ``live_root``
  (relpaths); the archive can be moved as a whole.
- Every SQLite error it raises names this database (``ioerror.DatabaseFailed``):
  "disk I/O error" alone does not tell an operator which file to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, Self

import aiosqlite

from ..base.codec import Span
from ..base.errors import ColdkeepError
from ..base.grouped import Grouped
from ..base.ioerror import DatabaseFailed, naming_db
from ..base.names import db_params, db_row, is_text
from ..base.times import DAY_MS, now_ms
from .pathlisting import bytes_after, text_after
from .schema import migration_scripts, version_problem

EntryStatus = Literal["archived", "stale", "restored", "missing", "expired"]
# Ids (or rows) written by one statement: one commit each, within SQLite's
# default limit of 32,766 parameters.
IDS_PER_STATEMENT = 500
_MARK_GONE = "UPDATE entries SET source_present = 0 WHERE id IN"


class ManifestError(ColdkeepError):
    """The manifest cannot be used as it is; the message says why and what to do."""


@dataclass(frozen=True)
class NewEntry:
    unit: str
    relpath: str
    bytes: int
    sha256: str
    gz_path: str
    gz_bytes: int
    mtime_ns: int
    dev: int | None
    ino: int | None
    mode: int
    archived_at: int
    status: EntryStatus = "archived"
    grace_until: int | None = None  # restored in place: passes leave it alone until then
    source_present: bool = True
    member_offset: int | None = None  # a bundle member: where its gzip lies in gz_path
    member_length: int | None = None
    ctime_ns: int | None = None  # the source's when archived (None: not recorded)
    seek_points: str | None = None  # codec.encode_points of its gzip's (None: none)

    @property
    def span(self) -> Span | None:
        """Where the gzip lies in ``gz_path`` when that is a bundle."""
        if self.member_offset is None or self.member_length is None:
            return None
        return Span(self.member_offset, self.member_length)

    @property
    def location(self) -> str:
        """The gzip's place, as an operator reads it: its path, and for a bundle
        member the byte where it starts."""
        return self.gz_path if self.span is None else f"{self.gz_path}@{self.member_offset}"


@dataclass(frozen=True)
class Entry(NewEntry):
    id: int = 0
    verified_at: int | None = None
    verify_error: str | None = None
    expired_at: int | None = None  # a tombstone: when retention deleted its gzip


# An entry's fields are its columns, but one: the restore grace is stored in the
# column ``hold_until`` (its name since schema 1, on disk). This is the one place
# the field and the column meet.
_COLUMN_OF = {"grace_until": "hold_until"}
_ENTRY_FIELDS = tuple(f.name for f in fields(Entry))
_NEW_FIELDS = tuple(f.name for f in fields(NewEntry))
_ENTRY_COLUMNS = tuple(_COLUMN_OF.get(f, f) for f in _ENTRY_FIELDS)
_NEW_COLUMNS = tuple(_COLUMN_OF.get(f, f) for f in _NEW_FIELDS)
# The statuses whose gzip should be in the archive (every copy kept: not
# "missing", not expired), and the same as SQL over ``entries.status``.
KEPT_STATUSES: tuple[EntryStatus, ...] = ("archived", "stale", "restored")
KEPT_SQL = f"IN ({', '.join(repr(s) for s in KEPT_STATUSES)})"
_HAS_GZIP = f"status {KEPT_SQL}"
# Every status but the tombstone's.
_NOT_EXPIRED = "status IN ('archived', 'stale', 'restored', 'missing')"
# Kept entries whose gzip has a local copy (not one dropped once it was shipped):
# told by the copies mark the schema keeps (2: remote only), not by a list of
# every remote-only path.
_VERIFIABLE = f"{_HAS_GZIP} AND remote < 2"
# The same, read from the schema's partial index of them (its WHERE is this one).
_VERIFIABLE_ENTRIES = f"entries INDEXED BY entries_local WHERE {_VERIFIABLE}"


@dataclass(frozen=True)
class ArchiveFile:
    """One archive file (a gzip, or a bundle) and its entries, summed."""

    gz_path: str
    unit: str
    entries: int
    newest_mtime_ns: int
    gz_bytes: int
    bundled: bool
    shipped_bytes: int | None = None  # its remote copy's size (None: not shipped)
    dropped: bool = False  # its local copy dropped for the remote one
    retain_until: int | None = None  # ms: the bucket's Object Lock keeps its remote copy until


# One statement and its parameters, for ``Manifest.transaction``.
Statement = tuple[str, Sequence[Any]]


def tombstone(gz_path: str, at: int) -> Statement:
    """The entries of archive file ``gz_path`` made tombstones (``expired``, with
    when; their sha256 and paths kept), for an expiry's transaction."""
    return (
        "UPDATE entries SET status = 'expired', expired_at = ?, verify_error = NULL "
        f"WHERE gz_path = ? AND {_NOT_EXPIRED}",
        [at, gz_path],
    )


def _entry(row: Sequence[Any]) -> Entry:
    values = dict(zip(_ENTRY_FIELDS, row, strict=True))
    values["source_present"] = bool(values["source_present"])
    return Entry(**values)


@dataclass(frozen=True)
class RestoreIntent:
    id: int
    entry_id: int | None
    target: Path
    created_at: int


EntryGrace = tuple[EntryStatus, int | None]  # an entry's status and restore grace (hold_until)

_ADD_INTENT = "INSERT INTO restore_intents (entry_id, target, created_at) VALUES (?, ?, ?)"
_ADD_INTENTS = "INSERT INTO restore_intents (id, entry_id, target, created_at) VALUES (?, ?, ?, ?)"
_CLEAR_INTENT = "DELETE FROM restore_intents WHERE id = ?"


@dataclass(frozen=True)
class IntentChange:
    """One restore's change to the intents, committed as a whole: an intent added
    (entry id, target, created at), or one cleared (its id), and an entry's
    status and restore grace set with it (entry id, status, hold_until)."""

    add: tuple[int | None, str, int] | None = None
    clear: int | None = None
    grace: tuple[int, EntryStatus, int | None] | None = None


def in_statements(
    sql: str, params: Sequence[Any], values: Iterable[Any]
) -> Iterator[tuple[str, list[Any]]]:
    """``sql`` (ending in ``IN``: ``WHERE id IN``, ``WHERE path IN``) and its
    parameters, IDS_PER_STATEMENT of ``values`` a statement."""
    todo = list(values)
    for at in range(0, len(todo), IDS_PER_STATEMENT):
        part = todo[at : at + IDS_PER_STATEMENT]
        yield f"{sql} ({', '.join('?' * len(part))})", [*params, *part]


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A plain read-only connection to the manifest at ``path``, usable from any
    thread (its user serialises its statements): for bulk reads off the event
    loop, and the mount's lookups, which libfuse makes on threads of its own."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    db.row_factory = db_row
    return db


@contextlib.contextmanager
def reading(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain read-only connection to the manifest at ``path``, for one bulk read
    in a worker thread (the restore browser's catalog: a million entries are
    read faster there than through the event loop's connection)."""
    db = connect_readonly(path)
    try:
        yield db
    finally:
        db.close()


def read_entries(
    db: sqlite3.Connection, names: Sequence[str], chunk: int = 50_000
) -> Iterator[list[Any]]:
    """Every entry's fields ``names``, in id order, ``chunk`` rows at a time, on a
    connection from ``reading``."""
    unknown = set(names) - set(_ENTRY_FIELDS)
    assert not unknown, f"not entry fields: {unknown}"
    columns = ", ".join(_COLUMN_OF.get(n, n) for n in names)
    cur = db.execute(f"SELECT {columns} FROM entries ORDER BY id")
    while rows := cur.fetchmany(chunk):
        yield rows


# How many entries: the totals the schema's triggers keep (a few rows).
_ENTRY_COUNT = "SELECT coalesce(sum(entries), 0) FROM entry_totals"


def read_entry_count(db: sqlite3.Connection) -> int:
    """How many entries, on a connection from ``reading``; counted on a manifest
    older than the totals (a fleet site's snapshot)."""
    try:
        [(n,)] = db.execute(_ENTRY_COUNT).fetchall()
    except sqlite3.OperationalError:
        [(n,)] = db.execute("SELECT count(*) FROM entries").fetchall()
    return int(n)


def entry_by_id(db: sqlite3.Connection, entry_id: int) -> Entry | None:
    """Entry ``entry_id``, on a connection from ``connect_readonly`` (the mount
    reads a small version whole on its own threads, off the event loop)."""
    row = db.execute(
        f"SELECT {', '.join(_ENTRY_COLUMNS)} FROM entries WHERE id = ?", [entry_id]
    ).fetchone()
    return None if row is None else _entry(row)


def data_version(db: sqlite3.Connection) -> int:
    """A number that changes whenever another connection commits to the
    database (``PRAGMA data_version``): a cheap way to notice a pass."""
    [(version,)] = db.execute("PRAGMA data_version").fetchall()
    return int(version)


class Manifest:
    """An open ``coldkeep.db``. Use ``async with await Manifest.open(path)``.

    Its entries, restore intents and verify cursor are its own methods; the other
    tables' modules in ``store`` send their statements through ``run``,
    ``rows``, ``insert``, ``insert_if_new``, ``run_many`` and ``transaction``."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        # One connection serves every coroutine: a statement sent while another
        # coroutine's BEGIN … COMMIT is open would join that transaction (and be
        # rolled back with it). Every trip to the connection takes this gate; a
        # transaction holds it from BEGIN to COMMIT.
        self._gate = asyncio.Lock()
        # Entries waiting for the commit after the one in flight (add_entry).
        self._entries = Grouped(self._add_named)
        # Sources confirmed gone, not yet written (sources_gone_later).
        self._gone: list[int] = []
        # Intent changes waiting for the commit after the one in flight.
        self._intents = Grouped(self._intents_transaction)

    @classmethod
    async def open(cls, path: Path, *, readonly: bool = False) -> Self:
        """Open (creating and migrating unless ``readonly``) the manifest at ``path``."""
        if readonly and not await asyncio.to_thread(path.exists):
            raise ManifestError(f"{path} does not exist yet (no pass has run)")
        with naming_db(path, "opening it"):
            if readonly:
                connecting = aiosqlite.connect(
                    f"file:{path}?mode=ro", uri=True, isolation_level=None
                )
            else:
                connecting = aiosqlite.connect(path, isolation_level=None)
            try:
                db = await connecting
            except BaseException:
                # A failed connect leaves aiosqlite's thread posting its stop to
                # this loop: one that closed first (the CLI exits on the error)
                # had it print a traceback after the one-line message.
                thread = getattr(connecting, "_thread", None)
                if isinstance(thread, threading.Thread):
                    await asyncio.to_thread(thread.join, 10)
                raise
        # Names that are not UTF-8 are BLOBs of their bytes, made names again
        # on the way out (names.py; aiosqlite types row_factory too narrowly).
        db.row_factory = db_row  # type: ignore[assignment]
        self = cls(db, path)
        try:
            await self.run("PRAGMA busy_timeout = 10000")
            version = await self._first_read(readonly)  # before anything writes to the file
            self._check_version(version, readonly)
            if not readonly:
                await self.run("PRAGMA journal_mode = WAL")
                await self.run("PRAGMA synchronous = FULL")
                await self._migrate(version)
        except BaseException:
            await db.close()
            raise
        return self

    async def _first_read(self, readonly: bool) -> int:
        try:
            return await self._version()
        except DatabaseFailed as err:
            if not readonly or err.sqlite_errorname != "SQLITE_READONLY_DIRECTORY":
                raise
            # A pass removes the -shm when it closes the manifest; only a user who
            # may write the folder can make it again.
            raise ManifestError(
                f"{self.path} cannot be read as uid {os.getuid()}: SQLite needs "
                f"{self.path.name}-shm beside it (there while coldkeep has it open) and "
                f"{self.path.parent} is not writable for this user to make it; run as the "
                "archive's owner or root"
            ) from err

    @classmethod
    async def open_existing(cls, path: Path) -> Self | None:
        """The manifest at ``path``, read-only; None when there is none yet (no
        pass has run)."""
        try:
            return await cls.open(path, readonly=True)
        except ManifestError:
            if not await asyncio.to_thread(path.exists):
                return None
            raise

    async def close(self) -> None:
        try:
            # A mark that cannot be written is not lost: recovery finds those
            # sources gone and marks them again.
            with contextlib.suppress(sqlite3.Error):
                await self.flush_sources_gone()
        finally:
            await self._db.close()

    # Every statement's cursor is closed or dropped on the connection's thread. A
    # cursor left to the garbage collector is finalized on the thread that drops
    # it (the event loop's), and resetting its statement there races the
    # connection's thread running the same cached statement: SQLITE_MISUSE ("bad
    # parameter or other API misuse"), seen with eight archiving workers.

    async def run(self, sql: str, params: Iterable[Any] = ()) -> None:
        """Execute one statement (no rows wanted): one trip to the connection's
        thread, where its cursor is dropped."""
        async with self._gate:
            await self._run(sql, params)

    async def _run(self, sql: str, params: Iterable[Any] = ()) -> None:
        with naming_db(self.path):
            await self._db.execute_fetchall(sql, db_params(params))

    async def rows(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        """Every row of one query: one trip to the connection's thread, where its
        cursor is dropped."""
        async with self._gate:
            return await self._rows(sql, params)

    async def _rows(self, sql: str, params: Iterable[Any] = ()) -> list[Any]:
        with naming_db(self.path):
            return list(await self._db.execute_fetchall(sql, db_params(params)))

    async def insert(self, sql: str, params: Iterable[Any] = ()) -> int:
        """Execute one ``INSERT`` of one row; returns the new row's id."""
        row_id = await self.insert_if_new(sql, params)
        assert row_id is not None, f"nothing inserted: {sql}"
        return row_id

    async def insert_if_new(self, sql: str, params: Iterable[Any] = ()) -> int | None:
        """Execute one ``INSERT … ON CONFLICT DO NOTHING``; returns the new row's id,
        or None when the row was there already."""
        with naming_db(self.path):
            async with self._gate, self._db.execute(sql, db_params(params)) as cur:
                return cur.lastrowid if cur.rowcount == 1 else None

    async def run_many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        async with self._gate:
            await self._run_many(sql, rows)

    async def _run_many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        with naming_db(self.path):
            async with self._db.executemany(sql, (db_params(r) for r in rows)):
                pass

    async def transaction(self, statements: Sequence[Statement]) -> None:
        """Statements with their parameters, committed together or not at all."""
        async with self._gate:
            await self._run("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    await self._run(sql, params)
                await self._run("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # SQLITE_FULL may have rolled it back already
                    await asyncio.shield(self._run("ROLLBACK"))
                raise

    async def run_script(self, script: str) -> None:
        with naming_db(self.path):
            async with self._gate, self._db.executescript(script):
                pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _version(self) -> int:
        with naming_db(self.path, "reading its schema version"):
            async with self._gate, self._db.execute("PRAGMA user_version") as cur:
                row = await cur.fetchone()
        return int(row[0]) if row else 0

    def _check_version(self, version: int, readonly: bool) -> None:
        why = version_problem(self.path, version, readonly)
        if why is not None:
            raise ManifestError(why)

    async def _migrate(self, version: int) -> None:
        for n, script in migration_scripts(version):
            try:
                await self.run_script(script)
            except sqlite3.Error as err:
                if self._db.in_transaction:
                    await self.run("ROLLBACK")
                raise ManifestError(f"{self.path}: migration {n} failed: {err}") from err

    # entries -----------------------------------------------------------------

    async def add_entry(self, new: NewEntry) -> Entry:
        """Insert and commit one entry (durable on return). Entries added while a
        commit is in flight go into the next one together: one transaction and
        one fsync for files that finish at the same time."""
        return await self._entries.submit(new)

    async def _add_named(self, news: list[NewEntry]) -> list[Entry]:
        more = f" and {len(news) - 1} more" if len(news) > 1 else ""
        with naming_db(self.path, f"recording the entry of {news[0].relpath}{more}"):
            return await self.add_entries(news)

    async def add_entries(self, new: Sequence[NewEntry]) -> list[Entry]:
        """Insert many entries in one transaction (a bundle's members, a rebuild):
        all of them are durable on return, or none is. Their ids are the next
        free ones, taken inside the transaction."""
        columns = ("id", *_NEW_COLUMNS)
        marks = ", ".join("?" * len(columns))
        values = ("id", *_NEW_FIELDS)
        async with self._gate:
            await self._run("BEGIN IMMEDIATE")
            gone, self._gone = self._gone, []
            try:
                await self._mark_gone(gone)
                [(last,)] = await self._rows("SELECT coalesce(max(id), 0) FROM entries")
                added = [
                    Entry(**{f: getattr(e, f) for f in _NEW_FIELDS}, id=last + 1 + i)
                    for i, e in enumerate(new)
                ]
                await self._run_many(
                    f"INSERT INTO entries ({', '.join(columns)}) VALUES ({marks})",
                    [[getattr(e, f) for f in values] for e in added],
                )
                await self._run("COMMIT")
            except BaseException:
                self._gone += gone
                if self._db.in_transaction:  # SQLITE_FULL may have rolled it back already
                    await asyncio.shield(self._run("ROLLBACK"))
                raise
        return added

    async def entry(self, entry_id: int) -> Entry | None:
        rows = await self._select("WHERE id = ?", (entry_id,))
        return rows[0] if rows else None

    async def entry_by_gz(self, gz_path: str) -> Entry | None:
        rows = await self._select("WHERE gz_path = ?", (gz_path,))
        return rows[0] if rows else None

    async def entries(self) -> list[Entry]:
        """Every entry, in id order."""
        return await self._select("", ())

    async def verifiable_entries(self, *, after_id: int = 0, limit: int) -> list[Entry]:
        """Up to ``limit`` entries whose gzip should be in the archive to verify
        (kept, and not dropped for its remote copy), after ``after_id``, in id
        order."""
        # In id order from the cursor by the rowid (the status index would cost
        # a lookup per kept entry before the first row).
        return await self._select(
            f"NOT INDEXED WHERE {_VERIFIABLE} AND id > ?", (after_id,), limit=limit
        )

    async def verifiable_ids(self) -> list[int]:
        """The ids of every entry ``verifiable_entries`` gives (a sample's pool)."""
        return [r[0] for r in await self.rows(f"SELECT id FROM {_VERIFIABLE_ENTRIES}")]

    async def verifiable_totals(self, *, after_id: int = 0) -> tuple[int, int]:
        """(how many, their bytes) of the verifiable entries after ``after_id``."""
        [(n, size)] = await self.rows(
            f"SELECT count(*), coalesce(sum(bytes), 0) FROM {_VERIFIABLE_ENTRIES} AND id > ?",
            [after_id],
        )
        return int(n), int(size)

    async def bytes_of(self, ids: Sequence[int]) -> int:
        """The original bytes of the entries ``ids``, summed."""
        [(size,)] = await self.rows(
            "SELECT coalesce(sum(bytes), 0) FROM entries WHERE id IN "
            "(SELECT value FROM json_each(?))",
            [json.dumps(list(ids))],
        )
        return int(size)

    async def remote_only_count(self, *, after_id: int = 0) -> int:
        """The entries ``verifiable_entries`` leaves out because their gzip's local
        copy was dropped once it was shipped (``verify --remote`` reads those)."""
        if not after_id:
            [(n,)] = await self.rows(
                "SELECT coalesce(sum(entries), 0) FROM entry_totals "
                f"WHERE remote = 2 AND {_HAS_GZIP}"
            )
        else:
            [(n,)] = await self.rows(
                f"SELECT count(*) FROM entries NOT INDEXED WHERE {_HAS_GZIP} AND remote = 2 "
                "AND id > ?",
                [after_id],
            )
        return int(n)

    async def entries_pending_unlink(self) -> list[Entry]:
        """Committed entries whose live source has not been seen gone (a crash
        between steps 6 and 7)."""
        await self.flush_sources_gone()
        return await self._select("WHERE source_present = 1 AND status = 'archived'", ())

    async def entries_needing_attention(self, limit: int) -> list[Entry]:
        """Stale or missing entries, and those whose gzip failed its last verify."""
        # Two index ranges (the status index, the partial verify_error one), not an
        # OR that SQLite answered by walking every entry in id order.
        return await self._select(
            "WHERE id IN (SELECT id FROM entries WHERE status IN ('stale', 'missing') "
            "UNION SELECT id FROM entries WHERE verify_error IS NOT NULL)",
            (),
            limit=limit,
        )

    async def entries_failed_verify(self, limit: int) -> list[Entry]:
        return await self._select("WHERE verify_error IS NOT NULL", (), limit=limit)

    async def entries_missing(self, limit: int) -> list[Entry]:
        return await self._select("WHERE status = 'missing'", (), limit=limit)

    async def verify_failure_count(self) -> int:
        [(n,)] = await self.rows("SELECT count(*) FROM entries WHERE verify_error IS NOT NULL")
        return int(n)

    async def select(
        self,
        *,
        ids: Sequence[int] = (),
        unit: str | None = None,
        sha_prefix: str | None = None,
        mtime_from_ns: int | None = None,
        mtime_before_ns: int | None = None,
    ) -> list[Entry]:
        """The entries matching every condition given (a restore's selection): ids,
        unit, a prefix of the sha256 (lower-case hex), the source's mtime from
        ``mtime_from_ns`` (inclusive) and before ``mtime_before_ns``; oldest path
        first, each path's versions by mtime. Tombstones (``expired``) too: what
        retention deleted is still found, and said to be gone."""
        where = ["1"]
        params: list[Any] = []
        if ids:
            where.append(f"id IN ({', '.join('?' * len(ids))})")
            params += ids
        if unit:
            where.append("unit = ?")
            params.append(unit)
        if sha_prefix:
            where.append("sha256 LIKE ?")
            params.append(sha_prefix + "%")
        if mtime_from_ns is not None:
            where.append("mtime_ns >= ?")
            params.append(mtime_from_ns)
        if mtime_before_ns is not None:
            where.append("mtime_ns < ?")
            params.append(mtime_before_ns)
        clause = "WHERE " + " AND ".join(where)
        return await self._select(clause, params, order="relpath, mtime_ns, id")

    async def paths_from(
        self, prefix: str, containing: Sequence[str] = ()
    ) -> list[tuple[int, str]]:
        """(id, relpath) of every entry whose relpath starts with ``prefix`` and
        contains each of ``containing``: a range of the relpath index (TEXT
        names), then the names stored as BLOBs (not UTF-8: names.py), which sort
        after every TEXT, by the range of their bytes."""
        found: list[tuple[int, str]] = []
        if is_text(prefix) and all(map(is_text, containing)):
            above = text_after(prefix)
            # Below every BLOB when no text is above the prefix: the TEXT range runs
            # to its end. The planner takes the covering index (relpath, id).
            sql = "SELECT id, relpath FROM entries WHERE relpath >= ? AND relpath < ?"
            params: list[Any] = [prefix, above if above is not None else b""]
            for piece in containing:
                sql += " AND instr(relpath, ?) > 0"
                params.append(piece)
            found += [(r[0], r[1]) for r in await self.rows(sql, params)]
        low = os.fsencode(prefix)
        high = bytes_after(low)
        sql = "SELECT id, relpath FROM entries WHERE relpath >= ?" + (
            " AND relpath < ?" if high is not None else ""
        )
        blobs = await self.rows(sql, [low] if high is None else [low, high])
        found += [(r[0], r[1]) for r in blobs if all(p in r[1] for p in containing)]
        return found

    async def paths_after(self, after_id: int, containing: str) -> list[tuple[int, str]]:
        """(id, relpath) of the entries past ``after_id`` whose relpath may
        contain ``containing``: those whose TEXT holds it, and every name stored
        as a BLOB (``instr`` over a BLOB's bytes is not a name's containment: the
        caller looks)."""
        rows = await self.rows(
            "SELECT id, relpath FROM entries WHERE id > ? "
            "AND (typeof(relpath) = 'blob' OR instr(relpath, ?) > 0)",
            [after_id, containing],
        )
        return [(r[0], r[1]) for r in rows]

    async def entries_with_ids(self, ids: Sequence[int]) -> list[Entry]:
        """The entries of ``ids`` (one statement, the ids as a JSON array), in id
        order."""
        return await self._select(
            "WHERE id IN (SELECT value FROM json_each(?))", [json.dumps(list(ids))]
        )

    async def versions_of(self, relpath: str) -> list[Entry]:
        """Every version of the file at ``relpath`` (tombstones too), by the
        source's mtime then id: the newest last, as restore takes it."""
        return await self._select("WHERE relpath = ?", (relpath,), order="mtime_ns, id")

    async def unknown_ids(self, ids: Sequence[int]) -> list[int]:
        """Those of ``ids`` that no entry has, in the order given."""
        rows = await self.rows(
            "SELECT value FROM json_each(?) WHERE value NOT IN (SELECT id FROM entries)",
            [json.dumps(list(ids))],
        )
        return [int(r[0]) for r in rows]

    async def _select(
        self, where: str, params: Iterable[Any], *, order: str = "id", limit: int | None = None
    ) -> list[Entry]:
        sql = f"SELECT {', '.join(_ENTRY_COLUMNS)} FROM entries {where} ORDER BY {order}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = await self.rows(sql, params)
        return [_entry(r) for r in rows]

    async def local_gz_paths(self, chunk: int = 50_000) -> set[str]:
        """The gzip path of every entry whose gzip should be here: kept, its local
        copy not dropped after shipping. Read from the schema's partial index of
        them: it costs the archive's local copies, not its every entry (a site
        that ships keeps a few here of many millions); ``chunk`` at a time, in
        the index's order, so no list of them all is held beside the set."""
        paths: set[str] = set()
        after: str = ""  # every TEXT path sorts after it, and every BLOB one
        while True:
            rows = await self.rows(
                "SELECT gz_path FROM entries INDEXED BY entries_local "
                f"WHERE remote < 2 AND {_HAS_GZIP} AND gz_path > ? ORDER BY gz_path LIMIT ?",
                [after, chunk],
            )
            paths.update(r[0] for r in rows)
            if len(rows) < chunk:
                return paths
            after = rows[-1][0]

    async def gz_statuses_of(self, gz_paths: Iterable[str]) -> list[tuple[str, str]]:
        """The gzip path and status of every entry whose gzip is one of
        ``gz_paths`` (a bundle's path has a row per member). Bound as
        parameters, never as JSON: a path that is not UTF-8 is a BLOB (names.py),
        and JSON would turn it into other bytes."""
        todo = list(gz_paths)
        rows: list[Any] = []
        for i in range(0, len(todo), IDS_PER_STATEMENT):
            chunk = todo[i : i + IDS_PER_STATEMENT]
            marks = ", ".join("?" * len(chunk))
            rows += await self.rows(
                f"SELECT gz_path, status FROM entries WHERE gz_path IN ({marks})", chunk
            )
        return [(r[0], r[1]) for r in rows]

    async def entries_by_gz(self, gz_paths: list[str]) -> list[Entry]:
        found: list[Entry] = []
        for i in range(0, len(gz_paths), 900):
            chunk = gz_paths[i : i + 900]
            marks = ", ".join("?" * len(chunk))
            found += await self._select(f"WHERE gz_path IN ({marks})", chunk)
        return found

    async def _update_ids(self, sql: str, params: Sequence[Any], ids: Iterable[int]) -> None:
        """``sql`` ends in ``WHERE id IN``: one statement, so one commit, per
        IDS_PER_STATEMENT ids (an executemany outside a transaction commits, and
        fsyncs, once per row)."""
        for statement, values in in_statements(sql, params, ids):
            await self.run(statement, values)

    async def any_expired(self) -> bool:
        return bool(await self.rows("SELECT 1 FROM entries WHERE status = 'expired' LIMIT 1"))

    async def expired_under(self, prefix: str) -> list[str]:
        """The gzip paths of tombstones starting with ``prefix`` (a range of the key)."""
        rows = await self.rows(
            "SELECT DISTINCT gz_path FROM entries WHERE gz_path >= ? AND gz_path < ? "
            "AND status = 'expired'",
            [prefix, prefix + "\U0010ffff"],
        )
        return [r[0] for r in rows]

    async def set_status(self, ids: Iterable[int], status: EntryStatus) -> None:
        await self._update_ids("UPDATE entries SET status = ? WHERE id IN", [status], ids)

    async def set_status_and_grace(
        self, ids: Iterable[int], status: EntryStatus, grace_until: int | None
    ) -> None:
        await self._update_ids(
            "UPDATE entries SET status = ?, hold_until = ? WHERE id IN", [status, grace_until], ids
        )

    async def mark_sources_gone(self, ids: Iterable[int]) -> None:
        """Step 7 confirmed. Not critical to durability: if lost, recovery finds the
        source gone and marks it again."""
        await self._update_ids(_MARK_GONE, [], ids)

    def sources_gone_later(self, ids: Iterable[int]) -> None:
        """``mark_sources_gone``, written with the next entries' transaction (or
        ``flush_sources_gone``, or on close): off the path of the file that
        confirmed it, at the cost of nothing but a mark recovery would redo."""
        self._gone += ids

    async def flush_sources_gone(self) -> None:
        gone, self._gone = self._gone, []
        try:
            await self.mark_sources_gone(gone)
        except BaseException:
            self._gone += gone
            raise

    async def _mark_gone(self, ids: list[int]) -> None:
        """Inside a transaction the caller holds the gate for."""
        for statement, values in in_statements(_MARK_GONE, [], ids):
            await self._run(statement, values)

    # the restore grace ---------------------------------------------------------

    async def relpaths_in_grace(self, now: int) -> set[str]:
        """Live paths restored in place whose restore grace has not run out."""
        rows = await self.rows(
            "SELECT relpath FROM entries WHERE status = 'restored' AND hold_until > ?", (now,)
        )
        return {str(r[0]) for r in rows}

    async def status_counts(self) -> dict[str, tuple[int, int, int]]:
        """status -> (entries, bytes, gz bytes)."""
        # Kept by the schema's triggers (entry_totals): a few rows, at any size.
        rows = await self.rows(
            "SELECT status, sum(entries), sum(bytes), sum(gz_bytes) FROM entry_totals "
            "GROUP BY status HAVING sum(entries) > 0"
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    async def entry_count(self) -> int:
        [(n,)] = await self.rows(_ENTRY_COUNT)
        return int(n)

    async def archived_between(self, start: int, until: int) -> tuple[int, int, int]:
        """(entries, bytes, gz bytes) archived from ``start`` until before ``until``
        (ms): what a pass that died in that time had done."""
        [(files, size, gz_size)] = await self.rows(
            "SELECT count(*), coalesce(sum(bytes), 0), coalesce(sum(gz_bytes), 0) "
            "FROM entries WHERE archived_at >= ? AND archived_at < ?",
            (start, until),
        )
        return int(files), int(size), int(gz_size)

    async def archived_by_day(self, since: int) -> list[tuple[int, int, int]]:
        """(UTC day number, bytes, gz bytes) of the entries archived each day from
        ``since`` (ms) on, in day order; days with none left out. Every entry
        counts, whatever became of it since (restored, expired): it was archived
        that day."""
        rows = await self.rows(
            f"SELECT archived_at / {DAY_MS} AS day, sum(bytes), sum(gz_bytes) FROM entries "
            "WHERE archived_at >= ? GROUP BY day ORDER BY day",
            [since],
        )
        return [(int(d), int(b), int(g)) for d, b, g in rows]

    async def members_of(self, gz_paths: Sequence[str]) -> list[tuple[str, int, str, str]]:
        """(gz path, entry id, unit, relpath) of every entry in the archive files
        ``gz_paths``: a bundle's every member."""
        found: list[tuple[str, int, str, str]] = []
        for start in range(0, len(gz_paths), IDS_PER_STATEMENT):
            chunk = gz_paths[start : start + IDS_PER_STATEMENT]
            marks = ",".join("?" * len(chunk))
            rows = await self.rows(
                f"SELECT gz_path, id, unit, relpath FROM entries WHERE gz_path IN ({marks})", chunk
            )
            found += [(r[0], r[1], r[2], r[3]) for r in rows]
        return found

    async def past_retention(
        self, cutoffs: Mapping[str, int], otherwise: int | None
    ) -> list[ArchiveFile]:
        """The archive files (with an entry not expired) every entry of which has
        an mtime at or before its unit's cutoff (ns: ``cutoffs[unit]``, else
        ``otherwise``; a unit with neither has none), in path order: what
        retention lets go. Decided in SQL, so an archive of millions of entries
        costs one scan, not a row each in memory."""
        cases = "".join(" WHEN ? THEN ?" for _ in cutoffs)
        cutoff = f"CASE unit{cases} ELSE ? END" if cutoffs else "?"
        params = [*(v for pair in cutoffs.items() for v in pair), otherwise]
        newest = max([*cutoffs.values(), otherwise or 0])
        # One scan of the table finds the files with an entry old enough (no
        # index has mtimes; the status index would cost a lookup per entry:
        # two minutes at 10,000,000), then each one's entries by its path.
        rows = await self.rows(
            "WITH due(gz_path) AS (SELECT DISTINCT gz_path FROM entries NOT INDEXED "
            f"WHERE mtime_ns <= ? AND {_NOT_EXPIRED}), "
            "files AS (SELECT e.gz_path, e.unit, count(*) AS n, max(e.mtime_ns) AS newest, "
            "sum(e.gz_bytes) AS size, max(e.member_offset IS NOT NULL) AS bundled "
            "FROM due CROSS JOIN entries AS e INDEXED BY entries_location USING (gz_path) "
            f"WHERE e.{_NOT_EXPIRED} GROUP BY e.gz_path "
            f"HAVING min(coalesce(e.mtime_ns <= {cutoff}, 0))) "
            "SELECT f.gz_path, f.unit, n, newest, size, bundled, r.bytes, "
            "r.local_gone_at IS NOT NULL, r.retain_until FROM files AS f "
            "LEFT JOIN remote_objects AS r ON r.path = f.gz_path ORDER BY f.gz_path",
            [newest, *params],
        )
        return [
            ArchiveFile(r[0], r[1], r[2], r[3], r[4], bool(r[5]), r[6], bool(r[7]), r[8])
            for r in rows
        ]

    # verify ------------------------------------------------------------------

    async def mark_verified(self, ids: Iterable[int], at: int) -> None:
        await self._update_ids(
            "UPDATE entries SET verified_at = ?, verify_error = NULL WHERE id IN", [at], ids
        )

    async def mark_verify_failed(self, entry_id: int, at: int, error: str) -> None:
        await self.run(
            "UPDATE entries SET verified_at = ?, verify_error = ? WHERE id = ?",
            (at, error, entry_id),
        )

    async def verify_cursor(self) -> tuple[int, int] | None:
        """(last entry id checked, when the round began), or None between rounds."""
        with naming_db(self.path):
            async with (
                self._gate,
                self._db.execute("SELECT cursor, round_started FROM verify_state") as cur,
            ):
                row = await cur.fetchone()
        return (int(row[0]), int(row[1])) if row else None

    async def set_verify_cursor(self, cursor: int | None, round_started: int = 0) -> None:
        if cursor is None:
            await self.run("DELETE FROM verify_state")
        else:
            await self.run(
                "INSERT INTO verify_state (id, cursor, round_started) VALUES (1, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET cursor = excluded.cursor, "
                "round_started = excluded.round_started",
                (cursor, round_started),
            )

    # restore intents ---------------------------------------------------------

    async def add_restore_intent(
        self, entry_id: int | None, target: Path, *, grace: EntryGrace | None = None
    ) -> RestoreIntent:
        """The intent committed, and with ``grace`` the entry's status and restore
        grace set in the same transaction (``change_intents``)."""
        created = now_ms()
        change = IntentChange(
            add=(entry_id, str(target), created),
            grace=None if entry_id is None or grace is None else (entry_id, *grace),
        )
        row_id = await self.change_intents(change)
        assert row_id is not None
        return RestoreIntent(row_id, entry_id, target, created)

    async def clear_restore_intent(
        self, intent_id: int, *, entry_id: int | None = None, grace: EntryGrace | None = None
    ) -> None:
        """The intent gone, and with ``grace`` the entry's status and restore
        grace given back in the same transaction (``change_intents``)."""
        back = None if entry_id is None or grace is None else (entry_id, *grace)
        await self.change_intents(IntentChange(clear=intent_id, grace=back))

    async def change_intents(self, change: IntentChange) -> int | None:
        """``change`` committed, durable on return; the new intent's id when it
        adds one. Changes sent while a commit of them is in flight go into the
        next one together (one transaction, one fsync, a few trips to the
        connection whatever their number; all of them or none): the restore's
        workers record and clear their intents this way."""
        return await self._intents.submit(change)

    async def _intents_transaction(self, changes: Sequence[IntentChange]) -> list[int | None]:
        """Every change in one transaction, each kind of statement in one trip; the
        ids of the intents added (the next free ones, taken inside it)."""
        async with self._gate:
            if len(changes) == 1 and changes[0].grace is None:
                return [await self._one_intent_change(changes[0])]
            await self._run("BEGIN IMMEDIATE")
            try:
                row_ids = await self._intent_statements(changes)
                await self._run("COMMIT")
            except BaseException:
                if self._db.in_transaction:  # SQLITE_FULL may have rolled it back already
                    await asyncio.shield(self._run("ROLLBACK"))
                raise
        return row_ids

    async def _one_intent_change(self, change: IntentChange) -> int | None:
        """A lone add or clear: one statement, its own transaction, one trip."""
        if change.add is not None:
            with naming_db(self.path):
                row = await self._db.execute_insert(_ADD_INTENT, db_params(change.add))
            assert row is not None
            return int(row[0])
        await self._run(_CLEAR_INTENT, (change.clear,))
        return None

    async def _intent_statements(self, changes: Sequence[IntentChange]) -> list[int | None]:
        row_ids: list[int | None] = [None] * len(changes)
        adds = [i for i, c in enumerate(changes) if c.add is not None]
        if adds:
            [(last,)] = await self._rows("SELECT coalesce(max(id), 0) FROM restore_intents")
            for n, i in enumerate(adds):
                row_ids[i] = last + 1 + n
            rows = [(row_ids[i], *(changes[i].add or ())) for i in adds]
            await self._run_many(_ADD_INTENTS, rows)
        clears = [(c.clear,) for c in changes if c.clear is not None]
        if clears:
            await self._run_many(_CLEAR_INTENT, clears)
        graces = [(g[1], g[2], g[0]) for c in changes if (g := c.grace) is not None]
        if graces:
            await self._run_many(
                "UPDATE entries SET status = ?, hold_until = ? WHERE id = ?", graces
            )
        return row_ids

    async def restore_intents(self) -> list[RestoreIntent]:
        rows = await self.rows(
            "SELECT id, entry_id, target, created_at FROM restore_intents ORDER BY id"
        )
        return [RestoreIntent(r[0], r[1], Path(r[2]), r[3]) for r in rows]
