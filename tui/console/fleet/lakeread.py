"""The fleet Events screen's reads (events.py): the fleet's lake opened for
the sites and months chosen (core/remote/lakequery.py), what its charts show
counted in one scan, and the SQL box's first rows.

Invariants:
- Every use of the lake's connection (open, count, SQL, close) is made in a
  thread and holds one lock, so two never overlap: a worker the screen replaced
  may still be in its thread, and finishes before the next read starts. A lake
  opened is kept at once, so the next choice (or ``close``) closes it: one a
  replaced worker opened is never left open.
- ``close`` interrupts a query in progress and closes the connection once it
  has stopped; nothing is opened after it.
- Blocking: every method but ``close`` is called from a worker's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import UsageError
from coldkeep.core.events.query import TimeRange
from coldkeep.core.events.queryterms import QueryError
from coldkeep.core.remote.lakequery import Lake, LakeQuery, open_query

# The SQL box's rows shown: the first this many.
LIMIT = 500
KIND = "kind"


@dataclass(frozen=True)
class Choice:
    """What the screen reads: the months of ``span`` of ``sites`` (None: every site)."""

    sites: tuple[str, ...] | None
    span: TimeRange


@dataclass(frozen=True)
class Counts:
    """The lake chosen, and its rows per month, per site and per kind (None:
    the lake has no ``kind`` column), the largest first for sites and kinds."""

    lake: Lake
    months: list[tuple[str, int]]
    sites: list[tuple[str, int]]
    kinds: list[tuple[str, int]] | None

    @property
    def total(self) -> int:
        return sum(n for _, n in self.months)


@dataclass(frozen=True)
class Answer:
    """The SQL box's first ``LIMIT`` rows; ``capped``: the query has more."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    capped: bool


def _largest(counts: Counter[str]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda c: (-c[1], c[0]))


class LakeReader:
    def __init__(self, remote: RemoteSettings) -> None:
        self.remote = remote
        self.query: LakeQuery | None = None
        self.choice: Choice | None = None  # what ``query`` was opened for
        self.closed = False
        self._lock = threading.Lock()

    def _opened(self, choice: Choice) -> LakeQuery:
        """The lake for ``choice``: the one open, or opened now (the last one closed)."""
        if self.closed:
            raise QueryError("the Events screen is closed")
        if self.query is not None and self.choice == choice:
            return self.query
        self._close()
        try:
            self.query = asyncio.run(open_query(self.remote, choice.sites, choice.span))
        except UsageError as err:  # a site chosen that the lake does not hold
            raise QueryError(str(err).removeprefix("--sites ")) from None
        self.choice = choice
        return self.query

    def counts(self, choice: Choice) -> Counts:
        """``choice``'s rows per month, site and kind."""
        with self._lock:
            query = self._opened(choice)
            kind = KIND in query.run("SELECT * FROM events LIMIT 0").columns
            by = "site, month, " + (f'CAST("{KIND}" AS VARCHAR)' if kind else "NULL")
            rows = query.run(f"SELECT {by}, count(*) FROM events GROUP BY ALL")
            months, sites, kinds = Counter[str](), Counter[str](), Counter[str]()
            for batch in rows.batches():
                for site, month, k, n in batch:
                    months[month] += n
                    sites[site] += n
                    kinds["(none)" if k is None else k] += n
            by_kind = _largest(kinds) if kind else None
            return Counts(query.lake, sorted(months.items()), _largest(sites), by_kind)

    def answer(self, choice: Choice, sql: str) -> Answer:
        """The first ``LIMIT`` rows of ``sql`` over ``choice``'s lake."""
        with self._lock:
            rows = self._opened(choice).run(sql)
            got = next(rows.batches(LIMIT + 1), [])
            return Answer(rows.columns, got[:LIMIT], len(got) > LIMIT)

    def close(self) -> None:
        """Stop a query in progress, then close the lake (in a thread, once
        the query has stopped)."""
        self.closed = True
        query = self.query
        con = query.con if query is not None else None
        if con is not None:
            con.interrupt()
        threading.Thread(target=self._closing, daemon=True).start()

    def _closing(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self.query is not None:
            self.query.close()
        self.query = self.choice = None
