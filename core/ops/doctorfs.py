"""Doctor's view of filesystems: the mount a path is on, or would be on (its
nearest existing ancestor's), read from ``/proc/self/mountinfo``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..base.space import mount_of

MOUNTINFO = Path("/proc/self/mountinfo")


@dataclass(frozen=True)
class Filesystem:
    """The mount a path is on (or would be on: its nearest existing ancestor's)."""

    mount: Path
    fstype: str  # "unknown" without /proc/self/mountinfo
    source: str
    device: int
    readonly: bool

    def describe(self) -> str:
        dev = f"device {os.major(self.device)}:{os.minor(self.device)}"
        ro = ", read-only" if self.readonly else ""
        return f"{self.fstype} ({self.source}, {dev}, mounted at {self.mount}{ro})"


def nearest_existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists."""
    here = path.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_of(path: Path) -> Filesystem:
    """The filesystem holding ``path``: the longest mount point above it in
    /proc/self/mountinfo (a bind mount is its own entry), preferring one whose
    device is the path's (an overmounted point lists both)."""
    here = nearest_existing(path)
    st = os.stat(here)
    readonly = bool(os.statvfs(here).f_flag & os.ST_RDONLY)
    real = os.path.realpath(here)
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        lines = []
    best: tuple[bool, int, Filesystem] | None = None
    device = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        mount = _unescape(fields[4])
        if real != mount and not real.startswith(mount.rstrip("/") + "/"):
            continue
        key = (fields[2] == device, len(mount))
        fs = Filesystem(Path(mount), tail[0], _unescape(tail[1]), st.st_dev, readonly)
        if best is None or key >= best[:2]:
            best = (*key, fs)
    if best is not None:
        return best[2]
    return Filesystem(mount_of(here), "unknown", "unknown", st.st_dev, readonly)
