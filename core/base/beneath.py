"""Paths inside a root, reached without following a link: what keeps coldkeep, run
as root over a tree a less trusted user can write, from reading, writing, renaming
or removing anything outside ``live_root`` and ``archive_root``.

A path string that is checked and then used (``lstat`` each parent, then
``open``) can be redirected between the two by a user who swaps a directory for a
symlink and back. Here no path below a root is ever used as a string: the root is
opened, each directory under it is opened relative to the one above with
``O_NOFOLLOW | O_DIRECTORY`` (and created with ``mkdirat`` when asked, each new
name made durable in its parent), and the last component is opened, stat'ed,
renamed, unlinked or touched relative to its directory's descriptor (the ``*at``
calls behind ``os``'s ``dir_fd``). A component that is a symlink, or becomes one
while the walk runs, fails that one operation with ``Refused``: it is never
followed, whatever it points at.

A batch of operations on a few directories' files (a bundle's members) may keep
its walks (``walks_kept``): each directory is walked to once, as above, and its
descriptor held to the batch's end; what it names is the directory as it was
when reached, as for a single operation, only for longer.

The roots themselves (and what is above them) are the operator's, named in the
config: trusted. Everything here is synchronous: callers run it in threads.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .durable import fsync
from .errors import ColdkeepError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(ColdkeepError, OSError):
    """A component under a root is a symlink (or not a directory), or turned into
    one while it was walked: the operation is refused, nothing followed. An
    ``OSError`` (ELOOP), so that whatever stops on a file's I/O error stops that
    file on it, and nothing else."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.ELOOP, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _parts(root: Path, path: Path) -> tuple[str, ...]:
    # By the strings (a Path's is normalised): relative_to was a fifth of a
    # small file's walk.
    top, below = os.fspath(root), os.fspath(path)
    if below == top:
        return ()
    lead = top if top.endswith("/") else top + "/"
    if not below.startswith(lead):
        raise Refused(f"refused: {path} is not inside {root}")
    return tuple(below[len(lead) :].split("/"))


def _refusal(dir_fd: int, name: str, where: Path) -> Refused:
    """Why ``name`` in ``dir_fd`` cannot be walked into, in words."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        mode = stat.S_IFLNK  # gone again: it was swapped, and back
    if stat.S_ISLNK(mode):
        return Refused(f"refused: {where} is a symlink, or changed to one during the operation")
    return Refused(f"refused: {where} is not a directory")


@contextmanager
def directory(root: Path, path: Path, *, create: bool = False) -> Iterator[int]:
    """A descriptor of the directory ``path`` (``root`` itself or below it), walked
    to without following a link; with ``create``, the missing ones are made.
    Inside ``walks_kept(root)`` on this thread, the descriptor kept there."""
    with _directory_at(root, _parts(root, path), create) as fd:
        yield fd


@contextmanager
def _directory_at(root: Path, parts: tuple[str, ...], create: bool) -> Iterator[int]:
    kept = _kept_for(root)
    if kept is not None:
        fd = kept.get(parts)
        if fd is None:
            fd = kept[parts] = _walk(root, parts, create)
        yield fd
        return
    fd = _walk(root, parts, create)
    try:
        yield fd
    finally:
        os.close(fd)


_local = threading.local()


@contextmanager
def walks_kept(root: Path) -> Iterator[None]:
    """Within it, on this thread, each directory under ``root`` is walked to once
    and its descriptor kept until the end: a batch of operations on the files of
    a few directories (a bundle's members: opened, checked, unlinked) walks each
    directory once, not once per operation. The walk is the same (no link is
    followed); what a kept descriptor names is the directory as it was when first
    reached, for the batch's length, as an unkept one is for one operation's."""
    before = getattr(_local, "kept", None)
    kept: dict[tuple[str, ...], int] = {}
    _local.kept = (root, kept)
    try:
        yield
    finally:
        _local.kept = before
        for fd in kept.values():
            os.close(fd)


def _kept_for(root: Path) -> dict[tuple[str, ...], int] | None:
    kept: tuple[Path, dict[tuple[str, ...], int]] | None = getattr(_local, "kept", None)
    if kept is None or (kept[0] is not root and kept[0] != root):  # `is`: Path's == is slow
        return None
    return kept[1]


def _walk(root: Path, parts: tuple[str, ...], create: bool) -> int:
    """An open descriptor of the directory ``parts`` below ``root`` (the caller
    closes it)."""
    if create and not root.is_dir():
        _make_root(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(parts):
            below = _step(fd, part, (root, parts[: i + 1]), create)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make_root(root: Path) -> None:
    """A root named by the operator (a restore's ``--to`` directory, an archive on
    first use) made where it is missing, each new name durable: what is above a
    root is trusted, so this is an ordinary ``mkdir -p``."""
    missing = [p for p in (root, *root.parents) if not p.is_dir()]
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                raise
        fd = os.open(d.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fsync(fd, "root.created")
        finally:
            os.close(fd)


def _step(fd: int, part: str, at: tuple[Path, tuple[str, ...]], create: bool) -> int:
    """A descriptor of ``part`` in the directory ``fd`` (``at``: the root and the
    parts up to ``part``, the path an error names)."""
    try:
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise
        try:
            os.mkdir(part, 0o755, dir_fd=fd)
        except FileExistsError:
            pass  # made meanwhile; opened below like any other
        else:
            fsync(fd, "dir.created")  # the new name, durable before anything goes into it
        return os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as err:
        here = at[0].joinpath(*at[1])
        if err.errno in (errno.ENOTDIR, errno.ELOOP):
            raise _refusal(fd, part, here) from err
        err.filename = str(here)  # the whole path, not the name relative to its parent
        raise


@contextmanager
def parent(root: Path, path: Path, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """The descriptor of ``path``'s directory (walked as ``directory`` does) and
    ``path``'s own name in it: every operation on ``path`` is relative to them."""
    parts = _parts(root, path)
    if not parts:
        raise Refused(f"refused: {path} is the root itself, not a name inside it")
    with _directory_at(root, parts[:-1], create) as fd:
        yield fd, parts[-1]
