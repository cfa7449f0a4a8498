"""Deflate engines and levels on demo JSONL, against the system's `gzip -6`.

    python bench/codec.py [--mib 64]

Prints one table: engine, level, compress (with sha256 and CRC-32) MB/s, inflate
MB/s, size relative to
`gzip -6`. This is how the default (`isal`, level 1) was chosen: see
docs/performance.md.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import Codec, compress_fd, inflate
from coldkeep.core.ops.demo import write_jsonl

CANDIDATES = [
    Codec("isal", 0),
    Codec("isal", 1),
    Codec("isal", 2),
    Codec("isal", 3),
    Codec("zlib-ng", 1),
    Codec("zlib-ng", 6),
    Codec("zlib", 1),
    Codec("zlib", 6),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64, help="size of the JSONL sample")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "sample.jsonl"
        size = write_jsonl(src, random.Random(1), "unit-0001", args.mib << 20, 1_700_000_000_000)
        t0 = time.perf_counter()
        gz6 = subprocess.run(["gzip", "-6", "-c", str(src)], capture_output=True, check=True)
        gzip_s = time.perf_counter() - t0
        ref = len(gz6.stdout)
        print(f"sample: {size / 1e6:.0f} MB of JSONL; gzip -6: {size / gzip_s / 1e6:.0f} MB/s")
        print(f"{'engine':<8} {'level':>5} {'compress MB/s':>14} {'inflate MB/s':>13}", end="")
        print(f" {'size/gzip-6':>12}")
        for codec in CANDIDATES:
            dest = Path(tmp) / f"{codec.engine}-{codec.level}.gz"
            fd = os.open(src, os.O_RDONLY)
            t0 = time.perf_counter()
            packed = compress_fd(
                fd, dest, name=b"sample.jsonl", mtime_ns=0, codec=codec, cancel=CancelToken()
            )
            comp = time.perf_counter() - t0
            os.close(fd)
            t0 = time.perf_counter()
            inflate(dest, cancel=CancelToken())
            inf = time.perf_counter() - t0
            print(
                f"{codec.engine:<8} {codec.level:>5} {size / comp / 1e6:>14.0f} "
                f"{size / inf / 1e6:>13.0f} {packed.gz_bytes / ref:>12.3f}"
            )
            dest.unlink()


if __name__ == "__main__":
    main()
