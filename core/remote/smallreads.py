"""Small objects a reader reads again at every look (the fleet view's signed
statements and heartbeats, a few of each site's at every load), kept in one
file per site and read from the remote again only when its listing says the
object is not the one kept.

Invariants:
- An object is answered from the file only when the listing names the same key
  with the same size and version (S3's VersionId or ETag, a folder's inode and
  mtime): a key written over, or deleted and put again, is read again. An
  object listed without a version is always read.
- The file is no authority: what it answers is checked as a remote read is (a
  signature), and a file that cannot be read or parsed is an empty one, never
  an error.
- A save keeps only the objects read since the file was opened (it stays the
  size of one look), written under the scratch name its caller gives (one a
  crash leaves is cleared as theirs are) and renamed over the old one. It is a
  cache, not data: not fsynced (a file a power cut tore reads as empty).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import os
from pathlib import Path
from typing import Any

from .objectstore import ObjectInfo, ObjectStore

# Larger objects are read through, never kept (statements and beats are < 4 KiB).
MAX_KEPT = 64 * 1024


def _tag(info: ObjectInfo) -> str | None:
    return None if info.version is None else f"{info.size}:{info.version}"


class SmallReads:
    """Reads of small objects of ``store``, kept in the file ``path``."""

    def __init__(self, store: ObjectStore, path: Path) -> None:
        self.store = store
        self.path = path
        self._kept: dict[str, tuple[str, str]] = {}  # key: (tag, base64 of its bytes)
        self._read: dict[str, tuple[str, str]] = {}  # what this look read, to save

    @classmethod
    def loaded(cls, store: ObjectStore, path: Path) -> SmallReads:
        """The reads ``path`` keeps (none if it cannot be read). Blocking."""
        reads = cls(store, path)
        reads._kept = _load(path)
        return reads

    async def read(self, info: ObjectInfo) -> bytes:
        """The bytes of the object ``info`` lists (kept, or one ranged GET)."""
        tag = _tag(info)
        kept = self._kept.get(info.key)
        if tag is not None and kept is not None and kept[0] == tag:
            with contextlib.suppress(binascii.Error):  # torn: read again
                data = base64.b64decode(kept[1], validate=True)
                self._read[info.key] = kept
                return data
        data = await self.store.read_range(info.key, 0, info.size)
        if tag is not None and len(data) <= MAX_KEPT:
            self._read[info.key] = (tag, base64.b64encode(data).decode())
        return data

    async def save(self, scratch: Path) -> None:
        """What this look read, in place of what the file held (nothing written
        when they are the same), written first at ``scratch``."""
        if self._read != self._kept:
            await asyncio.to_thread(save_kept, self.path, scratch, self._read)
            self._kept = dict(self._read)


async def read_listed(store: ObjectStore, info: ObjectInfo, reads: SmallReads | None) -> bytes:
    """The bytes of the object ``info`` lists: through ``reads`` where given
    (kept from an earlier look), else one ranged GET of all of it."""
    return await (reads.read(info) if reads else store.read_range(info.key, 0, info.size))


def _load(path: Path) -> dict[str, tuple[str, str]]:
    return {
        k: (v[0], v[1])
        for k, v in load_kept(path).items()
        if isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
    }


def load_kept(path: Path) -> dict[str, Any]:
    """The JSON object a fleet cache file keeps; empty where there is none,
    or it is torn or not an object (a cache, never an error). Blocking."""
    try:
        held = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return held if isinstance(held, dict) else {}


def save_kept(path: Path, tmp: Path, doc: dict[str, Any]) -> None:
    """``doc`` in place of what ``path`` kept, written first at ``tmp`` and
    renamed over it (not fsynced: a cache). Blocking."""
    try:
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
