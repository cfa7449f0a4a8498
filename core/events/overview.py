"""The shape of the event rows a query's range holds, for the console's Events
screen: rows per UTC day, per kind and per month from one scan, and the rows
themselves a page at a time, in id order (as the application wrote them).

Both run on an open ``EventsQuery`` (its view, its engine's thread): SQL built
here from the table's own column names, never from the operator's text but for
the kinds, which are passed as values.

Invariants:
- A page is found by the last id of the one before (keyset), never by an
  offset: it holds at most ``limit`` rows however many the range has, and a
  row is never on two pages.
- A row whose time stamp cannot be read (an ISO text that does not parse) is
  counted under no day but still under its kind and the total.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base.times import DAY_MS, DAY_S, day_name
from .eventschema import EventSchema, q
from .query import EventsQuery, iso_seconds
from .queryterms import FROM, SOURCED


@dataclass(frozen=True)
class Overview:
    """Counts of the rows in range: ``days`` every UTC day from the first row's
    to the last's (days without rows as 0), ``kinds`` most rows first,
    ``months`` in order; ``archived``: of those, the rows the archive holds
    (a restore's to put back), per month."""

    total: int = 0
    days: list[tuple[str, int]] = field(default_factory=list)
    kinds: list[tuple[str, int]] = field(default_factory=list)
    months: list[tuple[str, int]] = field(default_factory=list)
    archived: list[tuple[str, int]] = field(default_factory=list)

    @property
    def archived_rows(self) -> int:
        return sum(n for _, n in self.archived)


def _day_number(schema: EventSchema) -> str:
    """DuckDB SQL: the row's UTC day as days since 1970-01-01, NULL if unknown."""
    ts = q(schema.ts)
    if schema.ts_format == "ms":
        return f"CAST(floor({ts} / {DAY_MS}) AS BIGINT)"
    if schema.ts_format == "s":
        return f"CAST(floor({ts} / {DAY_S}) AS BIGINT)"
    return f"CAST(floor({iso_seconds(schema)} / {DAY_S}) AS BIGINT)"


def _kind_filter(schema: EventSchema, kinds: Sequence[str]) -> tuple[str, list[Any]]:
    if not kinds:
        return "", []
    return f"{q(schema.kind)} IN ({', '.join('?' * len(kinds))})", list(kinds)


def overview(engine: EventsQuery, kinds: Sequence[str] = ()) -> Overview:
    """One scan of the range (of ``kinds``; empty: all): blocking, a thread's."""
    schema = engine.schema
    where, params = _kind_filter(schema, kinds)
    _, rows = engine.fetch(
        f"SELECT {_day_number(schema)} AS day, CAST({q(schema.kind)} AS VARCHAR), {FROM}, "
        f"count(*) FROM {SOURCED} {'WHERE ' + where if where else ''} GROUP BY ALL",
        params,
    )
    per_day: Counter[int] = Counter()
    archived: Counter[int] = Counter()
    per_kind: Counter[str] = Counter()
    for day, kind, source, n in rows:
        if day is not None:
            per_day[int(day)] += n
            if source == "archive":
                archived[int(day)] += n
        per_kind[str(kind)] += n
    return Overview(
        total=sum(per_kind.values()),
        days=_every_day(per_day),
        kinds=per_kind.most_common(),
        months=_per_month(per_day),
        archived=_per_month(archived),
    )


def _every_day(per_day: Counter[int]) -> list[tuple[str, int]]:
    if not per_day:
        return []
    return [(day_name(d), per_day[d]) for d in range(min(per_day), max(per_day) + 1)]


def _per_month(per_day: Counter[int]) -> list[tuple[str, int]]:
    months: Counter[str] = Counter()
    for day, n in per_day.items():
        months[day_name(day)[:7]] += n
    return sorted(months.items())


@dataclass(frozen=True)
class Page:
    """Rows in id order: ``columns``, ``rows``, and the id the next page starts
    after (None after the last)."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    after: Any | None


def page(
    engine: EventsQuery, kinds: Sequence[str] = (), after: Any = None, limit: int = 500
) -> Page:
    """The ``limit`` rows whose id follows ``after`` (None: from the first), in
    id order, the order the application wrote them: blocking, a thread's. The
    SQL reads alike in both engines; in SQLite's each month gives its rows by
    its primary key from ``after`` on, so a page costs the same at the first
    row and the ten millionth."""
    schema = engine.schema
    pk = q(schema.pk)
    where, params = _kind_filter(schema, kinds)
    conds = [where] if where else []
    if after is not None:
        conds.append(f"{pk} > ?")
        params.append(after)
    sql = (
        f"SELECT * FROM events {'WHERE ' + ' AND '.join(conds) if conds else ''} "
        f"ORDER BY {pk} LIMIT {int(limit)}"
    )
    columns, rows = engine.fetch(sql, params)
    if len(rows) < limit:
        return Page(columns, rows, None)
    return Page(columns, rows, rows[-1][columns.index(schema.pk)])
