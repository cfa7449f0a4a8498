"""The columns of the fleet's lake: each events column's Parquet type, from
the type SQLite declared, and the column that keeps what no typed column can.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from ..base.errors import ColdkeepError
from .eventschema import q


class ExportFailed(ColdkeepError):
    """A month could not be written as Parquet; the message says why."""


# NULL, or a JSON object: column -> [SQLite type, the value as text] for each
# value of the row its column's type cannot carry exactly (lakeexport.py).
RAW = "coldkeep_raw"
# The keys of the lake's partitions: every reader adds them as columns from a
# file's path, over any column of the file of the same name.
PARTITIONS = ("site", "month")


def lake_names(names: Sequence[str]) -> list[str]:
    """The lake's names of the events columns ``names``: their own, but for a
    name the lake takes (the partitions' ``site`` and ``month``, and
    ``coldkeep_raw``: any case), which is kept as ``app_<name>`` rather than
    hidden behind the lake's column (``app_`` again while that is a column's
    name too)."""
    taken = {n.lower() for n in names}
    out = []
    for name in names:
        if name.lower() not in (*PARTITIONS, RAW):
            out.append(name)
            continue
        new = f"app_{name}"
        while new.lower() in taken:
            new = f"app_{new}"
        taken.add(new.lower())
        out.append(new)
    return out


# The lake's type of each SQLite affinity but NUMERIC's, and back: how the
# normalised copy (lakeexport.py) declares a column of that lake type.
_OF_AFFINITY = {"INTEGER": "BIGINT", "TEXT": "VARCHAR", "BLOB": "BLOB", "REAL": "DOUBLE"}
DECLARED = {lake: aff for aff, lake in _OF_AFFINITY.items()}


def affinity(declared: str) -> str:
    """SQLite's affinity of a column declared as ``declared``, by its rules:
    INTEGER, TEXT, BLOB, REAL or NUMERIC."""
    t = declared.upper()
    if "INT" in t:
        return "INTEGER"
    if any(s in t for s in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if t == "" or "BLOB" in t:
        return "BLOB"
    if any(s in t for s in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def column_type(declared: str) -> str:
    """The lake's type (DuckDB's name; Parquet's physical type follows) of a
    column SQLite declared as ``declared``: what the column holds when the
    application stored what it declared."""
    aff = affinity(declared)
    if aff in _OF_AFFINITY:
        return _OF_AFFINITY[aff]
    # NUMERIC affinity: a date or time is stored as the text it was given
    # (ISO-8601), a boolean as 0 or 1, anything else as a number.
    t = declared.upper()
    if "DATE" in t or "TIME" in t:
        return "VARCHAR"
    if "BOOL" in t:
        return "BIGINT"
    return "DOUBLE"


@dataclass(frozen=True)
class Column:
    """An events column: its name, the type SQLite declared, its lake name."""

    name: str
    declared: str
    lake_name: str  # its name in the lake (lake_names)

    @property
    def lake(self) -> str:
        return column_type(self.declared)


def columns_of(db: sqlite3.Connection, table: str) -> list[Column]:
    """The events table's columns as SQLite declared them, and their lake names."""
    info = [(str(r[1]), str(r[2] or "")) for r in db.execute(f"PRAGMA table_info({q(table)})")]
    names = lake_names([n for n, _ in info])
    return [Column(n, d, lake) for (n, d), lake in zip(info, names, strict=True)]
