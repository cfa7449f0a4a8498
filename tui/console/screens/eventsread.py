"""The Events screen's reads: the query engines for the range chosen, the rows
the table shows (the range and kinds chosen, or the SQL box's), and where the
next page starts.

Two engines over the same rows: DuckDB counts them (one parallel scan) and
runs the SQL box (its SQL is ``coldkeep query``'s); SQLite pages through the
rows chosen by id, each page an index range per month (a few milliseconds at
any depth, where a DuckDB page scans the range). A range of more months than
SQLite attaches is paged by DuckDB. Neither reads a month only the remote tier
holds: both leave it out, named, so the counts and the rows agree.

Invariants:
- Every use of an engine (open, read, close) runs in a thread and holds one
  lock, so two never overlap: a worker the screen replaced may still be in its
  thread, and finishes before the next read starts. An engine is kept before it
  is opened, so one that a replaced worker opened is closed by the next read
  for another range (or by ``close``), never left open.
- ``close`` interrupts a read in progress and closes the engines once it has
  stopped: leaving the screen leaves no reader on the application's database.
- A read answers for the choice it was made for (``Choice``): the screen drops
  an answer to a choice it has since replaced.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from coldkeep.core.archiver import Archiver
from coldkeep.core.base import durable
from coldkeep.core.base.errors import UsageError
from coldkeep.core.base.fsutil import (
    FileIdentity,
    fsync_dir,
    open_file,
    rename_noreplace,
    unlink_if_identity,
)
from coldkeep.core.events.eventschema import EventSchema, q
from coldkeep.core.events.overview import Overview, overview, page
from coldkeep.core.events.query import EventsQuery, Plan, Rows, TimeRange
from coldkeep.core.events.queryterms import sql_text

from ...text.rows import write

PAGE = 500
T = TypeVar("T")


@dataclass(frozen=True)
class Choice:
    """What the table shows: the rows of ``span`` of ``kinds`` (none: all), or
    with ``sql`` that query's rows over the range."""

    span: TimeRange
    kinds: tuple[str, ...] = ()
    sql: str = ""


@dataclass
class Read:
    """Rows for the table: the first of a choice (with its counts, unless it is
    SQL's) or the next page."""

    choice: Choice
    columns: list[str]
    rows: list[tuple[Any, ...]]
    more: bool
    schema: EventSchema
    plan: Plan
    counts: Overview | None = None


@dataclass
class _Cursor:
    choice: Choice
    after: Any = None  # the chosen rows: the id the next page starts after
    result: Rows | None = None  # SQL: its rows not read yet
    done: bool = False
    columns: list[str] = field(default_factory=list)


class EventsReader:
    def __init__(self, archiver: Archiver) -> None:
        self.archiver = archiver
        self.engine: EventsQuery | None = None  # DuckDB: counts, SQL, export
        self.pager: EventsQuery | None = None  # SQLite: pages (DuckDB's when it cannot)
        self.span: TimeRange | None = None
        self.cursor: _Cursor | None = None
        self._lock = threading.Lock()

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.to_thread(self._locked, fn, *args)

    def _locked(self, fn: Callable[..., T], *args: Any) -> T:
        with self._lock:
            return fn(*args)

    def _engine(self, span: TimeRange) -> EventsQuery:
        """The engine for ``span``: the one open, or a new one (the old ones closed)."""
        if self.engine is not None and self.span == span:
            return self.engine
        self._close()
        self.span = span
        self.engine = self.archiver.events_query(span, partial=True, remote_reads=False)
        self.engine.open()
        return self.engine

    def _pager(self, span: TimeRange) -> EventsQuery:
        """SQLite's engine for ``span``'s pages (opened once per range), or the
        DuckDB one where the range holds more months than SQLite attaches."""
        engine = self._engine(span)
        if self.pager is None:
            self.pager = self.archiver.events_query(
                span, partial=True, engine="sqlite", remote_reads=False
            )
            try:
                self.pager.open()
            except UsageError:  # too many months for one SQLite connection
                self.pager.close()
                self.pager = engine
        return self.pager

    async def first(self, choice: Choice) -> Read:
        """The counts of ``choice`` (unless it is SQL) and its first rows."""
        return await self._in_thread(self._first, choice)

    def _first(self, choice: Choice) -> Read:
        engine = self._engine(choice.span)
        self.cursor = cursor = _Cursor(choice)
        counts = None if choice.sql else overview(engine, choice.kinds)
        rows = self._next(engine, cursor)
        return Read(
            choice, cursor.columns, rows, not cursor.done, engine.schema, engine.plan, counts
        )

    async def more(self) -> Read | None:
        """The next page of the current choice (None: there is none)."""
        return await self._in_thread(self._more)

    def _more(self) -> Read | None:
        engine, cursor = self.engine, self.cursor
        if engine is None or cursor is None or cursor.done:
            return None
        rows = self._next(engine, cursor)
        return Read(
            cursor.choice, cursor.columns, rows, not cursor.done, engine.schema, engine.plan
        )

    def _next(self, engine: EventsQuery, cursor: _Cursor) -> list[tuple[Any, ...]]:
        if cursor.choice.sql:
            if cursor.result is None:
                cursor.result = engine.run(cursor.choice.sql)
                cursor.columns = cursor.result.columns
            rows = next(cursor.result.batches(PAGE), [])
            cursor.done = len(rows) < PAGE
            return rows
        got = page(self._pager(cursor.choice.span), cursor.choice.kinds, cursor.after, PAGE)
        cursor.columns, cursor.after, cursor.done = got.columns, got.after, got.after is None
        return got.rows

    async def export(self, choice: Choice, path: Path) -> int:
        """Every row of ``choice`` to ``path``; how many."""
        return await self._in_thread(self._export, choice, path)

    def _export(self, choice: Choice, path: Path) -> int:
        engine = self._engine(choice.span)
        return write_rows(engine.run(choice.sql or _chosen_sql(engine.schema, choice)), path)

    def close(self) -> None:
        """Stop a read in progress, then close the engine (in a thread, once the
        read has stopped)."""
        for engine in (self.engine, self.pager):
            if engine is not None:
                engine.interrupt()
        threading.Thread(target=self._locked, args=(self._close,), daemon=True).start()

    def _close(self) -> None:
        for engine in {id(e): e for e in (self.pager, self.engine) if e is not None}.values():
            engine.close()
        self.engine = self.pager = self.span = None


def _chosen_sql(schema: EventSchema, choice: Choice) -> str:
    """The chosen rows in id order, as the table shows them, as SQL over ``events`` (the kinds as
    quoted text: what an operator types is never SQL)."""
    kinds = ", ".join(map(sql_text, choice.kinds))
    where = f" WHERE {q(schema.kind)} IN ({kinds})" if choice.kinds else ""
    return f"SELECT * FROM events{where} ORDER BY {q(schema.pk)}"


def write_rows(rows: Rows, path: Path) -> int:
    """``rows`` to ``path`` (CSV for a .csv name, else JSON lines) through a
    temporary name beside it, fsynced, then renamed to ``path``: a file there is
    whole or not there, and one that was there already is never replaced
    (``FileExistsError``).

    The temporary's name is predictable, so it is created as every temporary
    is: ``O_EXCL``, never through a link. Whatever is found at that name (a
    symlink planted to make the export write elsewhere, a file it would
    truncate) fails the export and is left as it was; only the file this export
    created is removed, and only while it is still that file."""
    fmt = "csv" if path.suffix.lower() == ".csv" else "json"
    folder = path.parent
    tmp = path.with_name(f".{path.name}.partial")
    # 0o666: the operator's umask decides who may read the export, as for any
    # file they write.
    try:
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666, root=folder)
    except FileExistsError:
        raise FileExistsError(
            f"{tmp} is there already and was left as it is: remove it, or export under another name"
        ) from None
    placed = False
    with open(fd, "w", encoding="utf-8", newline="") as out:
        try:
            count = write(out, fmt, rows.columns, rows.batches())
            out.flush()
            durable.fsync(fd, "export.data")
            placed = rename_noreplace(tmp, path, root=folder) == "renamed"
        finally:
            if not placed:
                ours = FileIdentity.of_stat(os.fstat(fd))
                unlink_if_identity(tmp, ours, root=folder, durably=None)
    if not placed:
        raise FileExistsError(f"{path} is there already: nothing was replaced")
    fsync_dir(folder, root=folder, site="export.placed")
    return count
