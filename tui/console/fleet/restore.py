"""A fleet restore, always to a folder the operator names (never in place):
where each chosen file would go and whether something is there already, the
question asked first (what goes where), and the restore itself, one site after
another, its files counted as they are done.

One site's files go straight under the target, several sites' each under
``<target>/<site>/`` (two hosts' files of one path would collide). A file
already there is never overwritten: it is reported and left alone.
"""

from __future__ import annotations

import os
import sqlite3
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from rich.text import Text
from textual.message import Message

from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.errors import RemoteError
from coldkeep.core.base.layout import UnsafePath, resolve_inside
from coldkeep.core.base.stream import Event, EventStream, FileDone
from coldkeep.core.files.catalog import CatalogRow
from coldkeep.core.files.restore import RestoreReport, check_restore_root, target_names
from coldkeep.core.ops.fleet import Fleet
from coldkeep.core.store.connection import ManifestError
from coldkeep.core.store.entries import Entry

from ...text.fmt import human
from ..screens import ConfirmScreen
from ..widgets.tables import name_cell
from .matches import row_key
from .messages import RestoreEnded, RestoreProgress, TargetChecked

# Confirmation rows listed at most (the title and summary count them all).
CONFIRM_ROWS = 200
# What the preview and a restore say while no target is typed.
REFUSED = "the fleet view never restores in place: type a target directory (t) first"


def files(n: int) -> str:
    return f"{n} file" if n == 1 else f"{n} files"


def restore_root(to: str, cache: Path) -> Path:
    """The target directory typed (``~`` expanded, relative to the current
    directory), checked as ``restore --to`` checks it: reached through no
    symlink, not a file, and outside the snapshot cache. Blocking (it stats)."""
    return check_restore_root(Path(to.strip()).expanduser(), cache.absolute())


@dataclass(frozen=True)
class Planned:
    """One file of a restore as the confirmation shows it."""

    site: str
    row: CatalogRow
    base: Path  # the site's restore root: the target, or its <site>/ folder
    target: Path
    exists: bool


def plan_restore(picked: list[tuple[str, CatalogRow]], root: Path) -> list[Planned]:
    """Where each picked file goes under ``root``: one site's straight under it,
    several sites' each under ``root/<site>/`` (two hosts' files of one path
    would collide); and whether something is there already (left alone). Blocking
    (it stats): run it in a thread."""
    by_site: dict[str, list[CatalogRow]] = defaultdict(list)
    for site, row in picked:
        by_site[site].append(row)
    planned = []
    for site, rows in by_site.items():
        base = root if len(by_site) == 1 else resolve_inside(root, site)
        # The core's own naming (older versions of one path get .entry-<id>), so
        # the dialog shows the names the restore will write. It reads only id,
        # relpath and mtime_ns, which a catalog row has too.
        names = target_names(cast("list[Entry]", rows), in_place=False)
        for row in rows:
            target = resolve_inside(base, names[row.id])
            planned.append(Planned(site, row, base, target, os.path.lexists(target)))
    return planned


def check_target(
    key: str, picked: list[tuple[str, CatalogRow]], to: str, cache: Path
) -> TargetChecked:
    """Where the file ``key`` would go, restored with ``picked`` (several sites:
    each under its own folder) under ``to``, or why it would not. Blocking (it
    stats): run it in a thread."""
    if not to.strip():
        return TargetChecked(key, to, "", None, REFUSED)
    try:
        root = restore_root(to, cache)
        planned = plan_restore(picked, root)
    except UnsafePath as err:
        return TargetChecked(key, to, "", None, str(err))
    mine = next(p for p in planned if row_key(p.site, p.row.id) == key)
    return TargetChecked(key, to, str(mine.target), mine.exists)


def target_words(checked: TargetChecked) -> Text:
    """The preview's line of where the highlighted file would go."""
    if checked.exists is None and checked.detail == REFUSED:
        return Text("no target directory yet: type one (t)", style="yellow")
    if checked.exists is None:
        return Text(f"refused: {checked.detail}", style="bold red")
    if checked.exists:
        return Text(f"→ {checked.target}  (EXISTS: left untouched)", style="yellow")
    return Text(f"→ {checked.target}  (free)")


def question(planned: list[Planned], root: Path, where: str) -> ConfirmScreen:
    """What a restore of ``planned`` (sorted) under ``root`` asks first: every
    file, where it goes and whether something is there, read from ``where``."""
    sites = sorted({p.site for p in planned})
    size = human(sum(p.row.bytes for p in planned))
    one = len(sites) == 1
    whose = sites[0] if one else f"{len(sites)} sites ({', '.join(sites)})"
    into = str(root) if one else f"{root}/<site>/"
    unshipped = sum(p.row.copies == "local" for p in planned)
    there = sum(p.exists for p in planned)
    summary = (
        f"Each file is read back from {where}/{sites[0] if one else '<site>'}/ and "
        "its sha256 checked before it is placed. Nothing is written to the remote or "
        "to any site."
    )
    if there:
        summary += f"\n{files(there)} already there: left untouched."
    warning = "Existing files are never overwritten: they are reported and left alone."
    if unshipped:
        warning += f" {files(unshipped)} never shipped (not on the remote): reported missing."
    return ConfirmScreen(
        f"Restore {files(len(planned))} ({size}) of {whose} to {into}",
        summary,
        # "Now" before the long path, so that a narrow dialog never cuts it.
        columns=("Site", "Path", "Size", "Now", "Written to"),
        rows=[
            (
                p.site,
                name_cell(p.row.relpath),
                human(p.row.bytes),
                Text("EXISTS", style="bold yellow") if p.exists else "free",
                str(p.target),
            )
            for p in planned[:CONFIRM_ROWS]
        ],
        warning=warning,
        confirm="Restore",
    )


class Counting(EventStream):
    """The restore's stream, counting the files done for the status line."""

    def __init__(self, total: int, post: Callable[[Message], object]) -> None:
        super().__init__()
        self.total = total
        self.done = 0
        self.post = post

    def emit(self, event: Event) -> None:
        super().emit(event)
        if isinstance(event, FileDone):
            self.done += 1
            self.post(RestoreProgress(self.done, self.total))


async def restore(
    fleet: Fleet, planned: list[Planned], root: Path, stream: EventStream, token: CancelToken
) -> RestoreEnded:
    """The confirmed restore, one site after another: how it ended (done,
    stopped, or cut short by an error) and the files it got to."""
    by_site: dict[str, list[int]] = defaultdict(list)
    for p in planned:
        by_site[p.site].append(p.row.id)
    roots = {p.site: p.base for p in planned}
    report, sites = RestoreReport(), []
    stopped = error = None
    try:
        for site, ids in by_site.items():
            got = await fleet.restore(site, ids, roots[site], stream=stream, cancel=token)
            report.files += got.files
            sites += [site] * len(got.files)
    except Cancelled as err:
        stopped = str(err) or token.reason
    except (RemoteError, ManifestError, UnsafePath, OSError, sqlite3.Error) as err:
        error = str(err)
    return RestoreEnded(root, report, sites, stopped, error)
