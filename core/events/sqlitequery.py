"""The query's second engine (``--engine sqlite``): SQLite itself, through apsw,
over the same ``events`` view query.py's DuckDB builds. A ``WHERE id = X`` is
pushed into each branch of the view's UNION ALL, so a point lookup is one index
descent per month (DuckDB's SQLite reader pushes no filter down and scans
every row). The price: SQL is SQLite's dialect (``7/2`` is 3, DuckDB's 3.5),
one core, and at most ``ATTACHED`` databases in one query. It alone reads a
month only the remote tier holds, in place (remote/monthvfs.py's VFS).

Invariants:
- Nothing is written, and nothing but the live table and the months is read:
  every database is attached by a ``mode=ro`` URI (a remote month
  ``immutable`` too) before the caller's SQL is seen; then ``PRAGMA
  query_only``, and an authorizer that allows a statement to read the
  databases attached (and the view over them), ``json_each`` and ``json_tree``,
  and to call functions but those that load code (no ATTACH, DETACH, PRAGMA,
  transaction, write, other virtual table: ``dbstat``, ``fts*``, ``pragma_*``).
  Sorts and temporary b-trees stay in memory (``temp_store``): nothing spills
  to disk.
- One statement: every statement of the SQL is prepared (and authorized)
  before the first is run; more than one is refused.
- A read is one snapshot (``begin_read``): the live table's is taken first,
  then every month's, and held until ``end_read``. A pass copies a batch into
  its month before it deletes it from live, so a row gone from live by then is
  in its month's later snapshot, and a row copied after is still live.
- The view is query.py's: the same sources, the same time-range predicate (in
  SQLite's words), a month's row left out where the live table has its id (in
  the read's own snapshot of live), and every column of any source (NULL where
  a source lacks it), the live table's first.
"""

from __future__ import annotations

import contextlib
import re
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from typing import Any

import apsw

from .eventschema import EventSchema, q

# SQLite's compiled-in most, live table included (the main and temp schemas
# are not counted).
ATTACHED = 125
# Virtual tables a statement may read besides the databases: they compute from
# their arguments alone.
TABLE_FUNCTIONS = frozenset({"json_each", "json_tree"})
# Functions that load code or register it by a pointer.
REFUSED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer"})
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
    months: Sequence[str],
    *,
    when: str,
    as_text: bool,
) -> None:
    """``view`` over the live table and the months attached as ``months``, as
    query.py's DuckDB view: the rows in the range, a month's row left out where
    the live table has the same id (one lookup by id in live a row: a page of
    rows costs a page of lookups)."""
    pk, table = q(schema.pk), q(schema.table)
    sources = ["live", *months]
    have = {s: _columns(con, s, schema.table) for s in sources}
    every = list(dict.fromkeys(c for s in sources for c in have[s]))
    live_has = f"NOT EXISTS (SELECT 1 FROM live.{table} l WHERE l.{pk} = a.{pk})"
    parts = []
    for s in sources:
        cols = ", ".join(_column(c, c in have[s], as_text) for c in every)
        conds = " AND ".join(c for c in (when, "" if s == "live" else live_has) if c)
        parts.append(
            f"SELECT {cols} FROM {q(s)}.{table} AS a" + (f" WHERE {conds}" if conds else "")
        )
    con.execute(f"CREATE TEMP VIEW {q(view)} AS " + " UNION ALL ".join(parts))


def _column(name: str, present: bool, as_text: bool) -> str:
    if not present:
        return f"NULL AS {q(name)}"
    return f"CAST(a.{q(name)} AS TEXT) AS {q(name)}" if as_text else f"a.{q(name)}"


def when(schema: EventSchema, start: int | None, end: int | None) -> str:
    """The range (UTC seconds, end excluded) as a condition on the time stamp,
    in its own units; an ISO time stamp by its offset (``unixepoch``: one that
    is not a time is in no range)."""
    return schema.between_sql(start, end, iso_seconds=f"unixepoch({q(schema.ts)}, 'subsec')")


def lock_down(con: apsw.Connection, attached: Sequence[str]) -> None:
    """From now on the connection reads the databases ``attached`` (and the
    view over them), and nothing else."""
    con.execute("PRAGMA query_only = 1")
    con.authorizer = _authorizer(frozenset({"temp", *attached}))


def _authorizer(
    schemas: frozenset[str],
) -> Callable[[int, str | None, str | None, str | None, str | None], int]:
    def authorize(op: int, p1: str | None, p2: str | None, db: str | None, _via: str | None) -> int:
        if op in (apsw.SQLITE_SELECT, apsw.SQLITE_RECURSIVE):
            ok = True
        elif op == apsw.SQLITE_READ:  # p1: the table; db: its schema ('main': a virtual
            # one; None: the view or a subquery as a whole, whose tables come on their own)
            ok = db is None or db in schemas or (db == "main" and p1 in TABLE_FUNCTIONS)
        elif op == apsw.SQLITE_FUNCTION:  # p2: its name
            ok = (p2 or "").lower() not in REFUSED_FUNCTIONS
        else:
            ok = False
        return int(apsw.SQLITE_OK if ok else apsw.SQLITE_DENY)

    return authorize


@contextlib.contextmanager
def _unchecked(con: apsw.Connection) -> Iterator[None]:
    """coldkeep's own statements (a read's transaction), past the authorizer."""
    authorize, con.authorizer = con.authorizer, None
    try:
        yield
    finally:
        con.authorizer = authorize


def begin_read(con: apsw.Connection, table: str) -> None:
    """A read's transaction begun and the live table's snapshot taken (the
    months' next: ``snapshot_months``)."""
    with _unchecked(con):
        con.execute("BEGIN")
        con.execute(f"SELECT 1 FROM live.{q(table)} LIMIT 1").fetchall()


def snapshot_months(con: apsw.Connection, months: Sequence[str]) -> None:
    """Every month's snapshot taken, after live's, for the rest of the read."""
    with _unchecked(con):
        for name in months:
            con.execute(f"SELECT 1 FROM {q(name)}.sqlite_master LIMIT 1").fetchall()


def end_read(con: apsw.Connection, cur: apsw.Cursor | None) -> None:
    """The read's snapshots let go, its statement ``cur`` stopped first."""
    if cur is not None:
        cur.close()
    with _unchecked(con):
        if con.in_transaction:
            con.execute("COMMIT")


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


def run(con: apsw.Connection, sql: str) -> tuple[list[str], apsw.Cursor]:
    """The columns of ``sql`` (one SELECT) and the cursor its rows come from. A
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
        raise Refused(
            f"only reading is allowed ({err}): a query reads the events view, the live "
            "table and the archived months, and nothing else"
        ) from err
    return columns, cur


def fetch(cur: apsw.Cursor, size: int) -> list[tuple[Any, ...]]:
    """The next ``size`` rows of ``cur`` at most."""
    return list(islice(cur, size))
