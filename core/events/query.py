"""Read-only SQL over every event row: the application's live table and every
archived month, seen as one table, ``events``, without restoring anything.

Two engines run the same view. DuckDB (the default), its SQLite reader (the
``sqlite_scanner`` extension, loaded from the ``duckdb-extension-sqlite-scanner``
package, never downloaded) attaching each database read-only: it scans many
SQLite files in one plan, in parallel, and takes any number of them; but it
pushes no filter into a SQLite file, so a lookup by id reads every row of the
months in range. SQLite itself (sqlitequery.py): a lookup by id is an index
descent per month; at most 125 databases, one core, SQLite's dialect; and it
reads a month only the remote tier holds in place, through the ``RemoteMonths``
the caller gives (remote/monthvfs.py). Neither is chosen for the caller: the
two dialects can answer the same SQL differently (``7/2``).

Invariants:
- One core is left to the application (DuckDB runs on the others, or one).
- Nothing is written: every database is attached ``READ_ONLY``; once they are,
  DuckDB's access to files is switched off and locked (no COPY, no ATTACH, no
  read_csv of anything), and only one SELECT (or EXPLAIN) is run. DuckDB never
  spills to disk. SQLite itself makes a WAL database's ``-shm`` and an empty
  ``-wal`` beside it when none is there, as any reader does.
- Months outside ``--from``/``--to`` are pruned by name, never opened; the rows
  of the months kept are filtered by their time stamp, as the live table's.
- A row is counted once: a row restored into the live table is also still in
  its month, and the live copy is the one shown.
- A month that cannot be read (damaged, a newer coldkeep's), or that only the
  remote tier holds and the engine cannot read there (DuckDB; or no remote to
  read from), refuses the query, named in one line, unless the caller accepts
  an answer without it: an answer is never silently missing a month. DuckDB
  does not download such a month whole: the SQLite engine reads the pages it
  needs, and restore-events brings a month back for good.
- A value of another type than its column declares (SQLite lets a row hold
  any) fails the query in one line that says to read every column as text.
"""

from __future__ import annotations

import calendar
import importlib.util
import os
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
from ..store.manifest import reading
from .eventschema import MONTH_SCHEMA, EventSchema, discover, open_live, q, reading_month

if TYPE_CHECKING:
    import apsw
    import duckdb

VIEW = "events"
# The view's rows with where each came from ('live' or 'archive'), for counts
# of what a restore would put back; ``events`` leaves the column out.
SOURCED, FROM = "coldkeep_rows", "coldkeep_from"
ALLOWED = ("SELECT", "EXPLAIN")
Engine = Literal["duckdb", "sqlite"]
ENGINES: tuple[Engine, ...] = ("duckdb", "sqlite")
_DATE = re.compile(r"(\d{4})-(\d{2})(?:-(\d{2}))?")


class QueryError(ColdkeepError):
    """The query cannot be answered; the message says why and what to do."""


class BadQuery(UsageError):
    """The SQL given is not one read-only statement, or does not parse."""


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
    """Month snapshots only the remote tier holds, read in place by the SQLite
    engine (remote/monthvfs.py): ``attach_uri`` checks the object shipped is
    there and gives the URI SQLite attaches it by (a ``ColdkeepError`` naming it
    if not)."""

    fetched_bytes: int  # from the remote so far
    pages_read: int  # distinct pages SQLite read of them

    def attach_uri(self, month: str, shipped: RemoteMonth) -> str: ...

    def close(self) -> None: ...


@dataclass
class Plan:
    """What a query reads beside the live table: the months opened (``remote``:
    those of them read in place from the remote tier), how many the range
    pruned, and the months left out (each with why). Once the query is closed,
    the bytes fetched from the remote, and the pages of its months read."""

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
    top_id: int | None = None  # its largest row id (a month's), None if empty


@dataclass(frozen=True)
class RemoteMonth:
    """A month's newest snapshot on the remote as it shipped: its key under the
    site, its size and sha256, the version of the object the ship's HEAD
    confirmed (None: shipped before versions were recorded), and the age
    recipient set it is sealed to (None: stored as it is here)."""

    path: str
    size: int
    sha256: str
    version: str | None = None
    sealed_to: str | None = None


def iso_seconds(schema: EventSchema) -> str:
    """DuckDB SQL: an ISO time stamp as UTC seconds, placed by its offset (NULL
    if it is not a time)."""
    return f"epoch(TRY_CAST({q(schema.ts)} AS TIMESTAMPTZ))"


def sql_text(value: str) -> str:
    """``value`` as a SQL string literal (for a statement that takes no
    parameters)."""
    return "'" + value.replace("'", "''") + "'"


def _extension() -> Path:
    """The SQLite reader's file for this DuckDB, from its package (an offline
    host cannot let DuckDB download it)."""
    import duckdb  # noqa: PLC0415 - only a query pays for importing DuckDB

    version = duckdb.__version__
    spec = importlib.util.find_spec("duckdb_extension_sqlite_scanner")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    found = [
        f
        for d in folders
        for f in sorted(Path(d).glob(f"extensions/v{version}/*.duckdb_extension"))
    ]
    if not found:
        raise QueryError(
            f"DuckDB's SQLite reader for DuckDB {version} is not installed: pip install "
            f"'duckdb-extension-sqlite-scanner=={version}'"
        )
    return found[0]


def _month_source(path: Path, month: str, schema: EventSchema) -> Source:
    """A month checked before it is attached: a SQLite file of this coldkeep's
    month schema holding the table (``sqlite3.DatabaseError`` naming it)."""
    with reading_month(path) as conn:
        [(top,)] = conn.execute(f"SELECT max({q(schema.pk)}) FROM {q(schema.table)}").fetchall()
    return Source(f"m_{month.replace('-', '_')}", path, None if top is None else int(top))


class EventsQuery:
    """One query's engine: ``open`` the sources, then ``run`` SQL (a thread's:
    both engines block; the caller runs it off any event loop), then ``close``.
    ``remote`` makes the reader of remote-only months, for the SQLite engine,
    when the range holds one."""

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
        self.plan = Plan()
        self.con: duckdb.DuckDBPyConnection | None = None
        self.lite: apsw.Connection | None = None
        self.away: RemoteMonths | None = None
        self._away: dict[str, RemoteMonth] = {}  # remote-only months the engine reads there
        self._schema_found: EventSchema | None = None

    def open(self) -> Plan:
        schema = self._schema_found = self._schema()
        sources = self._sources(schema)
        if self.engine == "sqlite":
            self._open_sqlite(schema, sources)
        else:
            self._open_duckdb(schema, sources)
        return self.plan

    def _open_duckdb(self, schema: EventSchema, sources: list[Source]) -> None:
        import duckdb  # noqa: PLC0415 - only a query pays for importing DuckDB

        con = duckdb.connect(
            config={
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "temp_directory": "",
                # A core left to the application: its writer's commits wait on
                # none of ours.
                "threads": max(1, (os.cpu_count() or 1) - 1),
                # DuckDB 1.5.5 takes scans of the same table name in different
                # SQLite files for one subplan, and answers every month from the
                # first: a month's rows counted twelve times.
                "disabled_optimizers": "common_subplan",
            }
        )
        self.con = con
        con.execute("SET TimeZone = 'UTC'")  # times shown as every other coldkeep time is
        con.execute(f"LOAD {sql_text(str(_extension()))}")
        if self.as_text:
            con.execute("SET sqlite_all_varchar = true")
        for src in sources:
            con.execute(f"ATTACH {sql_text(str(src.path))} AS {src.name} (TYPE sqlite, READ_ONLY)")
        self._view(con, schema, sources)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")

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
        tops = [(s.name, s.top_id) for s in sources if s.name != "live"]
        tops += self._attach_remote(con, schema, away)
        when = lite.when(schema, self.span.start, self.span.end)
        lite.make_view(con, VIEW, schema, tops, when=when, as_text=self.as_text)
        lite.lock_down(con)

    def _attach_remote(
        self, con: apsw.Connection, schema: EventSchema, away: dict[str, RemoteMonth]
    ) -> list[tuple[str, int | None]]:
        """The remote-only months attached through the remote reader, each
        checked (its version, its largest id) as a local one is: their names
        and largest ids. One that cannot be read refuses the query, or with
        ``partial`` is left out."""
        import apsw  # noqa: PLC0415

        from . import sqlitequery as lite  # noqa: PLC0415

        if not away or self.remote is None:
            return []
        reader = self.away = self.remote()
        got: list[tuple[str, int | None]] = []
        for month, obj in away.items():
            name = f"r_{month.replace('-', '_')}"
            try:
                uri = reader.attach_uri(month, obj)
                lite.attach(con, uri, name)
                got.append((name, lite.month_check(con, name, schema, MONTH_SCHEMA)))
            except (ColdkeepError, apsw.Error, ValueError) as err:
                if not self.partial:
                    raise QueryError(
                        f"{month} (on the remote, {obj.path}): cannot be read "
                        f"({_first_line(err)}); its rows would be missing from the answer: "
                        "--partial answers without it"
                    ) from err
                if name in {str(r[1]) for r in con.execute("PRAGMA database_list")}:
                    lite.detach(con, name)
                self.plan.left_out[month] = _first_line(err)
                continue
            self.plan.months.append(month)
            self.plan.remote.append(month)
        self.plan.months.sort()
        return got

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

    def _sources(self, schema: EventSchema) -> list[Source]:
        assert self.settings.state_db is not None
        sources = [Source("live", self.settings.state_db)]
        for month, path in Layout(self.settings.archive_root).event_months().items():
            if not self.span.holds_month(month):
                self.plan.pruned += 1
                continue
            try:
                sources.append(_month_source(path, month, schema))
            except sqlite3.DatabaseError as err:
                if not self.partial:
                    raise QueryError(
                        f"{path}: cannot be read ({err}); its rows would be missing from the "
                        "answer: coldkeep verify says more, --partial answers without it"
                    ) from err
                self.plan.left_out[month] = str(err)
                continue
            self.plan.months.append(month)
        self._remote_only([*self.plan.months, *self.plan.left_out])
        return sources

    def _remote_only(self, here: list[str]) -> None:
        """Months in range that only the remote tier holds (their databases gone
        from here, not expired): read there by the SQLite engine given a remote
        (``_away``, each month's newest snapshot); else refused, or with
        ``partial`` left out."""
        manifest = Layout(self.settings.archive_root).manifest
        if not manifest.exists():
            return
        with reading(manifest) as conn:
            shipped = {
                m: RemoteMonth(*row)
                for (m, *row) in conn.execute(
                    "SELECT month, coalesce(stored_as, path), bytes, sha256, version, sealed_to "
                    "FROM remote_objects WHERE month IS NOT NULL "
                    "AND month NOT IN (SELECT month FROM expired_months) "
                    "ORDER BY month, shipped_at"
                )
            }
        away = [m for m in shipped if m not in here and self.span.holds_month(m)]
        if self.engine == "sqlite" and self.remote is not None:
            self._away = {m: shipped[m] for m in away}
            return
        if away and not self.partial:
            reads = (
                "coldkeep query --engine sqlite reads them there, "
                if self.remote is not None
                else ""
            )
            raise QueryError(
                f"{', '.join(away)}: only in the remote tier (the databases are gone from "
                f"{manifest.parent / 'events'}); their rows would be missing from the answer: "
                f"{reads}coldkeep restore-events fetches a lost month back, --partial answers "
                "without them"
            )
        for month in away:
            self.plan.left_out[month] = "only in the remote tier"

    def _view(
        self, con: duckdb.DuckDBPyConnection, schema: EventSchema, sources: Sequence[Source]
    ) -> None:
        """``events``: every source's rows in the range, a month's row left out
        where the live table has the same id (restored: the live copy counts);
        ``coldkeep_rows``: the same with each row's ``coldkeep_from``."""
        pk, table = q(schema.pk), q(schema.table)
        when = self._when(schema)
        months = [s for s in sources if s.name != "live" and s.top_id is not None]
        tops = [s.top_id for s in months if s.top_id is not None]
        dup = ""
        if tops:
            con.execute(
                f"CREATE TEMP TABLE coldkeep_live_ids AS SELECT {pk} AS id FROM live.{table} "
                f"WHERE {pk} <= {max(tops)}"
            )
            [(n,)] = con.execute("SELECT count(*) FROM coldkeep_live_ids").fetchall()
            if n:
                dup = f"{pk} NOT IN (SELECT id FROM coldkeep_live_ids)"
        parts = [
            f"SELECT *, 'live' AS {FROM} FROM live.{table}" + (f" WHERE {when}" if when else "")
        ]
        for src in months:
            conds = " AND ".join(c for c in (when, dup) if c)
            parts.append(
                f"SELECT *, 'archive' AS {FROM} FROM {src.name}.{table}"
                + (f" WHERE {conds}" if conds else "")
            )
        con.execute(f"CREATE TEMP VIEW {SOURCED} AS " + " UNION ALL BY NAME ".join(parts))
        con.execute(f"CREATE TEMP VIEW {VIEW} AS SELECT * EXCLUDE ({FROM}) FROM {SOURCED}")

    def _when(self, schema: EventSchema) -> str:
        """The range as a condition on the time stamp, in its own units."""
        return schema.between_sql(self.span.start, self.span.end, iso_seconds=iso_seconds(schema))

    def run(self, sql: str) -> Rows:
        """The rows of ``sql`` (one SELECT), streamed."""
        if self.lite is not None:
            return self._run_sqlite(self.lite, sql)
        import duckdb  # noqa: PLC0415

        assert self.con is not None, "open() first"
        try:
            statements = duckdb.extract_statements(sql)
        except duckdb.Error as err:
            raise BadQuery(f"the SQL does not parse: {_first_line(err)}") from err
        if len(statements) != 1:
            raise BadQuery(f"one statement at a time ({len(statements)} given)")
        kind = statements[0].type.name
        if kind not in ALLOWED:
            raise BadQuery(f"only SELECT is run ({kind} given): a query reads, never writes")
        try:
            cur = self.con.execute(sql)
        except duckdb.Error as err:
            raise query_failed(err) from err
        return Rows([d[0] for d in (cur.description or [])], _duckdb_fetch(cur))

    def _run_sqlite(self, con: apsw.Connection, sql: str) -> Rows:
        import apsw  # noqa: PLC0415

        from . import sqlitequery as lite  # noqa: PLC0415

        try:
            columns, fetch = lite.run(con, sql)
        except lite.Refused as err:
            raise BadQuery(str(err)) from err
        except apsw.SQLError as err:  # SQLite's error in the SQL: a syntax, a name, a view's write
            said = _first_line(err)
            parse = "syntax error" in said or "incomplete input" in said
            raise BadQuery(
                f"the SQL {'does not parse' if parse else 'cannot run'}: {said}"
            ) from err
        except (apsw.Error, ColdkeepError) as err:  # a month's read from the remote too
            raise QueryError(f"the query failed: {_first_line(err)}") from err

        def fetched(size: int) -> list[tuple[Any, ...]]:
            try:
                return fetch(size)
            except (apsw.Error, ColdkeepError) as err:  # a row met as the scan goes on
                raise QueryError(f"the query failed: {_first_line(err)}") from err

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
        every row: for queries built here, whose answers are small (SQL both
        engines read alike, or the engine's own)."""
        if self.lite is not None:
            return self._fetch_sqlite(self.lite, sql, params)
        import duckdb  # noqa: PLC0415

        assert self.con is not None, "open() first"
        try:
            cur = self.con.execute(sql, list(params))
            return [d[0] for d in (cur.description or [])], cur.fetchall()
        except duckdb.Error as err:
            raise query_failed(err) from err

    def _fetch_sqlite(
        self, con: apsw.Connection, sql: str, params: Sequence[Any]
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        import apsw  # noqa: PLC0415

        try:
            cur = con.execute(sql, tuple(params))
            try:
                columns = [d[0] for d in cur.get_description()]
            except apsw.ExecutionCompleteError:  # no row: the view's columns
                return list(self.schema.columns), []
            return columns, cur.fetchall()
        except (apsw.Error, ColdkeepError) as err:
            raise QueryError(f"the query failed: {_first_line(err)}") from err

    def interrupt(self) -> None:
        """Stop the statement running now, from any thread (it fails)."""
        if self.con is not None:
            self.con.interrupt()
        if self.lite is not None:
            self.lite.interrupt()

    def close(self) -> None:
        """Every connection closed, then the remote reader (its bytes fetched
        recorded in the plan). Idempotent."""
        if self.con is not None:
            self.con.close()
            self.con = None
        if self.lite is not None:
            self.lite.close()
            self.lite = None
        if self.away is not None:
            self.plan.fetched_bytes = self.away.fetched_bytes
            self.plan.remote_pages = self.away.pages_read
            self.away.close()
            self.away = None


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


def query_failed(err: BaseException) -> QueryError:
    """DuckDB's error as one line; for a value of another type than its column
    declares (SQLite stores it all the same), what to do about it."""
    import duckdb  # noqa: PLC0415

    said = f"the query failed: {_first_line(err)}"
    if isinstance(err, duckdb.TypeMismatchException):
        said += " (SQLite lets a row hold it: --as-text reads every column as text)"
    return QueryError(said)


def _duckdb_fetch(cur: duckdb.DuckDBPyConnection) -> Callable[[int], list[tuple[Any, ...]]]:
    import duckdb  # noqa: PLC0415

    def fetch(size: int) -> list[tuple[Any, ...]]:
        try:
            return cur.fetchmany(size)
        except duckdb.Error as err:  # a row met as the scan goes on
            raise query_failed(err) from err

    return fetch


class Rows:
    """A query's result: its column names, and its rows a batch at a time."""

    def __init__(self, columns: list[str], fetch: Callable[[int], list[tuple[Any, ...]]]) -> None:
        self.columns = columns
        self._fetch = fetch

    def batches(self, size: int = 2048) -> Iterator[list[tuple[Any, ...]]]:
        while batch := self._fetch(size):
            yield batch
