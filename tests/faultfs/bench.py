"""``python -m faultfs.bench [--mb 100] [--dir DIR] [--volatile]``: sequential
write + fsync and read-back throughput through a faultfs mount beside the same on
its backing directory (run with ``tests/`` on ``PYTHONPATH``).

Owns nothing the tests use; it measures what the mount costs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from .mount import FaultFS

_CHUNK = 1 << 20


def _write(path: Path, mb: int) -> float:
    block = os.urandom(_CHUNK)
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(mb):
            os.write(fd, block)
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def _read(path: Path) -> float:
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while os.read(fd, _CHUNK):
            pass
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--dir", default=None, help="where to put backing and mount")
    parser.add_argument("--volatile", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        with FaultFS(base / "backing", base / "mnt", volatile=args.volatile) as fs:
            results = {}
            for label, where in (("backing", fs.backing), ("mount", fs.mount)):
                w = _write(where / f"bench-{label}", args.mb)
                r = _read(where / f"bench-{label}")
                results[label] = (w, r)
                (where / f"bench-{label}").unlink()
            # overwrite in place (the volatile journal's costly case: old bytes saved)
            path = fs.path("bench-overwrite")
            _write(path, args.mb)
            ow = _write(path, args.mb)
        for label, (w, r) in results.items():
            print(
                f"{label:8s} write+fsync {args.mb / w:8.1f} MB/s ({w:.2f} s)   "
                f"read {args.mb / r:8.1f} MB/s ({r:.2f} s)"
            )
        print(f"mount    overwrite+fsync {args.mb / ow:8.1f} MB/s ({ow:.2f} s)")


if __name__ == "__main__":
    main()
