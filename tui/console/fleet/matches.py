"""The fleet view's table of matches: every site's catalog searched at once by
the filter (the restore browser's query language, and ``site:NAME`` to choose
sites), each match a row keyed by its site and entry id, and the highlighted
one's first line of the preview.

A site named in the filter that does not exist is refused, naming the ones there
are, rather than silently matching nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from rich.text import Text

from coldkeep.core.files.catalog import Catalog, CatalogRow, QueryError, Stopped

from ...text.fmt import clock_time, human, shown
from ..screens.browse import SHOWN, search
from ..widgets.tables import Cell, name_cell
from .messages import Searched

COLUMNS = [
    ("✓", "sel"),
    ("Site", "site"),
    ("Path", "path"),
    ("Size", "size"),
    # Two versions of one path differ here (archived, stale…).
    ("Status", "status"),
    ("Modified", "modified"),
    ("Location", "location"),
]


def row_key(site: str, entry_id: int) -> str:
    return f"{site}:{entry_id}"


def split_sites(text: str, known: Iterable[str]) -> tuple[set[str] | None, str]:
    """The ``site:NAME`` words of a filter (None: every site), and the rest of
    it for the catalog's own query language. An unknown site is refused, naming
    the ones there are, rather than silently matching nothing."""
    names = set(known)
    sites: set[str] = set()
    rest = []
    for word in text.split():
        key, sep, value = word.partition(":")
        if sep and key == "site" and value:
            if value not in names:
                raise QueryError(f"{word}: no such site; the sites are {', '.join(sorted(names))}")
            sites.add(value)
        else:
            rest.append(word)
    return (sites or None), " ".join(rest)


def matching(
    catalogs: Mapping[str, Catalog], text: str, stop: Callable[[], bool], limit: int = SHOWN
) -> Searched | None:
    """The filter ``text`` over the sites it names (every one if none): how
    many match, the first ``limit`` of them all in path order (once for the
    whole table, not per site: a thousand sites' 500 each would be half a
    million rows), or why it cannot be read; None when ``stop`` said so part
    way. Blocking: run it in a thread."""
    try:
        only, rest = split_sites(text, catalogs)
        chosen = {s: c for s, c in catalogs.items() if only is None or s in only}
        total, hits, capped = search(chosen, rest, limit, stop=stop)
    except Stopped:
        return None
    except QueryError as err:
        return Searched(text, 0, [], str(err))
    return Searched(text, total, hits, capped=capped)


def cells(selected: bool, site: str, row: CatalogRow) -> tuple[Cell, ...]:
    """A match's row in the table."""
    where: Cell = name_cell(row.gz_path)
    if row.member_offset is not None:
        where = name_cell(f"{row.gz_path} (member at byte {row.member_offset})")
    if row.copies == "local":
        # The snapshot says its ship never sent it: a restore reports it missing.
        where = Text(f"{shown(row.gz_path)} · NOT SHIPPED", style="yellow")
    return (
        "✓" if selected else "",
        site,
        name_cell(row.relpath),
        human(row.bytes),
        row.status,
        clock_time(row.mtime_ns // 1_000_000),
        where,
    )


def head(site: str, row: CatalogRow) -> str:
    """The preview's first line: the highlighted match in full."""
    return (
        f"{site}  ·  {shown(row.relpath)}  ·  {human(row.bytes)}  ·  "
        f"sha256 {row.sha256[:16]}…  ·  "
        f"modified {clock_time(row.mtime_ns // 1_000_000)}  ·  {row.status}\n"
    )


def count_line(
    total: int, capped: bool, listed: int, selected: int, catalogs: Mapping[str, Catalog]
) -> str:
    """How many entries of how many match, how many are listed and selected
    ("" with nothing to search: the status line and the sites table say why)."""
    if not catalogs:
        return ""
    size = sum(len(c) for c in catalogs.values())
    first = f" (first {listed:,} shown)" if total > listed else ""
    picked = f" · {selected} selected" if selected else ""
    many = "more than " if capped else ""
    return f"{many}{total:,} of {size:,} entries in {len(catalogs)} sites match{first}{picked}"
