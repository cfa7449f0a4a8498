"""Doctor's check that the ``[remote]`` answers: a folder remote's folder as a ship
finds it, a probe object put (create-only) and deleted, the remote marker a ship
looks for, and whether the store refuses to overwrite a key.

Invariant: the probe is all it leaves behind, and it is removed (the local file
too); the manifest is opened read-only.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import sqlite3
import tempfile
from pathlib import Path

from ..base.config import Settings
from ..base.errors import RemoteError
from ..base.layout import Layout
from ..remote.connect import connected
from ..remote.marker import RemoteUnmounted, check_marker
from ..remote.objectstore import ObjectStore
from ..store.connection import ManifestError
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects
from .doctorfinding import Finding
from .doctorfs import filesystem_of, nearest_existing


def _remote_folder(folder: Path) -> Finding | None:
    """A ``file://`` remote's folder as a ship finds it; None when it is there.
    Its absence is said, not mended: a ship creates it, but a missing folder is
    as often a network disk not mounted, and then the copies would stay here."""
    if folder.is_dir():
        return None
    if folder.exists():
        return Finding("remote", "fail", f"{folder} is not a directory", "fix remote.url")
    above = nearest_existing(folder)
    if not above.is_dir() or not os.access(above, os.W_OK | os.X_OK, effective_ids=True):
        return Finding(
            "remote",
            "fail",
            f"{folder} does not exist and cannot be created: {above} is not a writable directory",
            "fix remote.url, or mount the disk it names",
        )
    return Finding(
        "remote",
        "warn",
        f"{folder} does not exist yet: the first ship creates it on "
        f"{filesystem_of(folder).describe()}",
        "if it is a mounted disk, mount it first",
    )


def _probe_source() -> tuple[Path, int, str]:
    data = b"coldkeep doctor probe\n"
    fd, name = tempfile.mkstemp(prefix="coldkeep-doctor.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name), len(data), hashlib.sha256(data).hexdigest()


async def _probe_write(store: ObjectStore) -> None:
    """A probe object put (create-only, as a ship puts) and deleted again. At the
    top of the prefix, not under the site: nothing a listing of the site shows,
    no folder left behind."""
    src, size, sha = await asyncio.to_thread(_probe_source)
    key = f".coldkeep-doctor.{secrets.token_hex(8)}"
    try:
        await store.put_new(key, src, size, sha)
        await store.delete(key)
    finally:
        await asyncio.to_thread(src.unlink, missing_ok=True)


async def check_remote(settings: Settings) -> Finding:
    remote = settings.remote
    if remote is None:
        return Finding("remote", "ok", "no [remote]: nothing to check")
    if remote.folder is not None:
        missing = await asyncio.to_thread(_remote_folder, remote.folder)
        shipped = await _shipped(settings) if missing is not None else 0
        if shipped and missing is not None and missing.level == "warn":
            return Finding(
                "remote",
                "fail",
                f"the remote folder {remote.folder.as_uri()} has no marker: is its disk "
                f"mounted? ({remote.folder} does not exist, and {shipped} objects are "
                "recorded as shipped there)",
                "mount its disk, or fix remote.url",
            )
        if missing is not None:
            return missing
    async with connected(remote) as store:
        try:
            conditional = await store.refuses_overwrite()
            await _probe_write(store)
            unmounted = await _unmounted(settings, store)
        except RemoteError as err:  # RemoteAuthError too: its line says what to do
            return Finding("remote", "fail", str(err))
        except OSError as err:  # the local probe file, before any request
            return Finding("remote", "fail", f"the probe could not be prepared: {err}")
    if unmounted is not None:
        return Finding("remote", "fail", unmounted, "mount its disk, or fix remote.url")
    found = f"{store.url} answers: a probe object was written and deleted"
    if not conditional:
        return Finding(
            "remote",
            "warn",
            f"{found}; it does not refuse to overwrite an existing key (If-None-Match)",
            "nothing to do with one host per site: each upload asks with HEAD first, under "
            "the archive lock",
        )
    return Finding("remote", "ok", f"{found}; it refuses to overwrite an existing key")


async def _shipped(settings: Settings) -> int:
    """How many objects the manifest records as shipped (0 without one that opens)."""
    try:
        manifest = await Manifest.open_existing(Layout(settings.archive_root).manifest)
    except (ManifestError, sqlite3.Error):
        return 0
    if manifest is None:
        return 0
    async with manifest:
        return await RemoteObjects(manifest).count_under("")


async def _unmounted(settings: Settings, store: ObjectStore) -> str | None:
    """Why a ship would stop at the remote marker (remote/marker.py), or None;
    the manifest read-only (one that cannot be opened is the manifest line's)."""
    assert settings.remote is not None
    layout = Layout(settings.archive_root)
    try:
        manifest = await Manifest.open_existing(layout.manifest)
    except (ManifestError, sqlite3.Error):
        return None
    if manifest is None:
        return None
    async with manifest:
        try:
            await check_marker(
                store, RemoteObjects(manifest), settings.remote.site, layout, may_write=False
            )
        except RemoteUnmounted as err:
            return str(err)
    return None
