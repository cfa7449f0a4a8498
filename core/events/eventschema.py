"""The application's events table as coldkeep sees it: discovered, never assumed.

``discover`` reads the table's ``CREATE TABLE`` from ``sqlite_master`` and its
columns from ``PRAGMA table_info``, and refuses (``EventsError``, one line naming
the database, the table or column, and the fix) anything the mover cannot handle
safely: no such table, no single INTEGER PRIMARY KEY, a missing kind or ts column.

Time stamps are read as configured (``events.ts_format``): ``ms`` or ``s`` since the
epoch (numbers), or ``iso`` (ISO-8601 text). A value that is not one of those is
"unparsable": such rows are counted and never moved. So is a time stamp outside
the months Python's datetime can place (0001-01 to 9999-11: INT64_MIN ms, -inf,
year 10000): one definition, in SQL, for the mover, the plan, doctor and the
metrics, so that every month any of them sees is a real ``YYYY-MM`` (UTC).
"""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from ..base.configevents import EventsSettings, TsFormat
from ..base.errors import ColdkeepError
from ..base.ioerror import describe, is_io_error
from ..base.times import DAY_MS, DAY_S

# The seconds of the first month a month DB can be named for (0001-01) and of
# the month after the last (9999-12: Python's datetime has no month after it).
FIRST_S = -62_135_596_800
END_S = 253_399_622_400


class EventsError(ColdkeepError):
    """The events table cannot be moved as configured; the message says what to fix."""


def q(ident: str) -> str:
    """A quoted SQL identifier (config already allows only plain ones)."""
    return '"' + ident.replace('"', '""') + '"'


class SqlCondition(NamedTuple):
    """A SQL condition and its positional parameters."""

    sql: str
    params: list[Any]


@dataclass(frozen=True)
class EventSchema:
    db: Path
    table: str
    pk: str
    columns: tuple[str, ...]
    kind: str
    ts: str
    ts_format: TsFormat
    create_sql: str
    ts_text_affinity: bool = False  # the ts column's declared type makes it TEXT

    @property
    def select_columns(self) -> str:
        return ", ".join(q(c) for c in self.columns)

    @property
    def pk_index(self) -> int:
        return self.columns.index(self.pk)

    def cutoff(self, now_ms: int, min_age_days: float) -> float:
        """The ``:cutoff`` for ``eligible_sql``, in the units the SQL compares."""
        ms = now_ms - min_age_days * DAY_MS
        return ms if self.ts_format == "ms" else ms / 1000

    def between_sql(self, start: int | None, end: int | None, *, iso_seconds: str) -> str:
        """``start`` <= the time stamp < ``end`` (UTC seconds; None: open) as SQL
        ("" when both are open): a number compared as it is, in its own units
        (an index on it serves); an ISO text through ``iso_seconds``, the
        dialect's expression of it in seconds (NULL, in no range, if it is not
        a time)."""
        if self.ts_format == "iso":
            col, unit = iso_seconds, 1
        else:
            col, unit = q(self.ts), 1000 if self.ts_format == "ms" else 1
        bounds = [(">=", start), ("<", end)]
        return " AND ".join(f"{col} {op} {v * unit}" for op, v in bounds if v is not None)

    def ts_seconds_sql(self) -> str:
        """SQL for the time stamp in seconds, NULL when unparsable (no month
        can be found for it)."""
        ts = q(self.ts)
        if self.ts_format == "iso":
            secs = f"CAST(strftime('%s', {ts}) AS INTEGER)"
            return (
                f"(CASE WHEN typeof({ts}) = 'text' AND {secs} >= {FIRST_S} "
                f"AND {secs} < {END_S} THEN {secs} END)"
            )
        div = " / 1000" if self.ts_format == "ms" else ""
        return f"(CASE WHEN {self._in_range()} THEN {ts}{div} END)"

    def _in_range(self) -> str:
        """A number, in the months a month DB can be named for (the column
        itself compared, so that an index on it can be used)."""
        ts, unit = q(self.ts), 1000 if self.ts_format == "ms" else 1
        return (
            f"typeof({ts}) IN ('integer', 'real') AND {ts} >= {FIRST_S * unit} "
            f"AND {ts} < {END_S * unit}"
        )

    def eligible_sql(self, cutoff: str = ":cutoff") -> str:
        """A condition on the time stamp: parsable and older than the ``cutoff``
        parameter. For numbers it compares the column itself, so an index on it
        can be used."""
        ts = q(self.ts)
        if self.ts_format == "iso":
            return f"{self.ts_seconds_sql()} < {cutoff}"
        return f"{self._in_range()} AND {ts} < {cutoff}"

    def unparsable_sql(self) -> str:
        return f"{self.ts_seconds_sql()} IS NULL"

    def unparsable_of_kinds(self, kinds: SqlCondition | None) -> SqlCondition:
        """The rows meeting ``kinds`` (a condition on the kind column; None for
        every kind) whose time stamps are unparsable. For numbers, where the
        column's affinity is not TEXT, without an expression per row: NULL,
        a number outside the months, or anything else (text and blobs sort
        after every number), each an index range on (kind, ts) where there is
        one, in place of a walk of every row of the kinds (0.7 s at 10,000,000
        rows: a read transaction that long keeps the WAL from being
        checkpointed past it). With TEXT affinity the column would be compared
        as text."""
        if self.ts_format == "iso" or self.ts_text_affinity:
            ranges: tuple[str, ...] = (self.unparsable_sql(),)
        else:
            ts, unit = q(self.ts), 1000 if self.ts_format == "ms" else 1
            ranges = (f"{ts} IS NULL", f"{ts} < {FIRST_S * unit}", f"{ts} >= {END_S * unit}")
        if kinds is None:
            return SqlCondition(" OR ".join(ranges), [])
        sql = " OR ".join(f"({kinds.sql} AND {r})" for r in ranges)
        return SqlCondition(sql, kinds.params * len(ranges))

    def month_sql(self) -> str:
        return f"strftime('%Y-%m', {self.ts_seconds_sql()}, 'unixepoch')"

    def month_condition(self, month: str) -> SqlCondition | None:
        """SQL true for the rows whose time stamp falls in ``month``, and its
        parameters; None for a month Python cannot place (its rows are
        unparsable). For numbers: a range on the column itself, no date
        function per row."""
        bounds = _month_bounds(month)
        if bounds is None:
            return None
        if self.ts_format == "iso":
            return SqlCondition(f"{self.month_sql()} = ?", [month])
        unit = 1000 if self.ts_format == "ms" else 1
        ts = q(self.ts)
        return SqlCondition(f"{ts} >= ? AND {ts} < ?", [bounds[0] * unit, bounds[1] * unit])


def months_spanned(lo_s: float, hi_s: float, limit: int) -> list[str] | None:
    """Every UTC month from the one holding ``lo_s`` to the one holding ``hi_s``
    (seconds since the epoch); None when either cannot be placed or there are
    more than ``limit``."""
    try:
        first = datetime.fromtimestamp(lo_s // DAY_S * DAY_S, UTC)
        last = datetime.fromtimestamp(hi_s // DAY_S * DAY_S, UTC)
    except (ValueError, OverflowError, OSError):
        return None
    if (last.year - first.year) * 12 + last.month - first.month >= limit:
        return None
    out = []
    y, m = first.year, first.month
    while (y, m) <= (last.year, last.month):
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


@functools.lru_cache(maxsize=1024)
def _month_bounds(month: str) -> tuple[int, int] | None:
    """The first second of ``month`` and of the month after it."""
    try:
        y, m = int(month[:4]), int(month[5:7])
        start = datetime(y, m, 1, tzinfo=UTC)
        end = datetime(y + 1, 1, 1, tzinfo=UTC) if m == 12 else datetime(y, m + 1, 1, tzinfo=UTC)
    except (ValueError, OverflowError):
        return None
    return int(start.timestamp()), int(end.timestamp())


def month_end_ms(month: str) -> int:
    """The first millisecond after ``month`` (``YYYY-MM``, UTC)."""
    bounds = _month_bounds(month)
    assert bounds is not None, month
    return bounds[1] * 1000


def month_of_ms(ms: float) -> str | None:
    """The UTC month (``YYYY-MM``) holding ``ms`` since the epoch (None: no
    calendar month holds it)."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m")
    except (ValueError, OverflowError, OSError):
        return None


def next_month(month: str) -> str:
    """The month after ``month`` (``YYYY-MM``)."""
    y, m = int(month[:4]), int(month[5:7])
    return f"{y + 1:04d}-01" if m == 12 else f"{y:04d}-{m + 1:02d}"


def discover(conn: sqlite3.Connection, db: Path, cfg: EventsSettings) -> EventSchema:
    """Read and check the events table's definition on an open connection."""
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (cfg.table,)
    ).fetchone()
    if row is None:
        raise EventsError(
            f"{db}: no table {cfg.table!r} (set events.table to the application's events table)"
        )
    create_sql = str(row[0])
    info = conn.execute(f"PRAGMA table_info({q(cfg.table)})").fetchall()
    columns = tuple(str(r[1]) for r in info)
    pks = [r for r in info if r[5] > 0]
    if len(pks) != 1 or str(pks[0][2]).upper() != "INTEGER":
        raise EventsError(
            f"{db}: table {cfg.table!r} has no INTEGER PRIMARY KEY; coldkeep moves rows by id "
            "and needs one (this table cannot be archived as it is)"
        )
    for key, col in (("events.kind_column", cfg.kind_column), ("events.ts_column", cfg.ts_column)):
        if col not in columns:
            raise EventsError(
                f"{db}: table {cfg.table!r} has no column {col!r} (set {key}; "
                f"columns are {', '.join(columns)})"
            )
    return EventSchema(
        db=db,
        table=cfg.table,
        pk=str(pks[0][1]),
        columns=columns,
        kind=cfg.kind_column,
        ts=cfg.ts_column,
        ts_format=cfg.ts_format,
        create_sql=create_sql,
        ts_text_affinity=_text_affinity(next(str(r[2]) for r in info if r[1] == cfg.ts_column)),
    )


def _text_affinity(declared: str) -> bool:
    """Whether a column declared with this type has TEXT affinity (SQLite's
    rules, in their order)."""
    upper = declared.upper()
    return "INT" not in upper and any(t in upper for t in ("CHAR", "CLOB", "TEXT"))


# A trigger's timing and event in its CREATE TRIGGER: "AFTER DELETE", "UPDATE OF x ON".
_TRIGGER_EVENT = re.compile(
    r"\b(?:(BEFORE|AFTER|INSTEAD\s+OF)\s+)?(DELETE|INSERT|UPDATE)\b(?=(?:\s+OF\s[^;]*?)?\s+ON\s)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DeleteEffects:
    """What the application's schema attaches to deleting rows of its events
    table (the move) and inserting them (a restore): its triggers (``name
    (AFTER DELETE)``), the ones among them that a DELETE fires and that an
    INSERT fires, and the foreign keys referencing it from any table
    (``table.column (ON DELETE CASCADE)``)."""

    triggers: tuple[str, ...]
    on_delete: tuple[str, ...]
    foreign_keys: tuple[str, ...]
    on_insert: tuple[str, ...] = ()

    def restore_refusal(self, db: Path, table: str, cfg: EventsSettings) -> str | None:
        """The one line that refuses putting rows back, or None."""
        if not self.on_insert or cfg.triggers != "refuse":
            return None
        return (
            f"{db}: table {table!r} has {_listed('trigger', self.on_insert)} that an INSERT "
            "fires: putting archived rows back would run them (a second notification, a "
            'counter counted twice); refused (drop them, or set events.triggers = "fire" '
            "to let them run)"
        )

    def refusal(self, db: Path, table: str, cfg: EventsSettings) -> str | None:
        """The one line that refuses the event move, or None when the config
        says how to treat what there is."""
        what = []
        if self.on_delete and cfg.triggers == "refuse":
            what.append(f"{_listed('trigger', self.on_delete)} that its DELETE fires")
        if self.foreign_keys and cfg.foreign_keys == "refuse":
            what.append(f"{_listed('foreign key', self.foreign_keys)} referencing it")
        if not what:
            return None
        return (
            f"{db}: table {table!r} has {' and '.join(what)}: the event move deletes archived "
            "rows, and these would change or orphan rows coldkeep does not archive; the event "
            'phase is refused (drop them, or set events.triggers = "fire" to let the '
            'triggers run, events.foreign_keys = "fire" to let the keys\' ON DELETE '
            'actions run or "ignore" to leave the referencing rows as they are)'
        )


def _listed(what: str, items: tuple[str, ...]) -> str:
    return f"{what}{'s' if len(items) > 1 else ''} {', '.join(items)}"


def delete_effects(conn: sqlite3.Connection, table: str) -> DeleteEffects:
    """Read the triggers on ``table`` and the foreign keys that reference it."""
    triggers, on_delete, on_insert = [], [], []
    rows = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
        "AND lower(tbl_name) = lower(?) ORDER BY name",
        (table,),
    )
    for name, sql in rows:
        found = _TRIGGER_EVENT.search(str(sql or ""))
        if found is None:  # unreadable: counted as one a DELETE fires
            said = f"{name} (event unknown)"
        else:
            timing = " ".join((found.group(1) or "BEFORE").upper().split())
            said = f"{name} ({timing} {found.group(2).upper()})"
        triggers.append(said)
        if found is None or found.group(2).upper() == "DELETE":
            on_delete.append(said)
        if found is None or found.group(2).upper() == "INSERT":
            on_insert.append(said)
    keys = []
    # Virtual tables have no foreign keys, and asking one whose module this
    # SQLite lacks is an error.
    tables = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' "
        "AND coalesce(sql, '') NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"
    )
    for (child,) in tables.fetchall():
        for fk in conn.execute(f"PRAGMA foreign_key_list({q(str(child))})"):
            if str(fk[2]).lower() == table.lower():
                keys.append(f"{child}.{fk[3]} (ON DELETE {fk[6]})")
    return DeleteEffects(tuple(triggers), tuple(on_delete), tuple(keys), tuple(on_insert))


def check_delete_effects(
    conn: sqlite3.Connection, schema: EventSchema, cfg: EventsSettings
) -> None:
    """Refuse (``EventsError``) an events table whose triggers or referencing
    foreign keys would act on the move's DELETE, unless the config says how to
    treat them."""
    line = delete_effects(conn, schema.table).refusal(schema.db, schema.table, cfg)
    if line is not None:
        raise EventsError(line)


def open_live(
    db: Path, *, busy_timeout_s: float, readonly: bool = False, any_thread: bool = False
) -> sqlite3.Connection:
    """A connection to the application's database, autocommit, for this thread only
    unless ``any_thread`` (then its user makes sure it is used by one at a time)."""
    if not db.is_file():
        raise EventsError(f"{db}: the state database does not exist (check state_db)")
    uri = f"file:{db}?mode=ro" if readonly else f"file:{db}?mode=rw"
    try:
        conn = sqlite3.connect(
            uri,
            uri=True,
            timeout=busy_timeout_s,
            isolation_level=None,
            check_same_thread=not any_thread,
        )
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as err:
        if is_io_error(err):  # the disk, not the file: nothing to say about SQLite
            raise EventsError(f"{db}: could not be read ({err})") from err
        raise EventsError(f"{db}: cannot be opened as SQLite ({describe(err)})") from err
    return conn


# A month DB's own schema version (PRAGMA user_version): 1 is the table as the
# live one has it. A month DB from a newer coldkeep is refused, never written.
MONTH_SCHEMA = 1


def check_month_version(conn: sqlite3.Connection, db: Path, *, stamp: bool = False) -> None:
    """Refuse a month DB a newer coldkeep wrote (``sqlite3.DatabaseError`` naming
    it); with ``stamp``, mark an unversioned one (new, or from before versions)."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > MONTH_SCHEMA:
        raise sqlite3.DatabaseError(
            f"{db} has month schema version {version}, this coldkeep knows up to "
            f"{MONTH_SCHEMA}: upgrade coldkeep (the file is left untouched)"
        )
    if stamp and version < MONTH_SCHEMA:
        conn.execute(f"PRAGMA user_version = {MONTH_SCHEMA}")


@contextlib.contextmanager
def reading_month(db: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the month database ``db``, once its version is
    one this coldkeep reads (``sqlite3.DatabaseError`` naming it if not)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        check_month_version(conn, db)
        yield conn
    finally:
        conn.close()


def rollback(conn: sqlite3.Connection) -> None:
    """End the open transaction, if SQLite has not already: after SQLITE_FULL or
    SQLITE_IOERR it may have rolled back on its own, and a ROLLBACK then would
    raise over the error that matters."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def journal_mode(conn: sqlite3.Connection) -> str:
    return str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()


def table_kinds(conn: sqlite3.Connection, schema: EventSchema) -> list[str]:
    """Every kind that has a row in the events table, in order. With an index
    led by the kind column it costs one index seek per kind (a skip scan);
    without one, one scan of the table."""
    table, kind = q(schema.table), q(schema.kind)
    nxt = f"SELECT min({kind}) FROM {table} WHERE {kind} > ?"
    plan = " ".join(str(r[3]) for r in conn.execute(f"EXPLAIN QUERY PLAN {nxt}", ("",)))
    if "INDEX" in plan:
        sql = (
            f"WITH RECURSIVE k(v) AS (SELECT min({kind}) FROM {table} "
            f"UNION ALL SELECT (SELECT min({kind}) FROM {table} WHERE {kind} > v) "
            "FROM k WHERE v IS NOT NULL) SELECT v FROM k WHERE v IS NOT NULL"
        )
    else:
        sql = f"SELECT DISTINCT {kind} FROM {table} WHERE {kind} IS NOT NULL ORDER BY 1"
    return [str(v) for (v,) in conn.execute(sql)]


@dataclass(frozen=True)
class KindsSeen:
    """The kinds in the events table beside those the config archives (None:
    every kind), and what differs, for ``plan`` and ``doctor`` to say."""

    in_table: tuple[str, ...]
    archived: frozenset[str] | None

    @property
    def not_in_table(self) -> list[str]:
        """Kinds ``events.kinds`` names that have no row (typos, another app's)."""
        return sorted((self.archived or frozenset()) - set(self.in_table))

    @property
    def staying(self) -> list[str]:
        """Kinds of the table ``events.kinds`` leaves live."""
        if self.archived is None:
            return []
        return [k for k in self.in_table if k not in self.archived]

    @property
    def moving(self) -> list[str]:
        return [k for k in self.in_table if self.archived is None or k in self.archived]

    @property
    def differ(self) -> bool:
        return bool(self.not_in_table or self.staying)

    def to_dict(self) -> dict[str, Any]:
        archived = None if self.archived is None else sorted(self.archived)
        return {"in_table": list(self.in_table), "archived": archived}
