"""The manifest in memory, for filtering as an operator types (the restore browser).

Loaded once, read-only, in a worker thread: one list per column, plus indexes by
unit, by status and by the first two hex digits of the sha256, and every path in
one string that ``str.find`` searches at C speed. A filter starts from the most
selective of them and narrows; a word that matches more than ``cap`` rows stops
counting there (the operator narrows the filter). bench/console.py measures it.

Query language, words separated by spaces (all must hold):

    unit:NAME        exactly this unit
    sha:PREFIX       sha256 starts with PREFIX
    status:STATUS    archived | stale | restored | missing
    after:DATE       the file's mtime at or after DATE (YYYY-MM-DD, local time)
    before:DATE      … before DATE
    anything else    a substring of the relative path
"""

from __future__ import annotations

import bisect
import itertools
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import get_args

from ..base.errors import UsageError
from ..base.times import now_ms
from ..store.legalholds import ActiveHolds, compiled, read_active
from ..store.manifest import EntryStatus, read_entries, reading
from ..store.remoteobjects import read_copies


class QueryError(UsageError, ValueError):
    """A filter word that cannot be understood; the message says which."""


@dataclass(frozen=True)
class Query:
    text: tuple[str, ...] = ()
    unit: str | None = None
    sha: str | None = None
    status: str | None = None
    after_ns: int | None = None
    before_ns: int | None = None


STATUSES: tuple[str, ...] = get_args(EntryStatus)


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
        if sep and key == "status" and value and value not in STATUSES:
            # Refused, naming the ones there are, rather than silently matching none.
            raise QueryError(f"{word}: use one of {', '.join(STATUSES)}")
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
    member_offset: int | None = None
    copies: str = "local"  # local | remote | local + remote | none (expired)
    held: str | None = None  # the legal hold that covers it, described

    @property
    def location(self) -> str:
        """Where its gzip is: its own file, or a member of a bundle; and which
        copies there are (here, on the remote tier, or both)."""
        where = self.gz_path
        if self.member_offset is not None:
            where += f" (member at byte {self.member_offset})"
        return f"{where} · {self.copies}"

    def extract_command(self, archive_root: Path) -> str:
        """A shell line that gives the file's bytes back with the system's tools."""
        path = shlex.quote(str(archive_root / self.gz_path))
        if self.member_offset is None:
            return f"gunzip -c {path}"
        return f"tar -xOf {path} {shlex.quote(self.relpath + '.gz')} | gunzip -c"


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
    offsets: list[int | None] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)
    held: dict[int, str] = field(default_factory=dict)  # row -> its hold, described

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
            self.offsets[i],
            self.copies[i],
            self.held.get(i),
        )

    def index(self) -> None:
        """Build the lookup structures (once, after loading; in the loading thread)."""
        self.by_unit: dict[str, list[int]] = {}
        self.by_status: dict[str, list[int]] = {}
        # Rows by the first two hex digits of their sha256: a prefix search looks
        # at 1/256 of the rows (a scan of every sha took ~100 ms on a million).
        self.by_sha2: dict[str, list[int]] = {}
        for i, (unit, status, sha) in enumerate(
            zip(self.units, self.statuses, self.shas, strict=True)
        ):
            self.by_unit.setdefault(unit, []).append(i)
            self.by_status.setdefault(status, []).append(i)
            self.by_sha2.setdefault(sha[:2], []).append(i)
        # Every path in one string, NUL between (the one character no name has; a
        # newline may be in one): a word is found by the C-level str.find over it,
        # and its row by bisecting the starts.
        self.blob = "\0".join(self.relpaths)
        self.starts = list(itertools.accumulate((len(p) + 1 for p in self.relpaths), initial=0))

    def mark_held(self, holds: ActiveHolds) -> None:
        """Each row a hold covers, with the first such hold (one pass over the
        paths per glob hold; units and ids by their index)."""
        for hold in reversed(holds.holds):  # the oldest hold wins: it is set last
            if hold.scope == "unit":
                rows: Iterable[int] = self.by_unit.get(hold.target, [])
            elif hold.scope == "entry":
                at = bisect.bisect_left(self.ids, int(hold.target))
                rows = [at] if at < len(self.ids) and self.ids[at] == int(hold.target) else []
            else:
                match = compiled(hold.target).fullmatch
                rows = [i for i, path in enumerate(self.relpaths) if match(path)]
            described = hold.describe()
            for i in rows:
                self.held[i] = described

    def _sha_rows(self, prefix: str) -> list[int]:
        """Rows whose sha256 starts with ``prefix``, in order."""
        if len(prefix) < 2:
            buckets = [rows for two, rows in self.by_sha2.items() if two.startswith(prefix)]
            return sorted(itertools.chain.from_iterable(buckets))
        rows = self.by_sha2.get(prefix[:2], [])
        if len(prefix) == 2:
            return list(rows)
        shas = self.shas
        return [i for i in rows if shas[i].startswith(prefix)]

    def _rows_with(self, word: str, cap: int) -> tuple[list[int], bool]:
        """Rows whose path contains ``word``, in order; stops after ``cap`` rows
        (True: there were more)."""
        rows: list[int] = []
        blob, starts = self.blob, self.starts
        at = blob.find(word)
        while at >= 0:
            row = bisect.bisect_right(starts, at) - 1
            if not rows or rows[-1] != row:
                if len(rows) == cap:
                    return rows, True
                rows.append(row)
            at = blob.find(word, starts[row + 1] if row + 1 < len(starts) else len(blob))
        return rows, False

    def filter(
        self, query: Query, limit: int = 500, cap: int = 50_000
    ) -> tuple[int, list[int], bool]:
        """(how many entries match, the indices of the first ``limit``, whether the
        count stopped at ``cap`` because more match: narrow the filter)."""
        hits: list[int] | None = None  # None: every row, still
        capped = False
        if query.unit is not None:
            hits = self.by_unit.get(query.unit, [])
        if query.status is not None:
            statuses, status = self.statuses, query.status
            if hits is None:
                hits = self.by_status.get(status, [])
            else:
                hits = [i for i in hits if statuses[i] == status]
        if query.sha is not None:
            sha, shas = query.sha, self.shas
            if hits is None:
                hits = self._sha_rows(sha)
            else:
                hits = [i for i in hits if shas[i].startswith(sha)]
        words = list(query.text)
        if hits is None and words:
            hits, capped = self._rows_with(words.pop(0), cap)
        if hits is None:
            hits = list(range(len(self.ids)))
        paths = self.relpaths
        for word in words:
            hits = [i for i in hits if word in paths[i]]
        mtimes = self.mtimes
        if query.after_ns is not None:
            after = query.after_ns
            hits = [i for i in hits if mtimes[i] >= after]
        if query.before_ns is not None:
            before = query.before_ns
            hits = [i for i in hits if mtimes[i] < before]
        return len(hits), hits[:limit], capped


_COLUMNS = (
    "id", "relpath", "unit", "sha256", "status", "bytes", "mtime_ns", "archived_at", "gz_path",
    "member_offset",
)  # fmt: skip


def load_catalog(manifest: Path) -> Catalog:
    """Every entry, newest path versions included, in id order (read-only)."""
    cat = Catalog()
    if not manifest.exists():
        return cat
    with reading(manifest) as db:
        for rows in read_entries(db, _COLUMNS):
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
            cat.offsets += cols[9]
        remote = {
            p: "local + remote" if local else "remote" for p, local in read_copies(db).items()
        }
        cat.copies = [
            "none" if st == "expired" else remote.get(p, "local")
            for p, st in zip(cat.gz_paths, cat.statuses, strict=True)
        ]
        holds = read_active(db, now_ms())
    cat.index()
    cat.mark_held(holds)
    return cat
