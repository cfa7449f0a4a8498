"""The remote tier's marker: one small object, ``.coldkeep-remote``, at the top
of the remote's prefix, written by the first ship to it and looked for by every
ship, remote verify and fetch after.

A folder remote whose disk is not mounted looks like an empty folder (or none);
an S3 prefix emptied by someone else looks the same. Without the marker a ship
would write into what is there (the local disk under the mount point), read its
own copies back from it, and drop the local ones.

Invariants:
- A site that has shipped (its manifest records remote objects) never writes
  the marker again where it is missing and nothing of the site is there: the
  operation stops at once, in one line, before any object is written, read or
  dropped. The folder of a ``file://`` remote is created only with the marker,
  on a site's first ship.
- A remote shipped to before markers existed (no marker, but objects of the
  site there) gets its marker from the next ship.
- The marker lies outside every site's ``<site>/`` prefix, with a leading dot:
  no listing of a site's objects, and no listing of the sites, shows it.
"""

from __future__ import annotations

import json

from ..base.layout import Layout
from ..store.remoteobjects import RemoteObjects
from .objectstore import ObjectStore, RemoteFatal

MARKER_KEY = ".coldkeep-remote"


class RemoteUnmounted(RemoteFatal):
    """The remote has shipped objects recorded but no marker and none of them:
    a folder remote whose disk is not mounted, most likely; a bucket or prefix
    emptied, or a remote.url or remote.site that names another."""


async def check_marker(
    store: ObjectStore,
    objects: RemoteObjects,
    site: str,
    layout: Layout,
    *,
    may_write: bool,
) -> None:
    """Raise ``RemoteUnmounted`` when the remote is not the one this site
    shipped to; write the marker where it is due (``may_write``: a ship)."""
    if await store.head(MARKER_KEY) is not None:
        return
    shipped = await objects.count_under("")
    if shipped and not await _site_has_objects(store, site):
        raise RemoteUnmounted(
            f"{store.unmarked()} "
            f"({shipped} object{'s' * (shipped != 1)} of site {site} are recorded as shipped "
            f"there and none is to be found; nothing was written, read or dropped; if it was "
            f"emptied on purpose, create an empty {store.where(MARKER_KEY)} and run coldkeep "
            "verify --remote to ship again what is still local)"
        )
    if may_write:
        await write_marker(store, site, layout)


async def _site_has_objects(store: ObjectStore, site: str) -> bool:
    async for _ in store.list_objects(f"{site}/"):
        return True
    return False


async def write_marker(store: ObjectStore, site: str, layout: Layout) -> None:
    """The marker put (create-only); the store's folder created first where it
    is one."""
    body = json.dumps({"coldkeep": "remote tier", "first_site": site}, sort_keys=True).encode()
    await store.create_root()
    await store.put_bytes(MARKER_KEY, body, scratch=layout.scratch("marker"), root=layout.root)
