"""The manifest read as a tree of paths, for the mount (ops/mounttree.py): what
lies right under a folder (runs of its files' versions, each subfolder once),
and every version at a path, on a read-only connection from
``manifest.connect_readonly``, tombstones left out.

Invariant: a folder's listing costs index seeks, never a scan of what lies
under its subfolders; names that are not UTF-8 (BLOBs, which SQLite sorts after
every TEXT) are listed in a range of their own. The bounds of a prefix's range
(``text_after``, ``bytes_after``) serve the manifest's path queries too.
"""

from __future__ import annotations

import operator
import os
import sqlite3
from collections.abc import Iterator

from ..base.names import is_text, to_db

# A version as the mount lists it: (id, its relpath past the folder's, bytes,
# mtime_ns, mode, archived_at).
Listed = tuple[int, str, int, int, int, int]
_LISTED = "SELECT id, substr(relpath, ?), bytes, mtime_ns, mode, archived_at FROM entries"


def _ranges(prefix: str) -> Iterator[tuple[str | bytes, str | bytes | None, bool]]:
    """The relpath index's ranges (low, high or None for no end, TEXT or not)
    of the names starting with ``prefix``: the TEXT ones, then the BLOB ones
    (names that are not UTF-8: names.py), which SQLite sorts after every TEXT,
    so a TEXT range alone never meets them."""
    if is_text(prefix):
        above = text_after(prefix)
        yield prefix, above if above is not None else b"", True
    low = os.fsencode(prefix)
    yield low, bytes_after(low), False


def _from(
    db: sqlite3.Connection, skip: int, low: str | bytes, high: str | bytes | None, text: bool
) -> sqlite3.Cursor:
    """The rows from ``low`` to ``high``, each relpath without its first ``skip``
    characters (bytes, for a BLOB). In a TEXT range no name needs making again:
    its rows skip the row factory (a mount lists a million)."""
    sql = f"{_LISTED} WHERE relpath >= ? AND status != 'expired'"
    if high is None:
        cur = db.execute(sql + " ORDER BY relpath", [skip + 1, low])
    else:
        cur = db.execute(sql + " AND relpath < ? ORDER BY relpath", [skip + 1, low, high])
    if text:
        cur.row_factory = None
    return cur


listed_name = operator.itemgetter(1)  # a Listed row's name


LIST_RUN = 256  # rows a read after the first: a folder's files in one, no more past a subfolder


def listing(db: sqlite3.Connection, prefix: str) -> Iterator[list[Listed] | str]:
    """What lies right under the folder ``prefix`` ("" for the top, else ending
    in "/"), on a connection from ``connect_readonly``, in name order: runs of
    its files' versions (lists of rows; a file's versions in a row, by id) and
    each subfolder once, as its name. Tombstones left out. A subfolder costs
    one index seek, whatever lies under it: the scan jumps past it (every name
    under ``d/`` sorts below ``d0``, "0" being the character after "/"). Rows
    come as SQLite hands them, a run at a time: a mount lists a million."""
    for start, high, text in _ranges(prefix):
        skip = len(prefix) if text else len(os.fsencode(prefix))
        low: str | bytes | None = start
        while low is not None:
            cur = _from(db, skip, low, high, text)
            low, size = None, 1  # the first row alone: after a jump, often the next subfolder
            while rows := cur.fetchmany(size):
                size = LIST_RUN
                names = list(map(listed_name, rows))
                if "/" not in "\0".join(names):  # no name holds NUL: a run of files alone
                    yield rows
                    continue
                cut = next(i for i, rest in enumerate(names) if "/" in rest)
                if cut:
                    yield rows[:cut]
                name = names[cut].partition("/")[0]
                yield name
                below = prefix + name
                low = below + "0" if text else os.fsencode(below) + b"0"
                break
            cur.close()


def versions_at(db: sqlite3.Connection, relpath: str) -> tuple[list[Listed], bool]:
    """Every version of the file at ``relpath`` (tombstones left out), by id,
    and whether any name lies under ``relpath/`` (a folder there too)."""
    rows = db.execute(
        f"{_LISTED} WHERE relpath = ? AND status != 'expired' ORDER BY id", [1, to_db(relpath)]
    ).fetchall()
    folder = False
    under = relpath + "/"
    for low, high, text in _ranges(under):
        cur = _from(db, len(under) if text else len(os.fsencode(under)), low, high, text)
        folder = cur.fetchone() is not None
        cur.close()
        if folder:
            break
    return rows, folder


def text_after(prefix: str) -> str | None:
    """The least text above every text starting with ``prefix`` (None: no text
    is: the range runs to the end of the TEXT names). UTF-8 sorts as its code
    points do, so the prefix's last character made the next one bounds it."""
    while prefix:
        code = ord(prefix[-1]) + 1
        if 0xD800 <= code <= 0xDFFF:  # no UTF-8 text holds a surrogate
            code = 0xE000
        if code <= 0x10FFFF:
            return prefix[:-1] + chr(code)
        prefix = prefix[:-1]
    return None


def bytes_after(prefix: bytes) -> bytes | None:
    """The least bytes above every BLOB starting with ``prefix`` (None: none is)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])
