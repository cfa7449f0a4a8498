"""A site's listing (its beats and statements) kept between a fleet reader's
looks, and the fleet's index of beats that says when it may serve again: a
warm look at a thousand sites is a few listings of the index, not a thousand.

Invariants:
- A kept listing serves only while the site's entries in the index
  (``.beats/<site>/``: their keys, sizes, versions and times, none missing) are
  those listed just before it was, and it is younger than ``RELIST_AFTER_MS``
  by this host's clock (one set back lists again). A new beat names itself in
  the index after it is in place, so a listing made after the index was seen
  holds every beat the index named. A site the index does not name (an older
  coldkeep's, a host not allowed to write there) is listed at every look; one
  whose new entries someone who can write the bucket keeps deleting is listed
  within the hour anyway, and shows its last beat ageing meanwhile, never a
  newer state than it had.
- A cache, not data: what it lists is read and verified as a fresh listing's
  would be (smallreads.py, the statements' and beats' signatures); a file that
  cannot be read or parsed is none; written under a scratch name and renamed,
  not fsynced.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..base.errors import RemoteError
from .heartbeat import INDEX
from .objectstore import ObjectInfo, ObjectStore
from .smallreads import load_kept, save_kept

# A kept listing serves this long at most (ms) whatever the index says.
RELIST_AFTER_MS = 3_600_000

Entry = tuple[str, int, str | None, int | None]  # key, size, version, modified


def _entry(info: ObjectInfo) -> Entry:
    return (info.key, info.size, info.version, info.modified)


async def beat_index(store: ObjectStore) -> dict[str, list[Entry]]:
    """Each site's entries in the fleet's index of beats, as listed now."""
    by_site: dict[str, list[Entry]] = defaultdict(list)
    try:
        async for info in store.list_objects(INDEX):
            site, _, name = info.key[len(INDEX) :].partition("/")
            if name:
                by_site[site].append(_entry(info))
    except RemoteError:
        # A reader not let list it (its policy names the sites' prefixes) or a
        # server that failed: the index only spares requests, each site is listed.
        return {}
    return dict(by_site)


class KeptListing:
    """The listing kept in the file ``path`` for one site."""

    def __init__(self, path: Path, held: dict[str, Any]) -> None:
        self.path = path
        self._held = held

    @property
    def holds(self) -> bool:
        """Whether the file keeps a listing."""
        return bool(self._held)

    @classmethod
    def loaded(cls, path: Path) -> KeptListing:
        """What ``path`` keeps (nothing if it cannot be read). Blocking."""
        return cls(path, load_kept(path))

    def serves(self, entries: list[Entry] | None, now: int) -> dict[str, list[ObjectInfo]] | None:
        """The listing kept, where the site's index ``entries`` are those it was
        kept with and it is fresh at ``now`` (ms, this host's clock); else None."""
        held = self._held
        at = held.get("at")
        if not entries or not isinstance(at, int) or not 0 <= now - at < RELIST_AFTER_MS:
            return None
        if held.get("index") != [list(e) for e in entries]:
            return None
        try:
            return {
                prefix: [ObjectInfo(k, s, version=v, modified=m) for k, s, v, m in infos]
                for prefix, infos in held["listed"].items()
            }
        except (AttributeError, KeyError, TypeError, ValueError):  # not what save writes
            return None

    def save(
        self,
        scratch: Path,
        entries: list[Entry] | None,
        listed: dict[str, list[ObjectInfo]],
        now: int,
    ) -> None:
        """``listed``, made at ``now`` after the index showed ``entries``, kept
        in place of what the file held (written first at ``scratch``). A site
        the index does not name keeps nothing. Blocking."""
        if not entries:
            self._held = {}
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            return
        self._held = {
            "at": now,
            "index": [list(e) for e in entries],
            "listed": {p: [list(_entry(i)) for i in infos] for p, infos in listed.items()},
        }
        save_kept(self.path, scratch, self._held)
