"""How the fleet view gathers each site's state: the sites listed under the
prefix, each one's newest manifest snapshot (fetched when newer than the
cache's), then its catalog and its index of paths, each step posted as it ends
so the screen fills as it goes; and that state in words, in the sites table and
the status line.

A site without a usable snapshot is listed, with why, never left out: a host
that stopped shipping is what the operator needs to see here.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Mapping

from rich.text import Text
from textual.message import Message

from coldkeep.core.base.errors import RemoteError
from coldkeep.core.files.catalog import Catalog
from coldkeep.core.ops.fleet import Fleet, FleetSite
from coldkeep.core.ops.health import MARKS, span
from coldkeep.core.store.connection import ManifestError

from ..widgets.tables import Cell
from .messages import CatalogsLoaded, FleetLoadFailed, SitesListed, SitesLoaded

SHOWN_EVERY_S = 0.3  # how often the sites loaded so far are shown
COLUMNS = [
    ("Health", "health"),
    ("Site", "site"),
    ("Heartbeat", "beat"),
    ("Snapshot", "snapshot"),
    ("Entries", "entries"),
    ("", "note"),
]
STYLES = {"critical": "bold red", "silent": "magenta", "warn": "yellow", "ok": "green"}


async def gather(fleet: Fleet, post: Callable[[Message], object]) -> None:
    """The sites, their snapshots, then their catalogs, each step posted (a
    failure too, as ``FleetLoadFailed``)."""
    try:
        # Listed first only to say how many are coming: Fleet.load lists
        # again (one delimiter listing) and fetches each site's snapshot.
        post(SitesListed(await fleet.site_names()))
        loading = asyncio.ensure_future(fleet.load())
        # The sites loaded so far shown as they come (a thousand take seconds),
        # a few times a second rather than one message a site.
        while not loading.done():
            await asyncio.wait([loading], timeout=SHOWN_EVERY_S)
            if not loading.done() and fleet.loaded:
                post(SitesLoaded(list(fleet.loaded.values()), done=False))
        post(SitesLoaded(loading.result()))
        catalogs = await fleet.catalogs()
        post(CatalogsLoaded(catalogs))
        post(SitesLoaded(await fleet.counted()))  # what each bucket locks, once the table is full
        # Each site's index of paths, for the filters typed next; a site
        # without one (no room in the cache) is filtered by its manifest.
        for catalog in catalogs.values():
            await asyncio.to_thread(catalog.prepare)
    except (RemoteError, ManifestError, OSError, sqlite3.Error) as err:
        post(FleetLoadFailed(str(err)))


def snapshot_time(taken_at: int | None) -> str:
    """When a site's snapshot was taken (as its statement signs it), in UTC."""
    if taken_at is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(taken_at / 1000))


def _locks(site: FleetSite) -> Text | str:
    """What the site's bucket keeps locked and what is sealed, as its snapshot
    says ("" for neither)."""
    parts = []
    if site.locked or site.legal_held:
        parts.append(f"{site.locked} locked, {site.legal_held} legally held")
    if site.sealed:
        parts.append(f"{site.sealed} sealed")
    return Text(", ".join(parts), style="dim") if parts else ""


def listed_rows(names: list[str]) -> dict[str, tuple[Cell, ...]]:
    """The sites table while their snapshots are fetched."""
    return {name: ("", name, "", Text("loading…", style="dim"), "", "") for name in names}


def health_cell(site: FleetSite) -> Text:
    state = site.health.state
    return Text(f"{MARKS[state]} {state}", style=STYLES[state])


def _beat(site: FleetSite) -> str:
    quiet = site.health.quiet_ms
    return "none" if quiet is None else f"{span(quiet)} ago"


def site_rows(
    sites: Mapping[str, FleetSite], catalogs: Mapping[str, Catalog]
) -> dict[str, tuple[Cell, ...]]:
    """The sites table: each site's snapshot and entries, or why it has none."""
    rows: dict[str, tuple[Cell, ...]] = {}
    for name, site in sites.items():
        health, beat = health_cell(site), _beat(site)
        reason = Text(site.health.reason, style=STYLES[site.health.state])
        if site.usable:
            catalog = catalogs.get(name)
            entries = f"{len(catalog):,}" if catalog is not None else "…"
            note = _locks(site) if site.health.state == "ok" else reason
            rows[name] = (health, name, beat, snapshot_time(site.taken_at), entries, note)
        else:
            rows[name] = (
                health,
                Text(name, style="dim"),
                beat,
                Text("no usable snapshot", style="dim"),
                "",
                reason,
            )
    return rows


def status_line(
    where: str,
    *,
    load_error: str | None,
    fetching: bool,
    listed: list[str],
    sites: Mapping[str, FleetSite],
    catalogs: Mapping[str, Catalog],
    running: str | None,
) -> Text | str:
    """The status line: how far the gathering has come, or what it found (and
    a restore running)."""
    if load_error is not None:
        return Text(f"cannot read {where}: {load_error}", style="bold red")
    if fetching:
        n = len(listed)
        text = (
            f"loading {n} sites… (each one's newest manifest snapshot)"
            if listed
            else f"listing the sites under {where}…"
        )
        if sites and len(sites) < n:
            text = f"loaded {len(sites)} of {n} sites… (each one's newest manifest snapshot)"
        elif sites:
            text = f"loading {sum(s.usable for s in sites.values())} sites' catalogs…"
        return text
    if not sites:
        return Text(f"no sites under {where}: nothing has shipped there yet", style="yellow")
    unusable = sum(not s.usable for s in sites.values())
    entries = sum(len(c) for c in catalogs.values())
    # What matters first: at 80 columns the end of the line is cut.
    parts = [f"fleet: {len(sites)} sites"]
    if unusable:
        parts[-1] += f" ({unusable} without a usable snapshot)"
    if running:
        parts.append(running)
    parts += [f"{entries:,} entries", "read-only", where]
    return " · ".join(parts)
