"""``[mount]``: the on-disk block cache that remote-only copies are read through
without restoring them (``coldkeep mount``, ``cat``): its folder and its size.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .configtable import MAX_INTEGER, Table
from .userdirs import user_dir

# A remote-only copy read without restoring it (``coldkeep mount``, ``cat``) goes
# through an on-disk block cache of this many bytes at most (remote/rangecache.py).
DEFAULT_CACHE_BYTES = 1 << 30


# At least this many: a few readers each holding a block in flight, with room left
# for the blocks they read next (1 MiB blocks).
MIN_CACHE_BYTES = 8 << 20


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/coldkeep/mount`` (~/.cache by default): on disk where
    /tmp is often a tmpfs (memory), private to the user, and outside any root."""
    return user_dir("cache") / "mount"


@dataclass(frozen=True)
class MountSettings:
    """Reads of remote-only copies without restoring them: ``cache_dir`` holds a
    folder of cached blocks per running reader (made on open, removed on close),
    at most ``cache_bytes`` in each."""

    cache_bytes: int = DEFAULT_CACHE_BYTES
    cache_dir: Path = field(default_factory=default_cache_dir)


def read_mount(t: Table, base: Path) -> MountSettings:
    cache_dir = t.path("cache_dir", base, want="creatable_dir")
    mount = MountSettings(
        cache_bytes=t.integer(
            "cache_bytes", DEFAULT_CACHE_BYTES, minimum=MIN_CACHE_BYTES, maximum=MAX_INTEGER
        ),
        cache_dir=cache_dir if cache_dir is not None else default_cache_dir(),
    )
    t.done()
    return mount
