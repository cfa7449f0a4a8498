"""The mfusepy glue: mounting a ``Passthrough`` over libfuse3 and the wrappers
mfusepy gets wrong or leaves out. Imported after ``libfuse.mfusepy()`` (the
server does that), so mfusepy is bound to libfuse 3, never to libfuse 2.

Owns the mount options and a ``FUSE`` subclass that
- passes ``rename``'s flags on (mfusepy 3.1 drops them, so
  ``renameat2(RENAME_NOREPLACE)`` would silently replace the target);
- passes the file handle to ``truncate``/``chmod``/``chown``/``utimens`` when the
  kernel gives one (``ftruncate`` on an unlinked open file works), and turns
  ``UTIME_NOW``/``UTIME_OMIT`` into "now"/"leave as is" instead of nonsense times.
"""

from __future__ import annotations

import time
from typing import Any

import mfusepy  # type: ignore[import-untyped, import-not-found, unused-ignore]

from .passthrough import Passthrough

_UTIME_NOW = (1 << 30) - 1
_UTIME_OMIT = (1 << 30) - 2


def _fh(fip: Any) -> int | None:
    return int(fip.contents.fh) if fip else None


def _ns(ts: Any) -> int | None:
    if ts.tv_nsec == _UTIME_OMIT:
        return None
    if ts.tv_nsec == _UTIME_NOW:
        return time.time_ns()
    return int(ts.tv_sec) * 1_000_000_000 + int(ts.tv_nsec)


class Kernel(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy's FUSE with the fixes above (libfuse 3 only)."""

    def _s(self, path: bytes | None) -> str | None:
        return None if path is None else path.decode(self.encoding, self.errors)

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return int(self.operations.rename(self._s(old), self._s(new), flags))

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        return int(self.operations.truncate(self._s(path), length, _fh(fip)))

    def chmod_fuse_3(self, path: bytes | None, mode: int, fip: Any) -> int:
        return int(self.operations.chmod(self._s(path), mode, _fh(fip)))

    def chown_fuse_3(self, path: bytes | None, uid: int, gid: int, fip: Any) -> int:
        if uid == (1 << 32) - 1:
            uid = -1
        if gid == (1 << 32) - 1:
            gid = -1
        return int(self.operations.chown(self._s(path), uid, gid, _fh(fip)))

    def utimens_fuse_3(self, path: bytes | None, buf: Any, fip: Any) -> int:
        times = (_ns(buf.contents.actime), _ns(buf.contents.modtime)) if buf else None
        return int(self.operations.utimens(self._s(path), times, _fh(fip)))


def serve(
    ops: Passthrough, mountpoint: str, *, allow_other: bool = False, attr_timeout: float = 0.0
) -> None:
    """Mount ``ops`` at ``mountpoint`` and serve until unmounted (multithreaded)."""
    options: dict[str, Any] = {
        "foreground": True,
        "fsname": "faultfs",
        "subtype": "faultfs",
        "default_permissions": True,
        "use_ino": True,  # st_ino is the backing inode: identities survive remounts
        "hard_remove": True,  # no .fuse_hidden files: an unlinked open file just works
        "auto_unmount": True,  # a killed server never leaves a dead mount behind
        # 0: every stat asks the server. Hard links are separate kernel inodes under
        # libfuse's path API, and the backing may change underneath; a cache would
        # show stale nlink/size/mtime for up to this long (but costs fewer calls).
        "attr_timeout": attr_timeout,
    }
    if allow_other:
        options["allow_other"] = True
    Kernel(ops, mountpoint, **options)
