"""Doctor's checks of the roots: live_root and archive_root are directories (and on
which filesystem), the process can write where a pass writes (archive_root,
with a probe file created and removed) and unlink where it unlinks (the folders
of the eligible files), and a file held open by another process is seen (a write
lease taken and released at once).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from ..base.config import Settings
from ..base.durable import fsync
from ..base.fsutil import LeaseResult, open_file, take_lease, unlink_if_present
from ..base.layout import Layout
from .doctorfinding import Finding, Level
from .doctorfs import Filesystem, filesystem_of, nearest_existing
from .plan import Plan


def check_roots(settings: Settings) -> list[Finding]:
    live, archive = settings.live_root, settings.archive_root
    if not live.is_dir():
        what = "is not a directory" if live.exists() else "does not exist"
        return [
            Finding("live_root", "fail", f"{live} {what}", "fix live_root in the config"),
            _archive_root(settings, None),
            _archive_write(archive),
        ]
    live_fs = filesystem_of(live)
    return [
        Finding("live_root", "ok", f"{live}: a directory on {live_fs.describe()}"),
        _archive_root(settings, live_fs),
        _archive_write(archive),
    ]


def _archive_root(settings: Settings, live_fs: Filesystem | None) -> Finding:
    archive = settings.archive_root
    if archive.exists() and not archive.is_dir():
        return Finding(
            "archive_root",
            "fail",
            f"{archive} is not a directory",
            "fix archive_root in the config",
        )
    fs = filesystem_of(archive)
    level: Level = "ok"
    parts, fixes = [f"{archive}: a directory on {fs.describe()}"], []
    if not archive.exists():
        # Created by the first pass, as the config allows; but a missing archive is
        # as often a disk not mounted, and the pass would then fill the one below.
        level = "warn"
        parts = [f"{archive} does not exist yet: the first pass creates it on {fs.describe()}"]
        fixes.append("if it belongs on a disk of its own, mount that first")
    if fs.fstype == "tmpfs":
        level = "warn"
        parts.append("tmpfs keeps it in memory: everything archived is lost on reboot")
        fixes.append("put archive_root on a persistent disk")
    if live_fs is not None:
        parts.append(
            "the same filesystem as live_root"
            if live_fs.device == fs.device
            else f"not live_root's filesystem ({live_fs.fstype} at {live_fs.mount}): fine"
        )
    return Finding("archive_root", level, "; ".join(parts), "; ".join(fixes))


def _archive_write(archive: Path) -> Finding:
    """A pass writes gzips, the manifest and the lock in archive_root: a file is
    created, fsynced and removed there, under the root as the protocol does."""
    if not archive.exists():
        above = nearest_existing(archive)
        if above.is_dir() and os.access(above, os.W_OK | os.X_OK, effective_ids=True):
            return Finding("archive_write", "ok", f"{above} is writable: {archive} can be created")
        return Finding(
            "archive_write",
            "fail",
            f"{archive} cannot be created: {above} is not a writable directory",
            f"create {archive} and give coldkeep's user write access to it",
        )
    if not archive.is_dir():
        return Finding("archive_write", "fail", f"{archive} is not a directory")
    tmp = Layout(archive).probe()
    try:
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root=archive)
        try:
            os.write(fd, b"coldkeep doctor\n")
            fsync(fd, "doctor.probe_data")
        finally:
            os.close(fd)
            unlink_if_present(tmp, root=archive, durably="doctor.probe_removed")
    except OSError as err:
        return Finding(
            "archive_write",
            "fail",
            f"cannot write in {archive}: {err.strerror or err}",
            "give coldkeep's user write access to archive_root (and its filesystem mounted "
            "read-write, with room)",
        )
    return Finding("archive_write", "ok", f"a file was created, fsynced and removed in {archive}")


def check_live_write(settings: Settings, plan: Plan | None) -> Finding:
    """A pass unlinks each archived source: it needs write access to the folder of
    every eligible file. In a sticky folder (like /tmp) only the owner of a file
    or of the folder may unlink it; root may anyway."""
    live = settings.live_root
    if not live.is_dir():
        return Finding("live_write", "fail", f"{live} is not a directory")
    folders = {live}
    if plan is not None and plan.scan is not None:
        folders |= {live / PurePosixPath(c.relpath).parent for c in plan.scan.eligible}
    euid = os.geteuid()
    blocked, sticky = [], []
    for folder in sorted(folders):
        try:
            st = folder.stat()
        except OSError:
            continue  # gone since the scan: the pass will find it gone too
        if not os.access(folder, os.W_OK | os.X_OK, effective_ids=True):
            blocked.append(folder)
        elif euid != 0 and st.st_mode & stat.S_ISVTX and st.st_uid != euid:
            sticky.append(folder)
    below = len(folders) - 1
    scope = f"{live} and the {below} folders below it holding eligible files"
    if blocked:
        return Finding(
            "live_write",
            "fail",
            f"{len(blocked)} of {len(folders)} folders a pass removes sources from are not "
            f"writable (first: {blocked[0]}): archived files would stay in the live tree",
            "run coldkeep as the application's user or as root",
        )
    if sticky:
        return Finding(
            "live_write",
            "warn",
            f"{len(sticky)} folders are sticky and owned by another user (first: {sticky[0]}): "
            "only files coldkeep's user owns can be removed from them",
            "run coldkeep as root or as the owner of those folders",
        )
    return Finding("live_write", "ok", f"writable: {scope}" if below else f"writable: {live}")


def check_open_files(settings: Settings, plan: Plan | None) -> Finding:
    """Whether a file held open by another process is seen: a write lease taken
    (and released at once) on an eligible file, as a pass takes one on each."""
    live = settings.live_root
    eligible = [] if plan is None or plan.scan is None else plan.scan.eligible
    result: LeaseResult | None = None
    for cand in eligible[:20]:
        try:
            fd = open_file(live / cand.relpath, os.O_RDONLY | os.O_NONBLOCK, root=live)
        except OSError:
            continue  # gone, or unreadable: the pass says so
        try:
            result = take_lease(fd)
        finally:
            os.close(fd)
        if result == "held":
            break
    if result is None:
        return Finding("open_files", "ok", "no eligible file to try a write lease on yet")
    if result != "unsupported":
        return Finding(
            "open_files",
            "ok",
            "a file another process holds open is left live (a write lease is taken on each "
            "source from its read to its removal)",
        )
    fs = filesystem_of(live)
    return Finding(
        "open_files",
        "warn",
        f"no write lease on {fs.fstype} at {live} (not root, or leases unsupported there): a "
        "file held open elsewhere is guarded only by its identity (dev, ino, size, mtime, "
        "ctime); a line written after the pass to a log still open goes to the removed file",
        "run coldkeep as root (CAP_LEASE) on a local filesystem, or exclude logs that stay open",
    )
