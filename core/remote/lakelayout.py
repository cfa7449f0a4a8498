"""Where the fleet's lake lives in the bucket, and what its names say.

The lake is every site's shipped event months as Parquet, hive-partitioned so
that any engine prunes by site and month from the key alone::

    <prefix>/lake/events/site=<site>/month=<YYYY-MM>/g<ms>-<sha12>.parquet

``ms`` (13 digits: the bucket's clock when the file was written) is the
month's generation there, ``sha12`` the start of the SQLite month's sha256 it
was made from. A month exported again (rows restored and archived again, the
current month growing) gets a new file beside the old one, which is deleted
once the new one is recorded: a reader takes, per site and month, only the
file of the greatest generation (``newest``), so it never sees a month twice
nor half of one.

Each file holds the events table's columns, typed from their declared types
(``column_type``), and ``coldkeep_raw``: NULL, or, for a row holding a value
its column's type cannot carry exactly (text that is not UTF-8, a text in an
INTEGER column...), a JSON object naming each such column with its SQLite type
and value (that column is NULL in the row): nothing is lost.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..base.configremote import RESERVED_SITE
from ..events.laketypes import RAW, column_type

# RAW and column_type: the file's columns, for the lake's readers.
__all__ = [
    "EVENTS", "LAKE_DIR", "RAW", "LakeName", "column_type", "lake_key", "month_prefix",
    "newest", "parse", "site_prefix",
]  # fmt: skip

LAKE_DIR = RESERVED_SITE  # the top folder of the prefix: no site may be named so
EVENTS = f"{LAKE_DIR}/events/"
_NAME = re.compile(
    r"lake/events/site=(?P<site>[A-Za-z0-9][A-Za-z0-9._-]*)/month=(?P<month>[0-9]{4}-[0-9]{2})/"
    r"g(?P<gen>[0-9]{13})-(?P<sha>[0-9a-f]{12})\.parquet"
)


def site_prefix(site: str) -> str:
    return f"{EVENTS}site={site}/"


def month_prefix(site: str, month: str) -> str:
    return f"{site_prefix(site)}month={month}/"


def lake_key(site: str, month: str, generation: int, sha256: str) -> str:
    """The key (under the remote's prefix) of ``site``'s ``month`` exported at
    ``generation`` (the bucket's ms) from a month database of that sha256."""
    return f"{month_prefix(site, month)}g{generation:013d}-{sha256[:12]}.parquet"


@dataclass(frozen=True, order=True)
class LakeName:
    """What a lake key says: whose month, which generation, from what."""

    site: str
    month: str
    generation: int
    sha12: str
    key: str


def parse(key: str) -> LakeName | None:
    """The parts of a lake key, or None for any other key (a writer's
    leftover, someone else's file in the folder)."""
    got = _NAME.fullmatch(key)
    if got is None:
        return None
    return LakeName(got["site"], got["month"], int(got["gen"]), got["sha"], key)


def newest(keys: Iterable[str]) -> dict[tuple[str, str], LakeName]:
    """Per (site, month), the file of the greatest generation among ``keys``:
    the one a reader reads."""
    best: dict[tuple[str, str], LakeName] = {}
    for key in keys:
        name = parse(key)
        if name is None:
            continue
        have = best.get((name.site, name.month))
        if have is None or (name.generation, name.key) > (have.generation, have.key):
            best[(name.site, name.month)] = name
    return best
