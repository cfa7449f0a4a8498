"""Which libfuse mfusepy loads: libfuse 3, named to it before it is imported,
for ``coldkeep mount`` and for the tests' fault-injection filesystem alike.

mfusepy picks its library once, as it is imported: ``FUSE_LIBRARY_PATH`` when
set, else ``find_library("fuse")``, which finds libfuse 2 (``libfuse.so.2``)
wherever it is installed beside libfuse 3 — borgbackup and older sshfs bring
it — and only without it ``find_library("fuse3")``. Both mounts are written
against libfuse 3 (its mount options, rename's flags, ``fusermount3``): over
libfuse 2 the kit's mount fails with nothing but a status, and ``mount``
would run on a library it was never tested on.

Invariants:
- ``mfusepy()`` returns mfusepy bound to libfuse 3, or raises ``NoLibfuse3``,
  one line saying what is missing and what to install.
- An operator's own ``FUSE_LIBRARY_PATH`` is used as it is, and refused the
  same way when it is not libfuse 3.
"""

from __future__ import annotations

import ctypes.util
import functools
import os
from types import ModuleType

from ..base.errors import ColdkeepError

ENV = "FUSE_LIBRARY_PATH"
INSTALL = "apt-get install fuse3 libfuse3-3; dnf install fuse3"


class NoLibfuse3(ColdkeepError):
    """libfuse 3 cannot be loaded here: the message says what to install."""


MISSING = f"libfuse 3 is not installed ({INSTALL})"


@functools.cache
def _found() -> str | None:
    # find_library runs ldconfig (and file) in subprocesses: once a process.
    return ctypes.util.find_library("fuse3")


def _named() -> str | None:
    """The library mfusepy is to load: the operator's ``FUSE_LIBRARY_PATH``,
    else libfuse 3 as the loader finds it (its soname); None without either."""
    return os.environ.get(ENV) or _found()


def problem() -> str | None:
    """Why libfuse 3 cannot be had here, naming what to install; None when it
    can (or the operator named a library in ``FUSE_LIBRARY_PATH``)."""
    return None if _named() else MISSING


def mfusepy() -> ModuleType:
    """mfusepy, over libfuse 3; ``NoLibfuse3`` when it cannot be."""
    name = _named()
    if name is None:
        raise NoLibfuse3(MISSING)
    # By name, not by mfusepy's own lookup: that takes libfuse 2 first where
    # both are installed. Left set, so whichever import of mfusepy in this
    # process comes first, it loads this one.
    os.environ[ENV] = name
    try:
        import mfusepy  # type: ignore[import-untyped, import-not-found, unused-ignore]  # noqa: PLC0415
    except OSError as err:  # the library named cannot be loaded
        raise NoLibfuse3(f"cannot load {name} ({err}): {INSTALL}") from None
    major, minor = mfusepy.fuse_version_major, mfusepy.fuse_version_minor
    if major != 3:
        raise NoLibfuse3(
            f"mfusepy loaded libfuse {major}.{minor} ({mfusepy._libfuse_path}), not libfuse 3: "
            f"set {ENV} to libfuse3.so.3 ({INSTALL})"
        )
    return mfusepy  # type: ignore[no-any-return, unused-ignore]  # untyped: Any
