"""``renameat2(2)`` through ctypes (Python's ``os`` has no binding for it)."""

from __future__ import annotations

import ctypes
import os

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)
_renameat2 = getattr(_libc, "renameat2", None)


def renameat2(src: str, dst: str, flags: int) -> None:
    """Rename ``src`` to ``dst`` with ``flags``; raises OSError like ``os.rename``."""
    if _renameat2 is None:
        raise OSError(38, "libc has no renameat2", src)  # ENOSYS
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), src, None, dst)
