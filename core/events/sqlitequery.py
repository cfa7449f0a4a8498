"""The query's second engine (``--engine sqlite``): SQLite itself, through apsw,
over the same ``events`` view query.py's DuckDB builds. A ``WHERE id = X`` is
pushed into each branch of the view's UNION ALL, so a point lookup is one index
descent per month (DuckDB's SQLite reader pushes no filter down and scans
every row). The price: SQL is SQLite's dialect (``7/2`` is 3, DuckDB's 3.5),
one core, and at most ``ATTACHED`` databases in one query. It alone reads a
month only the remote tier holds, in place (remote/monthvfs.py's VFS).

Invariants:
- Nothing is written: every database is attached by a ``mode=ro`` URI (a remote
  month ``immutable`` too) before the caller's SQL is seen; then ``PRAGMA
  query_only``, and an authorizer that allows reading and calling functions
  only (no ATTACH, DETACH, PRAGMA, transaction or write, in any schema). Sorts
  and temporary b-trees stay in memory (``temp_store``): nothing spills to disk.
- One statement: every statement of the SQL is prepared (and authorized)
  before the first is run; more than one is refused.
- The view is query.py's: the same sources, the same time-range predicate (in
  SQLite's words), a month's row left out where the live table has its id, and
  every column of any source (NULL where a source lacks it), the live table's
  first.
"""

from __future__ import annotations

import contextlib
import re
import urllib.parse
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

import apsw

from .eventschema import EventSchema, q

# SQLite's compiled-in most, live table included (the main and temp schemas
# are not counted).
ATTACHED = 125
_READS = frozenset(
    {apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_FUNCTION, apsw.SQLITE_RECURSIVE}
)
_FIRST_WORD = re.compile(r"(?:\s|--[^\n]*\n?|/\*.*?\*/)*(\w+)", re.S)


class Refused(Exception):
    """The SQL is not one read-only statement; the message says why."""


def local_uri(path: str) -> str:
    return f"file:{urllib.parse.quote(path)}?mode=ro"


def connect(busy_timeout_ms: int) -> apsw.Connection:
    con = apsw.Connection(
        ":memory:",
        flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE | apsw.SQLITE_OPEN_URI,
    )
    con.limit(apsw.SQLITE_LIMIT_ATTACHED, ATTACHED)
    con.set_busy_timeout(busy_timeout_ms)
    con.execute("PRAGMA temp_store = MEMORY")
    return con


def attach(con: apsw.Connection, uri: str, name: str) -> None:
    con.execute("ATTACH ? AS " + q(name), (uri,))


def detach(con: apsw.Connection, name: str) -> None:
    con.execute("DETACH " + q(name))


def month_check(con: apsw.Connection, name: str, schema: EventSchema, newest: int) -> int | None:
    """An attached month's largest row id (None: empty), once its version is one
    this coldkeep reads (``apsw.Error``, or a ``ValueError`` saying it is newer)."""
    [(version,)] = con.execute(f"PRAGMA {q(name)}.user_version").fetchall()
    if int(str(version)) > newest:
        raise ValueError(
            f"month schema version {version}, this coldkeep knows up to {newest}: upgrade coldkeep"
        )
    [(top,)] = con.execute(f"SELECT max({q(schema.pk)}) FROM {q(name)}.{q(schema.table)}")
    return None if top is None else int(top)


def _columns(con: apsw.Connection, name: str, table: str) -> list[str]:
    return [str(r[1]) for r in con.execute(f"PRAGMA {q(name)}.table_info({q(table)})")]


def make_view(
    con: apsw.Connection,
    view: str,
    schema: EventSchema,
    names: Sequence[tuple[str, int | None]],
    *,
    when: str,
    as_text: bool,
) -> None:
    """``view`` over the live table and the months ``names`` (each with its
    largest id), as query.py's DuckDB view: the rows in the range, a month's row
    left out where the live table has the same id."""
    pk, table = q(schema.pk), q(schema.table)
    sources = ["live", *(n for n, top in names if top is not None)]
    have = {s: _columns(con, s, schema.table) for s in sources}
    every = list(dict.fromkeys(c for s in sources for c in have[s]))
    tops = [top for _, top in names if top is not None]
    dup = ""
    if tops:
        con.execute("CREATE TEMP TABLE coldkeep_live_ids (id INTEGER PRIMARY KEY)")
        con.execute(
            f"INSERT INTO temp.coldkeep_live_ids SELECT {pk} FROM live.{table} "
            f"WHERE {pk} <= {max(tops)}"
        )
        if con.execute("SELECT count(*) FROM temp.coldkeep_live_ids").fetchall()[0][0]:
            dup = f"{pk} NOT IN (SELECT id FROM temp.coldkeep_live_ids)"
    parts = []
    for s in sources:
        cols = ", ".join(_column(c, c in have[s], as_text) for c in every)
        conds = " AND ".join(c for c in (when, "" if s == "live" else dup) if c)
        parts.append(f"SELECT {cols} FROM {q(s)}.{table}" + (f" WHERE {conds}" if conds else ""))
    con.execute(f"CREATE TEMP VIEW {q(view)} AS " + " UNION ALL ".join(parts))


def _column(name: str, present: bool, as_text: bool) -> str:
    if not present:
        return f"NULL AS {q(name)}"
    return f"CAST({q(name)} AS TEXT) AS {q(name)}" if as_text else q(name)


def when(schema: EventSchema, start: int | None, end: int | None) -> str:
    """The range (UTC seconds, end excluded) as a condition on the time stamp,
    in its own units; an ISO time stamp by its offset (``unixepoch``: one that
    is not a time is in no range)."""
    return schema.between_sql(start, end, iso_seconds=f"unixepoch({q(schema.ts)}, 'subsec')")


def lock_down(con: apsw.Connection) -> None:
    """From now on the connection reads, and nothing else."""
    con.execute("PRAGMA query_only = 1")
    con.authorizer = _authorize


def _authorize(op: int, _p1: str | None, _p2: str | None, _db: str | None, _via: str | None) -> int:
    return int(apsw.SQLITE_OK if op in _READS else apsw.SQLITE_DENY)


def _prepared(con: apsw.Connection, sql: str) -> tuple[str, list[str] | None]:
    """The first statement of ``sql`` prepared (authorized) but not run: its
    text (empty: ``sql`` is used up) and its columns (None: it is blank, or a
    comment, and would run nothing)."""
    first: list[tuple[str, list[str] | None]] = [("", None)]

    def stop(cur: apsw.Cursor, text: str, _bindings: Any) -> bool:
        first[0] = (text, [d[0] for d in cur.get_description()] if cur.has_vdbe else None)
        return False  # prepared, never stepped

    cur = con.cursor()
    cur.exec_trace = stop
    with contextlib.suppress(apsw.ExecTraceAbort):
        cur.execute(sql, can_cache=False)
    return first[0]


def run(con: apsw.Connection, sql: str) -> tuple[list[str], Callable[[int], list[tuple[Any, ...]]]]:
    """The columns of ``sql`` (one SELECT) and a fetch of its next rows. A
    statement that is not a read is ``Refused``; SQLite's errors are apsw's."""
    word = _FIRST_WORD.match(sql)
    kind = word[1].upper() if word else ""
    if kind not in ("SELECT", "WITH", "VALUES", "EXPLAIN"):
        raise Refused(
            f"only SELECT is run ({kind or 'nothing'} given): a query reads, never writes"
        )
    rest, count = sql, 0
    columns: list[str] = []
    try:
        while rest:
            text, cols = _prepared(con, rest)
            if not text:
                break
            if cols is not None:
                count += 1
                columns = columns or cols
            rest = rest[len(text) :]
        if count != 1:
            raise Refused(f"one statement at a time ({count} given)")
        cur = con.cursor()
        cur.execute(sql)
    except apsw.AuthError as err:
        raise Refused(f"only reading is allowed: {err}") from err
    return columns, lambda size: list(islice(cur, size))
