"""Which live tree an archive belongs to: ``<archive_root>/coldkeep.site``, and
the check every session makes before it opens (or creates) the manifest.

The record is a small JSON document: the live tree's resolved path and its
directory's (st_dev, st_ino), and the site's id (the manifest's, made once),
written when a manifest first exists beside it. It lives outside the manifest
on purpose: it is what tells a lost manifest from a site no pass has run on, and
a manifest rebuilt from the gzips takes the site id from it (the bucket knows
the site by it).

Invariants:
- An archive serves one live tree. A config whose live_root is neither the
  recorded path nor the recorded directory (by st_dev/st_ino: a tree reached by
  another path, or renamed) is refused before the manifest is opened, so a
  restore under one config never writes another tree's files.
- A manifest is created only on an archive that never had one: no record, no
  event month under ``events/``. Otherwise its absence is a lost manifest,
  refused in one line that points at ``rebuild-manifest``. (Gzips alone under
  ``files/`` are an older coldkeep's archive, adopted by a first pass.)
- The record is written tmp + fsync + rename-without-replace + fsync dir, after
  the archive directory (and so the manifest's name in it) is fsynced: a record
  that survives a power cut means the manifest's name did too. A record written
  before site ids (none in it) is rewritten once with the id, tmp + fsync +
  rename over it + fsync dir: the old record or the new one, never neither.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path

from .durable import fsync
from .errors import UsageError
from .fsutil import fsync_dir, open_file, rename_noreplace, unlink_if_present
from .layout import PARTIAL_SUFFIX, Layout


class SiteError(UsageError):
    """The archive cannot be used by this config as it is; the message says why
    and what to do."""


@dataclass(frozen=True)
class SiteRecord:
    live_root: str  # resolved
    dev: int
    ino: int
    beside: str | None = None  # live_root relative to the resolved archive_root
    site_id: str | None = None  # None: written before site ids

    def is_tree(self, live_root: Path, archive_root: Path) -> bool:
        """Whether ``live_root`` is the recorded tree: the same resolved path, the
        same directory reached another way, or the tree and its archive moved (or
        copied) together, the one where it was beside the other."""
        if os.path.realpath(live_root) == self.live_root:
            return True
        if self.beside is not None and _beside(live_root, archive_root) == self.beside:
            return True
        try:
            st = os.stat(live_root)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (self.dev, self.ino)


def _beside(live_root: Path, archive_root: Path) -> str:
    return os.path.relpath(os.path.realpath(live_root), os.path.realpath(archive_root))


def read_site(layout: Layout) -> SiteRecord | None:
    """The archive's record, or None where none was written yet."""
    path = layout.site
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        beside, site_id = data.get("beside"), data.get("site_id")
        return SiteRecord(
            str(data["live_root"]),
            int(data["dev"]),
            int(data["ino"]),
            None if beside is None else str(beside),
            None if site_id is None else str(site_id),
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SiteError(
            f"{path} cannot be read ({err}): it records which live tree this archive "
            "belongs to; remove it and run again with the config of that tree"
        ) from None


def archived_content(layout: Layout) -> str | None:
    """What under ``archive_root`` shows a manifest was kept here: the record, or
    an event month (whose rows only a manifest's batches account for); None for
    nothing. Gzips under ``files/`` alone do not count: recovery adopts an
    older coldkeep's gzips into a first manifest, as it always did."""
    if layout.site.exists():
        return f"{layout.site} records that a manifest was made here"
    months = layout.event_months()
    if months:
        n = len(months)
        return f"{n} event month database{'s' * (n != 1)} in {layout.events}"
    return None


def check_site(layout: Layout, live_root: Path) -> None:
    """Refuse (``SiteError``) an archive that belongs to another live tree, or
    whose manifest is gone while the archive shows it had one."""
    record = read_site(layout)
    if record is not None and not record.is_tree(live_root, layout.root):
        raise SiteError(
            f"{layout.root} belongs to the live tree {record.live_root}, not to {live_root} "
            f"(this config's live_root): give this config an archive_root of its own; if the "
            f"live tree itself moved to {live_root}, remove {layout.site} and run again"
        )
    if layout.manifest.exists():
        return
    what = archived_content(layout)
    if what is not None:
        raise SiteError(
            f"the manifest {layout.manifest} is missing, but the archive is not new ({what}): "
            "run coldkeep rebuild-manifest (from the archive's files) or coldkeep "
            "rebuild-manifest --from-remote, rather than a pass starting an empty manifest "
            f"over it; to start a new archive here on purpose, move {layout.root} away first"
        )


def record_site(layout: Layout, live_root: Path, site_id: str) -> None:
    """Write the record of ``live_root`` and site ``site_id`` where there is none
    yet (the manifest exists by now); add the id to a record that lacks it."""
    record = read_site(layout)
    if record is not None and record.site_id == site_id:
        _sweep(layout)
        return
    root = layout.root
    tmp = layout.site.with_name(f"{layout.site.name}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}")
    if record is not None:
        _write(tmp, {**asdict(record), "site_id": site_id}, root)
        os.replace(tmp, layout.site)  # directly under archive_root, which is coldkeep's own
        fsync_dir(root, root=root, site="site.placed")
        _sweep(layout)
        return
    # the manifest's name first: the record vouches for it
    fsync_dir(root, root=root, site="site.manifest_named")
    st = os.stat(live_root)
    fields = {
        "live_root": os.path.realpath(live_root),
        "dev": st.st_dev,
        "ino": st.st_ino,
        "beside": _beside(live_root, root),
        "site_id": site_id,
    }
    _write(tmp, fields, root)
    try:
        placed = rename_noreplace(tmp, layout.site, root=root)
    except FileNotFoundError:
        if not layout.site.exists():
            raise
        placed = "exists"  # another opener placed its record, then swept ours
    if placed == "exists":
        unlink_if_present(tmp, root=root)  # another opener wrote it first
    fsync_dir(root, root=root, site="site.placed")
    _sweep(layout)


def _write(tmp: Path, fields: dict[str, object], root: Path) -> None:
    fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, root=root)
    try:
        os.write(fd, json.dumps(fields, sort_keys=True).encode() + b"\n")
        fsync(fd, "site.data")
    finally:
        os.close(fd)


def _sweep(layout: Layout) -> None:
    """Remove the records an opener killed before its rename left half-written
    (each under a name of its own). Only once the record is in place: an opener
    still writing finds it there and gives up its own."""
    pattern = f"{glob.escape(layout.site.name)}.*{PARTIAL_SUFFIX}"
    for left in layout.root.glob(pattern):
        unlink_if_present(left, root=layout.root)
