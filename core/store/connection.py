"""``coldkeep.db``'s connection: SQLite in WAL mode with ``synchronous = FULL``,
reached through aiosqlite so the event loop never waits on it; opening it checks
and migrates the schema (schema.py) before anything else is written.
``ManifestConnection`` is the base the ``Manifest`` (manifest.py) is built on.

Invariants:
- Only this module holds a connection to coldkeep.db: the ``ManifestConnection``
  (one thread, and one gate every trip to it takes, so no statement joins another
  coroutine's transaction), and the plain read-only ones ``connect_readonly``
  and ``reading`` give a thread of their own (the mount's lookups, one bulk read).
- Each table's statements come from the module of ``store`` that owns it, which
  sends them through ``run``, ``rows``, ``insert``, ``insert_if_new``,
  ``run_many`` or ``transaction``; the parts of the ``Manifest`` (entries.py,
  verifystate.py, restoreintents.py) through the same, or, holding the gate for
  a transaction of their own (``_transaction``), through ``_run``, ``_rows``,
  ``_insert`` and ``_run_many``. Nothing else touches the aiosqlite connection.
- Every statement's cursor is closed or dropped on the connection's thread (see
  ``run``).
- Every SQLite error it raises names this database (``ioerror.DatabaseFailed``):
  "disk I/O error" alone does not tell an operator which file to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

import aiosqlite

from ..base.errors import ColdkeepError
from ..base.ioerror import DatabaseFailed, naming_db
from ..base.names import db_params, db_row
from .schema import migration_scripts, version_problem

# Ids (or rows) written by one statement: one commit each, within SQLite's
# default limit of 32,766 parameters.
IDS_PER_STATEMENT = 500

# One statement and its parameters, for ``ManifestConnection.transaction``.
Statement = tuple[str, Sequence[Any]]


class ManifestError(ColdkeepError):
    """The manifest cannot be used as it is; the message says why and what to do."""


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


def data_version(db: sqlite3.Connection) -> int:
    """A number that changes whenever another connection commits to the
    database (``PRAGMA data_version``): a cheap way to notice a pass."""
    [(version,)] = db.execute("PRAGMA data_version").fetchall()
    return int(version)


class ManifestConnection:
    """An open ``coldkeep.db``: opening, the version check and migrations,
    closing, and the one way statements reach it. ``Manifest`` is this with the
    methods of the tables it owns."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        # One connection serves every coroutine: a statement sent while another
        # coroutine's BEGIN … COMMIT is open would join that transaction (and be
        # rolled back with it). Every trip to the connection takes this gate; a
        # transaction holds it from BEGIN to COMMIT.
        self._gate = asyncio.Lock()

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

    async def _insert(self, sql: str, params: Iterable[Any]) -> int:
        """One ``INSERT`` of one row, the caller holding the gate: its own
        transaction, one trip; the new row's id."""
        with naming_db(self.path):
            row = await self._db.execute_insert(sql, db_params(params))
        assert row is not None, f"nothing inserted: {sql}"
        return int(row[0])

    async def run_many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        async with self._gate:
            await self._run_many(sql, rows)

    async def _run_many(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        with naming_db(self.path):
            async with self._db.executemany(sql, (db_params(r) for r in rows)):
                pass

    async def transaction(self, statements: Sequence[Statement]) -> None:
        """Statements with their parameters, committed together or not at all."""
        async with self._gate, self._transaction():
            for sql, params in statements:
                await self._run(sql, params)

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[None]:
        """``BEGIN IMMEDIATE``, the block's statements, ``COMMIT``; rolled back if
        anything in it raises. The caller holds the gate throughout."""
        try:
            await self._run("BEGIN IMMEDIATE")
            yield
            await self._run("COMMIT")
        except BaseException:
            # A caller cancelled while its BEGIN or COMMIT waits for the
            # connection's thread leaves that statement to run there all the
            # same, after this handler has begun: whether a transaction is open
            # is known only there, in turn. The connection's rollback does
            # nothing where none is (committed, never begun, or one SQLITE_FULL
            # rolled back), and runs after the statements sent before it.
            await asyncio.shield(self._db.rollback())
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
