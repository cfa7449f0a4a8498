"""Read-only SQL over every event row: the application's live table and every
archived month, seen as one table, ``events``, without restoring anything.

Two engines run the same view. DuckDB (the default, duckquery.py), its SQLite
reader attaching each database read-only: it scans many SQLite files in one
plan, in parallel, and takes any number of them; but it pushes no filter into
a SQLite file, so a lookup by id reads every row of the months in range.
SQLite itself (sqlitequery.py): a lookup by id is an index descent per month;
at most 125 databases, one core, SQLite's dialect; and it reads a month only
the remote tier holds in place, through the ``RemoteMonths`` the caller gives
(remote/monthvfs.py). Neither is chosen for the caller: the two dialects can
answer the same SQL differently (``7/2``).

An engine is opened once (the months attached, the view made) and read any
number of times (``run``, ``fetch``: the console's Events screen stays open
across passes). Each read answers as of one moment of the pass that may be
moving rows meanwhile: the SQLite engine reads one snapshot of live then of
every month; DuckDB reads under the share a move waits for (readshare.py), and
a read that raced past it is run again, or refused. At a read's start the
months in range are listed again; when they differ from those opened (a pass
made one, a ship dropped one) the engine is opened again first.

Invariants:
- One core is left to the application (DuckDB runs on the others, or one).
- Nothing is written, and the SQL reaches nothing but the live table and the
  months: each engine's module says how. DuckDB never spills to disk. SQLite
  itself makes a WAL database's ``-shm`` and an empty ``-wal`` beside it when
  none is there, as any reader does.
- Months outside ``--from``/``--to`` are pruned by name, never opened; the rows
  of the months kept are filtered by their time stamp, as the live table's.
- A row is counted once: a row restored into the live table is also still in
  its month (as is one between a move's copy and its delete), and the live copy
  is the one shown, as live is in the read's own moment.
- Every month the manifest knows in range (archived by a pass, counted or
  shipped by a ship; not expired) is answered for: read here, read (or, sealed,
  opened with the command's identity into the read cache's folder) from the
  remote tier, or named. One that cannot be read (damaged, a newer
  coldkeep's, gone from here with no copy shipped, sealed without an identity,
  only on the remote for DuckDB) refuses the query, named in one line, unless
  the caller accepts an answer without it: an answer is never silently
  missing a month. DuckDB does not download an unsealed month whole: the
  SQLite engine reads the pages it needs, and restore-events brings a month
  back for good.
- A value of another type than its column declares (SQLite lets a row hold
  any) fails the query in one line that says to read every column as text.
"""

from __future__ import annotations

import calendar
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..base.config import Settings
from ..base.errors import ColdkeepError, UsageError
from ..base.layout import Layout
from ..base.times import DAY_S
from ..store.connection import reading
from ..store.schema import version_problem
from .eventschema import MONTH_SCHEMA, EventSchema, discover, open_live, q, reading_month
from .queryterms import VIEW, BadQuery, QueryError, QueryRaced, first_line
from .readshare import ReadShare

if TYPE_CHECKING:
    import apsw
    import duckdb

Engine = Literal["duckdb", "sqlite"]
ENGINES: tuple[Engine, ...] = ("duckdb", "sqlite")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})(?:-([0-9]{2}))?")  # ASCII digits only
# The months the manifest knows, each with its rows when a ship last counted
# them: counted, shipped, or named by a pass that moved rows into it; not expired.
_KNOWN = """
    SELECT month, max(n) FROM (
        SELECT month, row_count AS n FROM event_months
        UNION ALL SELECT month, NULL FROM remote_objects WHERE month IS NOT NULL
        UNION ALL SELECT m.value, NULL FROM passes p, json_each(p.summary, '$.events.months') m
            WHERE json_valid(p.summary)
    ) WHERE month NOT IN (SELECT month FROM expired_months) GROUP BY month
"""


_MISSING = "its rows would be missing from the answer"
_PARTIAL = "--partial answers without it"


def _month_after(year: int, month: int) -> int:
    """The UTC second the month after ``year``-``month`` begins."""
    return calendar.timegm((year + month // 12, month % 12 + 1, 1, 0, 0, 0))


@dataclass(frozen=True)
class TimeRange:
    """UTC seconds: ``start`` inclusive, ``end`` exclusive; None is open."""

    start: int | None = None
    end: int | None = None

    def holds_month(self, month: str) -> bool:
        """Whether any instant of ``month`` (YYYY-MM) lies in the range."""
        year, mon = int(month[:4]), int(month[5:7])
        first = calendar.timegm((year, mon, 1, 0, 0, 0))
        return (self.end is None or first < self.end) and (
            self.start is None or _month_after(year, mon) > self.start
        )


def _day_or_month(text: str, flag: str, *, end: bool) -> int:
    got = _DATE.fullmatch(text)
    if got is None:
        raise UsageError(f"{flag} {text!r}: give a month (2025-03) or a day (2025-03-14), UTC")
    year, month, day = int(got[1]), int(got[2]), got[3]
    if not 1970 <= year <= 9998:  # a range's end is a second after it, within 9999
        raise UsageError(f"{flag} {text!r}: give a year from 1970 to 9998")
    try:
        first = datetime(year, month, int(day) if day else 1, tzinfo=UTC)
    except ValueError as err:
        raise UsageError(f"{flag} {text!r}: {err}") from err
    if not end:
        return int(first.timestamp())
    if day:  # through the end of that day
        return int(first.timestamp()) + DAY_S
    return _month_after(year, month)


def parse_range(start: str | None, end: str | None) -> TimeRange:
    """``--from`` and ``--to`` (both inclusive: a month or a day, UTC)."""
    got = TimeRange(
        _day_or_month(start, "--from", end=False) if start else None,
        _day_or_month(end, "--to", end=True) if end else None,
    )
    if got.start is not None and got.end is not None and got.start >= got.end:
        raise UsageError(f"--from {start} is after --to {end}: nothing lies between")
    return got


class RemoteMonths(Protocol):
    """Month snapshots only the remote tier holds (remote/monthvfs.py):
    ``attach_uri`` checks the object shipped is there and gives the URI the
    SQLite engine attaches it by, read in place; ``opened`` opens a sealed one
    whole with the command's identity into a file of its own, removed by
    ``close`` (a ``ColdkeepError`` naming it when either cannot)."""

    fetched_bytes: int  # from the remote so far
    pages_read: int  # distinct pages SQLite read of them

    def attach_uri(self, month: str, shipped: RemoteMonth) -> str: ...

    def opened(self, month: str, shipped: RemoteMonth) -> Path: ...

    def close(self) -> None: ...


@dataclass
class Plan:
    """What a query reads beside the live table: the months opened (``remote``:
    those of them read from the remote tier, in place or opened whole), how
    many the range pruned, and the months left out (each with why). Once the
    query is closed, the bytes fetched from the remote, and the pages of its
    months read."""

    months: list[str] = field(default_factory=list)
    pruned: int = 0
    left_out: dict[str, str] = field(default_factory=dict)
    remote: list[str] = field(default_factory=list)
    fetched_bytes: int = 0
    remote_pages: int = 0


@dataclass
class Source:
    name: str  # the schema the engine attaches it as
    path: Path


@dataclass(frozen=True)
class RemoteMonth:
    """A month's newest snapshot on the remote as it shipped: its key under the
    site, its size and sha256, the version of the object the ship's HEAD
    confirmed (None: shipped before versions were recorded), the age recipient
    set it is sealed to (None: stored as it is here), and, sealed or packed,
    the size and sha256 of the database it opens to; packed, the gzip's seek
    points."""

    path: str
    size: int
    sha256: str
    version: str | None = None
    sealed_to: str | None = None
    plain_bytes: int | None = None
    plain_sha256: str | None = None
    seek_points: str | None = None


@dataclass(frozen=True)
class _Recorded:
    """What the manifest says of the months: each one's newest snapshot shipped,
    and every month it knows with its rows when last counted (None: unknown)."""

    shipped: dict[str, RemoteMonth] = field(default_factory=dict)
    known: dict[str, int | None] = field(default_factory=dict)


def _recorded(manifest: Path) -> _Recorded:
    if not manifest.exists():
        return _Recorded()
    with reading(manifest) as conn:
        conn.execute("BEGIN")  # one snapshot of it: a command may be writing it
        [(version,)] = conn.execute("PRAGMA user_version").fetchall()
        if version == 0:  # being made by a first command: nothing recorded yet
            return _Recorded()
        problem = version_problem(manifest, version, readonly=True)
        if problem is not None:
            raise QueryError(problem)
        shipped = {
            m: RemoteMonth(*row)
            for (m, *row) in conn.execute(
                "SELECT month, coalesce(stored_as, path), bytes, sha256, version, sealed_to, "
                "plain_bytes, plain_sha256, seek_points FROM remote_objects "
                "WHERE month IS NOT NULL AND month NOT IN (SELECT month FROM expired_months) "
                "ORDER BY month, shipped_at"
            )
        }
        known = {str(m): None if n is None else int(n) for m, n in conn.execute(_KNOWN)}
    return _Recorded(shipped, known)


def iso_seconds(schema: EventSchema) -> str:
    """DuckDB SQL: an ISO time stamp as UTC seconds, placed by its offset (NULL
    if it is not a time)."""
    return f"epoch(TRY_CAST({q(schema.ts)} AS TIMESTAMPTZ))"


def _month_top(path: Path, schema: EventSchema) -> int | None:
    """A month's largest row id (None: empty), once it is checked a SQLite file
    of this coldkeep's month schema holding the table (``sqlite3.DatabaseError``
    naming it if not)."""
    with reading_month(path) as conn:
        [(top,)] = conn.execute(f"SELECT max({q(schema.pk)}) FROM {q(schema.table)}").fetchall()
    return None if top is None else int(top)


def _name(month: str) -> str:
    return f"m_{month.replace('-', '_')}"


class EventsQuery:
    """One query's engine: ``open`` the sources, then ``run`` SQL or ``fetch``
    coldkeep's own (each a read; a thread's: both engines block; the caller
    runs them off any event loop), then ``close``. ``remote`` makes the reader
    of remote-only months, when the range holds one: read in place by the
    SQLite engine, sealed ones opened whole for either."""

    def __init__(
        self,
        settings: Settings,
        span: TimeRange,
        *,
        partial: bool = False,
        as_text: bool = False,
        engine: Engine = "duckdb",
        remote: Callable[[], RemoteMonths] | None = None,
    ) -> None:
        self.settings, self.span, self.partial, self.as_text = settings, span, partial, as_text
        self.engine, self.remote = engine, remote
        self.layout = Layout(settings.archive_root)
        self.plan = Plan()
        self.con: duckdb.DuckDBPyConnection | None = None
        self.lite: apsw.Connection | None = None
        self.away: RemoteMonths | None = None
        self._away: dict[str, RemoteMonth] = {}  # remote-only months the engine reads there
        self._schema_found: EventSchema | None = None
        self._here: frozenset[str] = frozenset()  # the months in range under events/ at open
        self._sources: list[Source] = []  # the databases attached, live first
        self._names: list[str] = []  # the months' schema names, as attached
        self._share: ReadShare | None = None  # DuckDB's, with the moves
        self._reading = False  # a DuckDB read holds the share
        self._cur: apsw.Cursor | None = None  # the SQLite read's statement

    def open(self) -> Plan:
        self.plan = Plan()
        schema = self._schema_found = self._schema()
        sources = self._sources = self._sourced(schema)
        if self.engine == "sqlite":
            self._open_sqlite(schema, sources)
        else:
            self._open_duckdb(schema, sources)
        return self.plan

    def _open_duckdb(self, schema: EventSchema, sources: list[Source]) -> None:
        from . import duckquery as duck  # noqa: PLC0415 - only this engine loads DuckDB

        if self._share is None:
            self._share = ReadShare(self.settings.archive_root)
        self._names = [s.name for s in sources[1:]]
        self.con = duck.connect(
            [(s.name, s.path) for s in sources], schema, self._when(schema), as_text=self.as_text
        )

    def _open_sqlite(self, schema: EventSchema, sources: list[Source]) -> None:
        from . import sqlitequery as lite  # noqa: PLC0415 - only this engine loads apsw

        away = self._away
        if len(sources) + len(away) > lite.ATTACHED:  # the range to narrow: a usage error
            raise UsageError(
                f"{len(sources) + len(away) - 1} months in the range: the sqlite engine reads "
                f"{lite.ATTACHED - 1} at most; narrow --from/--to, or use --engine duckdb"
            )
        con = self.lite = lite.connect(self.settings.events.busy_timeout_ms)
        for src in sources:
            lite.attach(con, lite.local_uri(str(src.path)), src.name)
        self._names = [s.name for s in sources[1:]] + self._attach_remote(con, schema, away)
        when = lite.when(schema, self.span.start, self.span.end)
        lite.make_view(con, VIEW, schema, self._names, when=when, as_text=self.as_text)
        lite.lock_down(con, ["live", *self._names])

    def _attach_remote(
        self, con: apsw.Connection, schema: EventSchema, away: dict[str, RemoteMonth]
    ) -> list[str]:
        """The remote-only months attached through the remote reader, each
        checked (its version, its largest id) as a local one is: their names.
        One that cannot be read refuses the query, or with ``partial`` is left
        out."""
        import apsw  # noqa: PLC0415

        from . import sqlitequery as lite  # noqa: PLC0415

        if not away:
            return []
        reader = self._reader()
        got: list[str] = []
        for month, obj in away.items():
            name = f"r_{month.replace('-', '_')}"
            try:
                uri = reader.attach_uri(month, obj)
                lite.attach(con, uri, name)
                lite.month_check(con, name, schema, MONTH_SCHEMA)
            except (ColdkeepError, apsw.Error, ValueError) as err:
                said = f"{month} (on the remote, {obj.path}): cannot be read ({first_line(err)}); "
                self._left_out(month, first_line(err), f"{said}{_MISSING}: {_PARTIAL}", err)
                if name in {str(r[1]) for r in con.execute("PRAGMA database_list")}:
                    lite.detach(con, name)
                continue
            got.append(name)
            self.plan.months.append(month)
            self.plan.remote.append(month)
        self.plan.months.sort()
        return got

    def _reader(self) -> RemoteMonths:
        assert self.remote is not None, "only with a remote"
        if self.away is None:
            self.away = self.remote()
        return self.away

    def _schema(self) -> EventSchema:
        db = self.settings.state_db
        assert db is not None, "Archiver.events_query checks state_db"
        live = open_live(
            db, busy_timeout_s=self.settings.events.busy_timeout_ms / 1000, readonly=True
        )
        try:
            return discover(live, db, self.settings.events)
        finally:
            live.close()

    def _local(self) -> dict[str, Path]:
        """The month databases under ``events/`` in range (reads the folder)."""
        return {m: p for m, p in self.layout.event_months().items() if self.span.holds_month(m)}

    def _sourced(self, schema: EventSchema) -> list[Source]:
        """The live database and every month in range that can be read, here or
        (sealed, opened) from the remote; the others refused or left out."""
        assert self.settings.state_db is not None
        sources = [Source("live", self.settings.state_db)]
        local = self._local()
        self._here = frozenset(local)
        self.plan.pruned = len(self.layout.event_months()) - len(local)
        for month, path in local.items():
            try:
                _month_top(path, schema)
            except sqlite3.DatabaseError as err:
                said = f"{path}: cannot be read ({err}); {_MISSING}: coldkeep verify says more, "
                self._left_out(month, str(err), said + _PARTIAL, err)
                continue
            sources.append(Source(_name(month), path))
            self.plan.months.append(month)
        recorded = _recorded(self.layout.manifest)
        shipped = recorded.shipped
        self._gone(
            {
                m: n
                for m, n in recorded.known.items()
                if self.span.holds_month(m) and m not in local and m not in shipped
            }
        )
        away = {m: o for m, o in shipped.items() if m not in local and self.span.holds_month(m)}
        sealed = {m: o for m, o in away.items() if o.sealed_to is not None}
        sources += self._opened(sealed, schema)
        self._remote_only({m: o for m, o in away.items() if m not in sealed})
        self.plan.months.sort()
        return sources

    def _left_out(self, month: str, why: str, said: str, err: BaseException | None) -> None:
        """A month that cannot be read: without ``partial`` the query refused,
        in the one line ``said``; with it, the month left out for ``why``."""
        if not self.partial:
            raise QueryError(said) from err
        self.plan.left_out[month] = why

    def _gone(self, gone: dict[str, int | None]) -> None:
        """Months the manifest knows that neither events/ nor the remote tier
        holds: refused, or with ``partial`` left out."""
        if gone and not self.partial:
            said = ", ".join(m if n is None else f"{m} ({n:,} rows)" for m, n in gone.items())
            raise QueryError(
                f"{said}: archived, but gone from {self.layout.events} and never shipped; "
                "its rows would be missing from the answer: put the month's database back "
                "there (from a backup), or --partial answers without it"
            )
        for month in gone:
            self.plan.left_out[month] = "archived, but its database is gone and none was shipped"

    def _opened(self, sealed: dict[str, RemoteMonth], schema: EventSchema) -> list[Source]:
        """The sealed remote-only months opened whole with the command's
        identity (into the read cache's folder, gone when the query closes),
        each checked as a local one is; one that cannot be opened refuses the
        query, or with ``partial`` is left out."""
        got = []
        for month, obj in sealed.items():
            if self.remote is None:  # the caller reads no remote month
                why = "only in the remote tier, sealed"
                self._left_out(month, why, f"{month}: {why}; {_MISSING}: {_PARTIAL}", None)
                continue
            try:
                path = self._reader().opened(month, obj)
                _month_top(path, schema)
            except (ColdkeepError, sqlite3.DatabaseError) as err:
                said = f"{first_line(err)}; {_MISSING}: {_PARTIAL}"
                self._left_out(month, first_line(err), said, err)
                continue
            got.append(Source(_name(month), path))
            self.plan.months.append(month)
            self.plan.remote.append(month)
        return got

    def _remote_only(self, away: dict[str, RemoteMonth]) -> None:
        """Months in range that only the remote tier holds, unsealed (their
        databases gone from here, not expired): read there by the SQLite engine
        given a remote (``_away``); else refused, or with ``partial`` left out."""
        if self.engine == "sqlite" and self.remote is not None:
            self._away = away
            return
        if away and not self.partial:
            reads = (
                "coldkeep query --engine sqlite reads them there, "
                if self.remote is not None
                else ""
            )
            raise QueryError(
                f"{', '.join(away)}: only in the remote tier (the databases are gone from "
                f"{self.layout.events}); their rows would be missing from the answer: "
                f"{reads}coldkeep restore-events fetches a lost month back, --partial answers "
                "without them"
            )
        for month in away:
            self.plan.left_out[month] = "only in the remote tier"

    def _when(self, schema: EventSchema) -> str:
        """The range as a condition on the time stamp, in its own units."""
        return schema.between_sql(self.span.start, self.span.end, iso_seconds=iso_seconds(schema))

    # the reads ------------------------------------------------------------------------

    def _moved(self) -> bool:
        """The months in range under events/ are not those opened."""
        return frozenset(self._local()) != self._here

    def _reopen(self) -> None:
        self._close_engines()
        self.open()

    def _begin_duckdb(self) -> None:
        """A DuckDB read begun: the share held, the engine opened again if the
        months changed, and the live ids a month's row may have as they are now."""
        from . import duckquery as duck  # noqa: PLC0415

        self._end_read()
        assert self._share is not None, "open() first"
        self._share.begin()
        self._reading = True
        try:
            if self._moved():
                self._reopen()
            tops = [_month_top(s.path, self.schema) for s in self._sources[1:]]
            assert self.con is not None
            top = max((t for t in tops if t is not None), default=None)
            duck.live_ids(self.con, self.schema, top)
        except BaseException:
            self._end_read()
            raise

    def _begin_sqlite(self) -> apsw.Connection:
        """A SQLite read begun: live's snapshot, then (the engine opened again
        if the months changed) every month's."""
        from . import sqlitequery as lite  # noqa: PLC0415

        self._end_read()
        while True:
            assert self.lite is not None, "open() first"
            lite.begin_read(self.lite, self.schema.table)
            if not self._moved():
                break
            lite.end_read(self.lite, None)
            self._reopen()
        lite.snapshot_months(self.lite, self._names)
        return self.lite

    def _end_read(self) -> bool:
        """The read in progress, if any, ended; whether it raced."""
        if self.lite is not None:
            from . import sqlitequery as lite  # noqa: PLC0415

            cur, self._cur = self._cur, None
            lite.end_read(self.lite, cur)
            return False
        if self._share is None or not self._reading:
            return False
        self._reading = False
        return self._share.end()

    def run(self, sql: str) -> Rows:
        """The rows of ``sql`` (one SELECT), streamed: one read, ended by the
        last row (or the next read, or ``close``)."""
        if self.lite is not None:
            return self._run_sqlite(sql)
        from . import duckquery as duck  # noqa: PLC0415

        assert self.con is not None, "open() first"
        duck.check_sql(self.con, sql, ["live", *self._names], self.schema.table)

        def execute() -> duckdb.DuckDBPyConnection:
            assert self.con is not None
            return self.con.execute(sql)

        read = duck.Streamed(execute, self._begin_duckdb, self._end_read, query_failed)
        return Rows(read.columns, read.fetch)

    def _run_sqlite(self, sql: str) -> Rows:
        import apsw  # noqa: PLC0415

        from . import sqlitequery as lite  # noqa: PLC0415

        con = self._begin_sqlite()
        try:
            columns, cur = lite.run(con, sql)
        except lite.Refused as err:
            self._end_read()
            raise BadQuery(str(err)) from err
        except apsw.SQLError as err:  # SQLite's error in the SQL: a syntax, a name, a view's write
            self._end_read()
            said = first_line(err)
            parse = "syntax error" in said or "incomplete input" in said
            raise BadQuery(
                f"the SQL {'does not parse' if parse else 'cannot run'}: {said}"
            ) from err
        except (apsw.Error, ColdkeepError) as err:  # a month's read from the remote too
            self._end_read()
            raise QueryError(f"the query failed: {first_line(err)}") from err
        self._cur = cur

        def fetched(size: int) -> list[tuple[Any, ...]]:
            if self._cur is not cur:  # the read ended: by its last row, or another read
                return []
            try:
                rows = lite.fetch(cur, size)
            except (apsw.Error, ColdkeepError) as err:  # a row met as the scan goes on
                self._end_read()
                raise QueryError(f"the query failed: {first_line(err)}") from err
            if len(rows) < size:
                self._end_read()
            return rows

        return Rows(columns, fetched)

    @property
    def schema(self) -> EventSchema:
        """The live table's columns the view has (after ``open``)."""
        assert self._schema_found is not None, "open() first"
        return self._schema_found

    def fetch(
        self, sql: str, params: Sequence[Any] = ()
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """coldkeep's own SQL over the view (with ``params``), its columns and
        every row, in one read: for queries built here, whose answers are small
        (SQL both engines read alike, or the engine's own)."""
        if self.lite is not None:
            return self._fetch_sqlite(sql, params)
        import duckdb  # noqa: PLC0415

        from .duckquery import TRIES  # noqa: PLC0415

        for _ in range(TRIES):
            self._begin_duckdb()
            assert self.con is not None
            try:
                cur = self.con.execute(sql, list(params))
                got = [d[0] for d in (cur.description or [])], cur.fetchall()
            except duckdb.Error as err:
                self._end_read()
                raise query_failed(err) from err
            if not self._end_read():
                return got
        raise QueryRaced

    def _fetch_sqlite(
        self, sql: str, params: Sequence[Any]
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        import apsw  # noqa: PLC0415

        con = self._begin_sqlite()
        try:
            cur = con.execute(sql, tuple(params))
            try:
                columns = [d[0] for d in cur.get_description()]
            except apsw.ExecutionCompleteError:  # no row: the view's columns
                return list(self.schema.columns), []
            return columns, cur.fetchall()
        except (apsw.Error, ColdkeepError) as err:
            raise QueryError(f"the query failed: {first_line(err)}") from err
        finally:
            self._end_read()

    def interrupt(self) -> None:
        """Stop the statement running now, from any thread (it fails)."""
        if self.con is not None:
            self.con.interrupt()
        if self.lite is not None:
            self.lite.interrupt()

    def _close_engines(self) -> None:
        """Every connection closed, then the remote reader (its bytes fetched
        recorded in the plan)."""
        if self.con is not None:
            self.con.close()
            self.con = None
        if self.lite is not None:
            self.lite.close()
            self.lite = None
            self._cur = None
        if self.away is not None:
            self.plan.fetched_bytes = self.away.fetched_bytes
            self.plan.remote_pages = self.away.pages_read
            self.away.close()
            self.away = None

    def close(self) -> None:
        """The read in progress ended, the engine closed, the share let go.
        Idempotent."""
        if self.lite is not None or self._reading:
            self._end_read()
        self._close_engines()
        if self._share is not None:
            self._share.close()
            self._share = None


def query_failed(err: BaseException) -> QueryError:
    """DuckDB's error as one line; for a value of another type than its column
    declares (SQLite stores it all the same), what to do about it."""
    import duckdb  # noqa: PLC0415

    said = f"the query failed: {first_line(err)}"
    if isinstance(err, duckdb.TypeMismatchException):
        said += " (SQLite lets a row hold it: --as-text reads every column as text)"
    return QueryError(said)


class Rows:
    """A query's result: its column names, and its rows a batch at a time."""

    def __init__(self, columns: list[str], fetch: Callable[[int], list[tuple[Any, ...]]]) -> None:
        self.columns = columns
        self._fetch = fetch

    def batches(self, size: int = 2048) -> Iterator[list[tuple[Any, ...]]]:
        while batch := self._fetch(size):
            yield batch
