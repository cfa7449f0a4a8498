"""What the restore browser and the fleet view share: the filter field, the search
of one or several in-memory catalogs with the catalog's query language, and the
look of a restore's per-file results. One copy, so that the two views filter
and report the same way."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.worker import get_current_worker

from coldkeep.core.files.catalog import Catalog, CatalogRow, parse_query, path_order

from ..widgets.fields import Field

# Rows a view shows at most: the count says how many more match.
SHOWN = 500
FILTER_HINT = "filter: text in the path, unit:NAME sha:PREFIX status:stale after:2026-01-01"


class FilterInput(Field):
    """The filter, focused when the view opens so that typing filters: an Input
    keeps printable keys (the screen's r, y, space act only from the table).
    Down leads to the table (the screen's ``focus_table``), as Enter and Tab do."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "screen.focus_table", "Results", show=False),
    ]


class Listing:
    """Which filter text a table's rows answer, and the one key waiting for
    them: a key typed faster than a filter answers (r just after the filter's
    text) acts on the rows of that text, never on the rows they replace."""

    def __init__(self) -> None:
        self.answers: str | None = None  # the text the rows answer (None: none yet)
        self._waiting: Callable[[], None] | None = None

    def ready(self, text: str, act: Callable[[], None]) -> bool:
        """Whether the rows answer ``text``; if not, ``act`` runs once they do
        (the last key typed meanwhile)."""
        if self.answers == text:
            return True
        self._waiting = act
        return False

    def listed(self, text: str) -> None:
        """The rows answer ``text`` now: a key that waited for them acts."""
        self.answers = text
        if self._waiting is not None:
            act, self._waiting = self._waiting, None
            act()


def search(
    catalogs: Mapping[str, Catalog],
    text: str,
    limit: int = SHOWN,
    stop: Callable[[], bool] | None = None,
) -> tuple[int, list[tuple[str, CatalogRow]], bool]:
    """``text`` (the query language of core/files/catalog.py) over every catalog:
    how many entries match in all, the first ``limit`` of them all in path
    order (then by key and id; each with its catalog's key), and whether a
    count stopped at the catalog's cap. Once ``limit`` are found, a catalog
    lists only the paths that come before the last of them: a thousand sites'
    first pages are not built to be thrown away. Raises QueryError for a word
    it cannot understand, and Stopped when ``stop`` says so part way
    (``worker_cancelled``)."""
    query = parse_query(text)
    total, capped = 0, False
    found: list[tuple[Listed, str, CatalogRow]] = []
    upto: str | None = None  # the last path of the first ``limit`` found so far
    for key, catalog in catalogs.items():
        count, hits, cut = catalog.filter(query, limit, stop=stop, upto=upto)
        total += count
        capped = capped or cut
        found += [((path_order(row.relpath), key, row.id), key, row) for row in hits]
        if len(found) >= 2 * limit:  # cut back now and then, not at every catalog
            found = heapq.nsmallest(limit, found, key=lambda hit: hit[0])
            upto = found[-1][2].relpath
    first = heapq.nsmallest(limit, found, key=lambda hit: hit[0])
    return total, [(key, row) for _, key, row in first], capped


# A listed row's place: its path (as SQL orders them), its catalog's key, its id.
Listed = tuple[tuple[bool, str | bytes], str, int]


def worker_cancelled() -> Callable[[], bool]:
    """The calling thread worker's cancellation, as a filter's ``stop``: a newer
    filter replaces the worker, so typing never leaves a scan of every path (a
    second at 10,000,000 entries) running behind the one that counts."""
    worker = get_current_worker()
    return lambda: worker.is_cancelled


def result_cell(result: str) -> Text:
    """A restore's per-file outcome, coloured: done, left alone, or a problem."""
    style = "green" if result == "restored" else "yellow" if result == "exists" else "bold red"
    return Text(result, style=style)
