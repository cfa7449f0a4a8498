"""Which live files are eligible for archiving now, and why each other one is not.

A file is eligible when all hold: it is a regular file (``lstat``; links are never
followed, linked directories never entered); its path relative to ``live_root``
matches an include glob and no exclude glob; its name is not one of coldkeep's
temporaries nor a unit's closed marker (the ``marker:`` rule's file: archiving
it would reopen its unit); its mtime is older than ``files.min_age_days``; its
unit is closed (when ``files.unit_closed`` is set); it is not in a restore grace
(put back by a restore in place less than ``hold_days`` ago); and its path and
its gzip's fit in PATH_MAX.

Nothing is passed over in silence: a folder that cannot be listed counts as
``unreadable``, a live path over PATH_MAX (or one whose gzip's path would be)
as ``path_too_long``, each with the other skip reasons.

The scan reads only: it never writes, never takes the lock, and is the same for
``plan`` and for a pass. Synchronous: run it in a thread.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
from collections import Counter
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..base.config import Settings
from ..base.configfiles import UnitClosedMarker
from ..base.errors import ColdkeepError
from ..base.fsutil import FileIdentity
from ..base.globs import PathFilter
from ..base.layout import PATH_MAX, RESTORE_PARTIAL_SUFFIX, Layout, is_temp_name, unit_of
from ..base.times import DAY_NS

# "held": a file a restore put back, left alone for its restore grace (the
# reason's name is in the JSON of plan and pass: docs/json.md).
SkipReason = Literal[
    "too_new", "unit_open", "held", "not_regular", "unreadable", "path_too_long", "temp_name"
]


class ScanError(ColdkeepError):
    """The scan cannot decide (e.g. the unit_closed query fails); the message says
    which setting and why."""


@dataclass(frozen=True)
class Candidate:
    relpath: str
    unit: str
    identity: FileIdentity


@dataclass
class FileScan:
    eligible: list[Candidate] = field(default_factory=list)
    skipped: Counter[SkipReason] = field(default_factory=Counter)


def closed_units(settings: Settings) -> set[str] | None:
    """The units the ``unit_closed`` rule calls closed (None: no rule, all are)."""
    rule = settings.files.unit_closed
    if rule is None:
        return None
    live = settings.live_root
    if isinstance(rule, UnitClosedMarker):
        closed = {e.name for e in os.scandir(live) if e.is_dir(follow_symlinks=False)}
        closed = {u for u in closed if (live / u / rule.name).exists()}
        if (live / rule.name).exists():
            closed.add(".")
        return closed
    assert settings.state_db is not None  # config refuses a sql: rule without it
    try:
        db = sqlite3.connect(f"file:{settings.state_db}?mode=ro", uri=True, timeout=5)
        try:
            return {str(r[0]) for r in db.execute(rule.query)}
        finally:
            db.close()
    except sqlite3.Error as err:
        raise ScanError(
            f"files.unit_closed query failed on {settings.state_db}: {err} "
            "(fix the query in the config)"
        ) from err


def _unlisted(scan: FileScan) -> Callable[[OSError], None]:
    """``os.walk``'s onerror: a folder it cannot list is counted, never passed
    over in silence (its files stay live)."""

    def count(err: OSError) -> None:
        if err.errno == errno.ENOENT:
            return  # gone since its parent was listed
        scan.skipped["path_too_long" if err.errno == errno.ENAMETOOLONG else "unreadable"] += 1

    return count


def _marker_of(settings: Settings) -> str | None:
    rule = settings.files.unit_closed
    return rule.name if isinstance(rule, UnitClosedMarker) else None


def _restore_too_long(dirpath: str, name: str) -> bool:
    """Whether a restore could not write this file back by path (its temporary
    beside it would be over PATH_MAX)."""
    room = len(RESTORE_PARTIAL_SUFFIX) + 2
    return len(os.fsencode(dirpath)) + len(os.fsencode(name)) + room >= PATH_MAX


def scan_files(settings: Settings, *, now_ns: int, in_grace: Container[str] = ()) -> FileScan:
    """Walk ``live_root`` and sort every included file into eligible or skipped."""
    included = PathFilter(settings.files.include, settings.files.exclude)
    cutoff = now_ns - int(settings.files.min_age_days * DAY_NS)
    closed = closed_units(settings)
    marker = _marker_of(settings)
    layout = Layout(settings.archive_root)
    scan = FileScan()
    root = settings.live_root
    for dirpath, dirs, names in os.walk(root, onerror=_unlisted(scan)):
        dirs.sort()
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        for name in sorted(names):
            if name == marker and "/" not in rel_dir:
                continue
            relpath = name if rel_dir == "." else f"{rel_dir}/{name}"
            if not included(relpath):
                continue
            if is_temp_name(name):
                # coldkeep's own temporary names (a restore's partial, a source
                # set aside), or the application's file named like one: never
                # archived, and counted, so that such a file is not passed over
                # in silence.
                scan.skipped["temp_name"] += 1
                continue
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue  # gone since the listing: nothing to archive
            except OSError as err:
                if err.errno != errno.ENAMETOOLONG:
                    raise
                scan.skipped["path_too_long"] += 1
                continue
            unit = unit_of(relpath)
            if not stat.S_ISREG(st.st_mode):
                scan.skipped["not_regular"] += 1
            elif st.st_mtime_ns >= cutoff:
                scan.skipped["too_new"] += 1
            elif closed is not None and unit not in closed:
                scan.skipped["unit_open"] += 1
            elif relpath in in_grace:
                scan.skipped["held"] += 1
            elif layout.too_long(relpath) or _restore_too_long(dirpath, name):
                scan.skipped["path_too_long"] += 1
            else:
                scan.eligible.append(Candidate(relpath, unit, FileIdentity.of_stat(st)))
    return scan
