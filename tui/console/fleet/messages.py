"""What the fleet view's workers post to its screen: the sites as they are
listed and loaded, a filter's matches, where the highlighted file would go, a
restore's progress and end. Workers only post these; the screen's handlers
(view.py) own the state.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.message import Message

from coldkeep.core.files.catalog import Catalog, CatalogRow
from coldkeep.core.files.restore import RestoreReport
from coldkeep.core.ops.fleet import FleetSite


@dataclass
class SitesListed(Message):
    """The prefix's folders: the sites whose snapshots are being fetched."""

    names: list[str]


@dataclass
class SitesLoaded(Message):
    sites: list[FleetSite]
    done: bool = True  # False: those loaded so far, the others still loading


@dataclass
class CatalogsLoaded(Message):
    catalogs: dict[str, Catalog]


@dataclass
class FleetLoadFailed(Message):
    error: str


@dataclass
class Searched(Message):
    query: str
    total: int
    rows: list[tuple[str, CatalogRow]]
    error: str | None = None
    capped: bool = False  # more than `total` match


@dataclass
class TargetChecked(Message):
    key: str
    to: str  # the target field's text it was checked with
    target: str
    exists: bool | None  # None: refused, or no target yet
    detail: str = ""


@dataclass
class RestoreProgress(Message):
    done: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, RestoreProgress)


@dataclass
class RestoreEnded(Message):
    """A confirmed restore ended: done, stopped (``stopped``), or cut short by an
    error (``error``); ``report`` has the files it got to, ``sites`` the site of
    each (entry ids are each site's own)."""

    root: Path
    report: RestoreReport
    sites: list[str]
    stopped: str | None = None
    error: str | None = None
