"""The folders a config names, kept apart: ``archive_root`` and ``live_root`` never
nest (either way), ``state_db`` is not inside ``archive_root``, and a folder
another key names (a ``file://`` remote, the block cache) overlaps neither root.

Invariant: overlap is judged by what the directories are (links resolved,
(st_dev, st_ino) compared), not by their spelling, so a symlink or a bind mount
cannot hide it. Otherwise a pass would archive its own archive, sweep the
application's files as leftovers, or ship into the live tree.
"""

from __future__ import annotations

import os
from pathlib import Path

from .configtable import ConfigError


def check_apart(file: Path, key: str, path: Path, roots: tuple[Path, Path], fix: str) -> None:
    """``path`` (the folder ``key`` names) neither inside live_root or
    archive_root nor holding one. A file:// remote or the block cache in
    live_root would be archived by the next pass; in archive_root a remote would
    share the fate the remote tier exists to escape, and the cache would be
    walked as the archive's own files; the other way round, emptying the cache
    would remove a root."""
    for name, root in zip(("live_root", "archive_root"), roots, strict=True):
        if is_inside(path, root) or is_inside(root, path):
            raise ConfigError(file, key, f"{path} and {name} ({root}) overlap", fix)


def check_roots_apart(file: Path, live: Path, archive: Path, state_db: Path | None) -> None:
    if is_inside(archive, live):
        raise ConfigError(
            file,
            "archive_root",
            f"{archive} is inside live_root {live}",
            "put the archive outside the live tree",
        )
    if is_inside(live, archive):
        raise ConfigError(
            file,
            "live_root",
            f"{live} is inside archive_root {archive}",
            "put the archive outside the live tree",
        )
    if state_db is not None and is_inside(state_db, archive):
        raise ConfigError(
            file,
            "state_db",
            f"{state_db} is inside archive_root {archive}",
            "keep the application's database outside the archive",
        )


def is_inside(inner: Path, outer: Path) -> bool:
    """Whether ``inner`` is ``outer`` or lies beneath it, by what the directories
    are rather than how they are spelled: links resolved, and each directory from
    ``inner`` (its nearest existing one, where it does not exist yet) up to ``/``
    compared with ``outer`` by (st_dev, st_ino), which a bind mount or a second
    path to the same directory cannot hide."""
    inner_r, outer_r = Path(os.path.realpath(inner)), Path(os.path.realpath(outer))
    if inner_r.is_relative_to(outer_r):
        return True
    try:
        st = os.stat(outer_r)
    except OSError:
        return False  # not there: nothing existing lies inside it yet
    target = (st.st_dev, st.st_ino)
    for folder in (inner_r, *inner_r.parents):
        try:
            here = os.stat(folder)
        except OSError:
            continue  # not created yet: its nearest existing parent decides
        if (here.st_dev, here.st_ino) == target:
            return True
    return False
