"""The query's first engine (the default): DuckDB with its SQLite reader (the
``sqlite_scanner`` extension, loaded from the ``duckdb-extension-sqlite-scanner``
package, never downloaded), over the ``events`` view query.py describes.

Invariants:
- Nothing is written, and nothing but the live table and the months is read:
  every database is attached ``READ_ONLY``; once they are, DuckDB's access to
  files is switched off and its configuration locked (no COPY, ATTACH, LOAD,
  INSTALL, SET, read_csv of anything, extension loaded on demand). The SQLite
  reader's own functions (``sqlite_scan``, ``sqlite_attach``, ``sqlite_query``)
  do not ask whether access to files is on, so before the caller's SQL runs,
  DuckDB's own parser reads it (``json_serialize_sql``) and the tree is
  walked: a table function not in ``TABLE_FUNCTIONS`` (each computes from its
  arguments alone), or a table other than the view, its companion, a CTE of
  the statement or the events table of a database attached, refuses it. Only
  one SELECT (or EXPLAIN of one) is run. DuckDB never spills to disk.
- A month's row is left out where the live table has its id: the live ids at
  or below the months' largest, read into a temporary table (``LIVE_IDS``) at
  the start of each read, under its share: one scan of live a read, however
  many months.
- A read (``Streamed``) holds the share with the moves (readshare.py) from
  before its statement runs until its last row is fetched: DuckDB scans each
  database on connections of its own, at moments of its own, so the months
  and live must not change under it. A read that raced all the same (a move
  that waited for it no longer) is run again while none of its rows has left
  (the first batch is held back until a second comes or the rows end), and
  refused (``QueryRaced``) once any has.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb

from .eventschema import EventSchema, q
from .queryterms import FROM, SOURCED, VIEW, BadQuery, QueryError, QueryRaced, first_line, sql_text

ALLOWED = ("SELECT", "EXPLAIN")
# Table functions the caller's SQL may use: each computes from its arguments.
TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "json_each", "json_tree"})
# The live ids a month's row may have, as the read found them (in memory).
LIVE_IDS = "coldkeep_live_ids"
# How many times a read that raced before any row left is run.
TRIES = 3
_EXPLAIN = re.compile(r"\s*EXPLAIN(?:\s+ANALY[SZ]E)?\s+", re.I)


# Every coldkeep connection's: extensions only from their packages (an offline
# host cannot download them), never spilling to disk.
CONFIG: dict[str, Any] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_unsigned_extensions": False,
    "allow_community_extensions": False,
    "temp_directory": "",
    # A core left to the application: its writer's commits wait on none of ours.
    "threads": max(1, (os.cpu_count() or 1) - 1),
    # DuckDB 1.5.5 takes scans of the same table name in different SQLite
    # files for one subplan, and answers every month from the first: a
    # month's rows counted twelve times.
    "disabled_optimizers": "common_subplan",
}


def packaged(package: str, what: str) -> Path:
    """The file of the DuckDB extension that the Python package ``package``
    holds, built for this DuckDB (an offline host cannot let DuckDB download
    it; nor should any host); ``what`` names it in the error saying it is
    not installed."""
    version = duckdb.__version__
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    found = [
        f
        for d in folders
        for f in sorted(Path(d).glob(f"extensions/v{version}/*.duckdb_extension"))
    ]
    if not found:
        raise QueryError(
            f"{what} for DuckDB {version} is not installed: pip install "
            f"'{package.replace('_', '-')}=={version}'"
        )
    return found[0]


def extension() -> Path:
    """The SQLite reader's file for this DuckDB, from its package."""
    return packaged("duckdb_extension_sqlite_scanner", "DuckDB's SQLite reader")


def connect(
    sources: Sequence[tuple[str, Path]], schema: EventSchema, when: str, *, as_text: bool
) -> duckdb.DuckDBPyConnection:
    """A connection with ``sources`` (name, path: the live database first)
    attached read-only and the view made over them, then locked down."""
    con = duckdb.connect(config=CONFIG)
    try:
        con.execute("SET TimeZone = 'UTC'")  # times shown as every other coldkeep time is
        con.execute(f"LOAD {sql_text(str(extension()))}")
        if as_text:
            con.execute("SET sqlite_all_varchar = true")
        for name, path in sources:
            con.execute(f"ATTACH {sql_text(str(path))} AS {name} (TYPE sqlite, READ_ONLY)")
        live_ids(con, schema, None)
        _view(con, schema, [name for name, _ in sources[1:]], when)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def _view(
    con: duckdb.DuckDBPyConnection, schema: EventSchema, months: list[str], when: str
) -> None:
    """``events``: every source's rows in the range, a month's row left out
    where the live table has the same id (restored, or between a move's copy
    and its delete: the live copy counts); ``coldkeep_rows``: the same with
    each row's ``coldkeep_from``."""
    pk, table = q(schema.pk), q(schema.table)
    parts = [f"SELECT *, 'live' AS {FROM} FROM live.{table}" + (f" WHERE {when}" if when else "")]
    for name in months:
        conds = " AND ".join(c for c in (when, f"{pk} NOT IN (SELECT id FROM {LIVE_IDS})") if c)
        parts.append(f"SELECT *, 'archive' AS {FROM} FROM {name}.{table} WHERE {conds}")
    con.execute(f"CREATE TEMP VIEW {SOURCED} AS " + " UNION ALL BY NAME ".join(parts))
    con.execute(f"CREATE TEMP VIEW {VIEW} AS SELECT * EXCLUDE ({FROM}) FROM {SOURCED}")


def live_ids(con: duckdb.DuckDBPyConnection, schema: EventSchema, top: int | None) -> None:
    """The live ids at or below ``top``, the months' largest id (None: no month
    holds a row), for the read beginning."""
    pk, table = q(schema.pk), q(schema.table)
    below = "false" if top is None else f"{pk} <= {int(top)}"
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {LIVE_IDS} AS SELECT {pk} AS id FROM live.{table} "
        f"WHERE {below}"
    )


def check_sql(
    con: duckdb.DuckDBPyConnection, sql: str, attached: Sequence[str], table: str
) -> None:
    """``BadQuery`` unless ``sql`` is one SELECT (or EXPLAIN of one) that reads
    nothing but the view, its companion, its own CTEs, the events ``table`` of
    the databases ``attached``, and the table functions allowed."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as err:
        raise BadQuery(f"the SQL does not parse: {first_line(err)}") from err
    if len(statements) != 1:
        raise BadQuery(f"one statement at a time ({len(statements)} given)")
    kind = statements[0].type.name
    if kind not in ALLOWED:
        raise BadQuery(f"only SELECT is run ({kind} given): a query reads, never writes")
    text = statements[0].query
    if kind == "EXPLAIN":
        explain = _EXPLAIN.match(text)
        text = text[explain.end() :] if explain else ""
    [(tree,)] = con.execute("SELECT json_serialize_sql(?)", [text]).fetchall()
    parsed = json.loads(tree)
    if parsed.get("error") or len(parsed.get("statements", [])) != 1:
        said = parsed.get("error_message", "not one SELECT")
        raise BadQuery(f"the SQL cannot be checked ({said}): give one SELECT")
    ctes = {str(c["key"]).lower() for c in _nodes(parsed, "cte_map") for c in c.get("map", [])}
    names = {VIEW, SOURCED, *ctes}
    reached = sorted(set(_reached(parsed, names, {a.lower() for a in attached}, table.lower())))
    if reached:
        raise BadQuery(
            f"the SQL reads {', '.join(reached)}: a query reads the events view (the live "
            "table and the archived months) and nothing else"
        )


def _nodes(tree: Any, key: str) -> Iterator[dict[str, Any]]:
    """Every value under ``key`` anywhere in the parse tree."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k == key and isinstance(v, dict):
                yield v
            yield from _nodes(v, key)
    elif isinstance(tree, list):
        for v in tree:
            yield from _nodes(v, key)


def _reached(tree: Any, names: set[str], attached: set[str], table: str) -> Iterator[str]:
    """What the parse tree reads that it may not: table functions and tables."""
    if isinstance(tree, list):
        for v in tree:
            yield from _reached(v, names, attached, table)
        return
    if not isinstance(tree, dict):
        return
    kind = tree.get("type")
    if kind == "TABLE_FUNCTION":
        fn = tree.get("function") or {}
        name = str(fn.get("function_name", "")).lower()
        if name not in TABLE_FUNCTIONS or fn.get("schema") or fn.get("catalog"):
            yield f"{name}()"
    elif kind == "BASE_TABLE":
        where = [str(tree.get(k) or "").lower() for k in ("catalog_name", "schema_name")]
        name = str(tree.get("table_name", "")).lower()
        qualified = [w for w in where if w]
        if not (
            (not qualified and name in names)
            or (qualified and set(qualified) <= attached | {"main"} and name == table)
        ):
            yield ".".join([*qualified, name])
    for v in tree.values():
        yield from _reached(v, names, attached, table)


class Streamed:
    """A statement's rows over one read: ``begin`` before the statement runs,
    ``end`` after its last row (True: it raced). ``fetch`` gives them a batch
    at a time, the first held back until a second comes or the rows end, so
    that a read that raced is run again while no row has left."""

    def __init__(
        self,
        execute: Callable[[], duckdb.DuckDBPyConnection],
        begin: Callable[[], None],
        end: Callable[[], bool],
        failed: Callable[[BaseException], QueryError],
    ) -> None:
        self.execute, self.begin, self.end, self.failed = execute, begin, end, failed
        self.tries = 0
        self.pending: list[tuple[Any, ...]] | None = None  # the next batch; None: none read
        self.raced = False  # known once the rows have ended
        self.columns = self._start()

    def _start(self) -> list[str]:
        self.tries += 1
        self.raced = False
        self.begin()
        try:
            self.cur = self.execute()
        except duckdb.Error as err:
            self.end()
            raise self.failed(err) from err
        return [d[0] for d in (self.cur.description or [])]

    def _more(self, size: int) -> list[tuple[Any, ...]]:
        try:
            got = self.cur.fetchmany(size)
        except duckdb.Error as err:  # a row met as the scan goes on
            self.end()
            raise self.failed(err) from err
        if not got:
            self.raced = self.end()
        return got

    def fetch(self, size: int) -> list[tuple[Any, ...]]:
        if self.pending is None:  # the first batch: held until the second, or the end
            while True:
                first = self._more(size)
                self.pending = self._more(size) if first else []
                if not self.raced:
                    return first
                if self.tries >= TRIES:
                    raise QueryRaced
                self._start()  # no row has left: the read again
        if not self.pending:
            if self.raced:
                raise QueryRaced
            return []
        out, self.pending = self.pending, self._more(size)
        return out
