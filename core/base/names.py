"""Names are bytes: how a live file's name crosses every boundary that wants
text (SQLite, JSON, a terminal) and comes back the same bytes.

Python gives a name that is not valid UTF-8 (a Latin-1 ``résumé.log``) as a
``str`` whose undecodable bytes are lone surrogates (``os.fsdecode``'s
surrogateescape). SQLite and strict UTF-8 codecs refuse such a string. At the
manifest's boundary (``to_db``/``from_db``, applied to every parameter and every
column by the ``Manifest``'s connection) a string that is valid UTF-8 is stored
as TEXT, unchanged; any other is stored as a BLOB of its raw bytes, and every
BLOB read back is such a name again.

Invariants:
- ``from_db(to_db(s)) == s`` for every string a file system can give, and
  ``os.fsencode`` of it is the name's exact bytes.
- A valid UTF-8 string is never changed: manifests written before keep working.
- The manifest holds no other BLOB, so a BLOB is always a name.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from typing import Any


def is_text(name: str) -> bool:
    """Whether ``name`` is valid UTF-8 text (no undecodable bytes in it)."""
    if name.isascii():
        return True
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def to_db(value: Any) -> Any:
    """A parameter as SQLite can take it: a name that is not valid UTF-8 as the
    BLOB of its raw bytes, anything else unchanged."""
    if isinstance(value, str) and not is_text(value):
        return os.fsencode(value)
    return value


def from_db(value: Any) -> Any:
    """A column's value back: a BLOB is a name's raw bytes."""
    if isinstance(value, bytes):
        return os.fsdecode(value)
    return value


def db_params(params: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(to_db(v) for v in params)


def db_row(_cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A connection's ``row_factory``: every BLOB in a row made a name again (a
    row without one, nearly every row, is checked at C speed and kept)."""
    if bytes not in map(type, row):
        return row
    return tuple(from_db(v) for v in row)
