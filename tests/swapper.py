"""An attacker with write access to a directory coldkeep works in: swaps a
directory for a symlink to somewhere else and back, atomically
(``renameat2(RENAME_EXCHANGE)``), as fast as it can, until stdin closes.

    python tests/swapper.py DIR TARGET

``DIR`` must be a directory; ``TARGET`` is where the symlink points. The symlink
lives beside ``DIR`` as ``.DIR-swap`` while ``DIR`` is the real directory. Prints
``swapping`` once it runs and, at the end, how many swaps it made; leaves ``DIR``
the real directory again.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from pathlib import Path

RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a: Path, b: Path) -> None:
    if _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


def main() -> int:
    real, target = Path(sys.argv[1]), Path(sys.argv[2])
    swap = real.with_name(f".{real.name}-swap")
    swap.symlink_to(target, target_is_directory=True)
    done = threading.Event()

    def until_stdin_closes() -> None:
        sys.stdin.read()
        done.set()

    threading.Thread(target=until_stdin_closes, daemon=True).start()
    swaps = 0
    print("swapping", flush=True)
    while not done.is_set():
        exchange(real, swap)  # DIR is now the symlink
        exchange(real, swap)  # and the real directory again
        swaps += 2
    swap.unlink()
    print(swaps, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
