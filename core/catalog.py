"""The manifest in memory, for filtering as an operator types (the restore browser).

Loaded once, read-only, in a worker thread: one list per column, so a filter is a
single pass of C-level comparisons over plain lists (a million entries filter in
tens of milliseconds; bench/console.py measures it).

Query language, words separated by spaces (all must hold):

    unit:NAME        exactly this unit
    sha:PREFIX       sha256 starts with PREFIX
    status:STATUS    archived | stale | restored | missing
    after:DATE       the file's mtime at or after DATE (YYYY-MM-DD, local time)
    before:DATE      … before DATE
    anything else    a substring of the relative path
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


class QueryError(ValueError):
    """A filter word that cannot be understood; the message says which."""


@dataclass(frozen=True)
class Query:
    text: tuple[str, ...] = ()
    unit: str | None = None
    sha: str | None = None
    status: str | None = None
    after_ns: int | None = None
    before_ns: int | None = None


def _date_ns(word: str, value: str) -> int:
    try:
        return int(datetime.fromisoformat(value).timestamp() * 1e9)
    except ValueError:
        raise QueryError(f"{word}: use YYYY-MM-DD") from None


def parse_query(text: str) -> Query:
    words: list[str] = []
    fields: dict[str, object] = {}
    for word in text.split():
        key, sep, value = word.partition(":")
        if sep and key in ("unit", "sha", "status") and value:
            fields[key] = value.lower() if key == "sha" else value
        elif sep and key in ("after", "before") and value:
            fields[f"{key}_ns"] = _date_ns(word, value)
        else:
            words.append(word)
    return Query(tuple(words), **fields)  # type: ignore[arg-type]


@dataclass(frozen=True)
class CatalogRow:
    id: int
    relpath: str
    unit: str
    sha256: str
    status: str
    bytes: int
    mtime_ns: int
    archived_at: int
    gz_path: str


@dataclass
class Catalog:
    ids: list[int] = field(default_factory=list)
    relpaths: list[str] = field(default_factory=list)
    units: list[str] = field(default_factory=list)
    shas: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    mtimes: list[int] = field(default_factory=list)
    archived: list[int] = field(default_factory=list)
    gz_paths: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def row(self, i: int) -> CatalogRow:
        return CatalogRow(
            self.ids[i],
            self.relpaths[i],
            self.units[i],
            self.shas[i],
            self.statuses[i],
            self.sizes[i],
            self.mtimes[i],
            self.archived[i],
            self.gz_paths[i],
        )

    def filter(self, query: Query, limit: int = 500) -> tuple[int, list[int]]:
        """(how many entries match, the indices of the first ``limit``)."""
        hits: list[int] = list(range(len(self.ids)))
        # The cheapest, most selective tests first; each pass narrows the next.
        if query.unit is not None:
            unit, units = query.unit, self.units
            hits = [i for i in hits if units[i] == unit]
        if query.status is not None:
            status, statuses = query.status, self.statuses
            hits = [i for i in hits if statuses[i] == status]
        if query.sha is not None:
            sha, shas = query.sha, self.shas
            hits = [i for i in hits if shas[i].startswith(sha)]
        for word in query.text:
            paths = self.relpaths
            if len(hits) == len(paths):
                hits = [i for i, p in enumerate(paths) if word in p]
            else:
                hits = [i for i in hits if word in paths[i]]
        if query.after_ns is not None:
            after, mtimes = query.after_ns, self.mtimes
            hits = [i for i in hits if mtimes[i] >= after]
        if query.before_ns is not None:
            before, mtimes = query.before_ns, self.mtimes
            hits = [i for i in hits if mtimes[i] < before]
        return len(hits), hits[:limit]


def load_catalog(manifest: Path) -> Catalog:
    """Every entry, newest path versions included, in id order (read-only)."""
    cat = Catalog()
    if not manifest.exists():
        return cat
    db = sqlite3.connect(f"file:{manifest}?mode=ro", uri=True)
    try:
        cur = db.execute(
            "SELECT id, relpath, unit, sha256, status, bytes, mtime_ns, archived_at, gz_path "
            "FROM entries ORDER BY id"
        )
        while rows := cur.fetchmany(50_000):
            cols = list(zip(*rows, strict=True))
            cat.ids += cols[0]
            cat.relpaths += cols[1]
            cat.units += cols[2]
            cat.shas += cols[3]
            cat.statuses += cols[4]
            cat.sizes += cols[5]
            cat.mtimes += cols[6]
            cat.archived += cols[7]
            cat.gz_paths += cols[8]
    finally:
        db.close()
    return cat
