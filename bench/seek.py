"""Random access inside one large archived file, side by side in one run: seek
points against the checkpoint cache (a gzip written without them) and against
inflating from the start (a plain gzip's only way), with the size and the
compression throughput that the points cost.

    python bench/seek.py [--mib 1024] [--reads 2000] [--engine isal --level 1]

Builds a JSONL file of ``--mib`` MiB (log-like, from the demo's generator) and
``--other-mib`` MiB each of random bytes and of base64 text (random-ish),
compresses each through the real codec with and without seek points (twice,
alternating, the faster run kept), then reads ``--reads`` 4 KiB ranges at
random offsets of the JSONL gzip (the page cache warm, as after a first read).
Prints one table; docs/performance.md keeps its figures.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import os
import random
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from zlib_ng import zlib_ng

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import SEEK_EVERY, Codec, Packed, compress_fd
from coldkeep.core.files.reader import GzipAt
from coldkeep.core.files.seek import SeekReader, read_from_points
from coldkeep.core.ops.demo import write_jsonl

READ = 4096
_PIECE = 32 << 20


def build_jsonl(path: Path, mib: int) -> int:
    """``mib`` MiB of the demo's JSONL, written a piece at a time."""
    rnd = random.Random(1)
    piece = path.with_suffix(".piece")
    with path.open("wb") as out:
        while out.tell() < mib << 20:
            want = min(_PIECE, (mib << 20) - out.tell())
            write_jsonl(piece, rnd, "unit-0001", want, 1_700_000_000_000)
            out.write(piece.read_bytes()[:want])
    piece.unlink()
    return path.stat().st_size


def build_other(folder: Path, mib: int) -> dict[str, Path]:
    rnd = random.Random(2)
    raw, text = folder / "random.bin", folder / "base64.txt"
    with raw.open("wb") as a, text.open("wb") as b:
        for _ in range(mib):
            a.write(rnd.randbytes(1 << 20))
            b.write(base64.b64encode(rnd.randbytes(3 << 18)))
    return {"random bytes": raw, "base64 text": text}


def pack(src: Path, dest: Path, codec: Codec) -> tuple[Packed, float]:
    """``src`` through the real codec; the process's CPU time it took (the
    cores are shared: wall time swings by a fifth from one run to the next)."""
    fd = os.open(src, os.O_RDONLY)
    try:
        t0 = time.process_time()
        packed = compress_fd(fd, dest, name=src.name.encode(), mtime_ns=0, codec=codec,
                             cancel=CancelToken())  # fmt: skip
        return packed, time.process_time() - t0
    finally:
        os.close(fd)


def side_by_side(src: Path, codec: Codec, every: int) -> dict[int, tuple[Packed, float, Path]]:
    """``src`` compressed without and with seek points, three times each,
    alternating; the fastest run of each kept (both gzips left for the reads)."""
    best: dict[int, tuple[Packed, float, Path]] = {}
    for _ in range(3):
        for n in (0, every):
            dest = src.with_name(f"{src.name}.{n}.gz")
            packed, took = pack(src, dest, Codec(codec.engine, codec.level, n))
            if n not in best or took < best[n][1]:
                best[n] = (packed, took, dest)
    return best


def latencies(read: Callable[[int], bytes], offsets: list[int]) -> list[float]:
    out = []
    for offset in offsets:
        t0 = time.perf_counter()
        read(offset)
        out.append(time.perf_counter() - t0)
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def ms3(xs: list[float]) -> str:
    return f"{pct(xs, 0.5):.2f} / {pct(xs, 0.99):.2f} / {max(xs) * 1000:.2f}"


def checkpoint_bytes() -> int:
    """What one kept inflater copy costs, by the process's resident memory:
    400 copies of an inflater that has filled its window."""
    d = zlib_ng.decompressobj(31)
    d.decompress(gzip.compress(random.Random(3).randbytes(1 << 17)))
    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        return int(Path("/proc/self/statm").read_text().split()[1]) * page

    before = rss()
    kept = [d.copy() for _ in range(400)]
    grown = rss() - before
    del kept
    return grown // 400


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024, help="size of the JSONL file")
    ap.add_argument("--other-mib", type=int, default=64, help="size of the random-ish files")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--every", type=int, default=SEEK_EVERY >> 20, help="MiB between points")
    ap.add_argument("--engine", default="isal")
    ap.add_argument("--level", type=int, default=1)
    args = ap.parse_args()
    codec = Codec(args.engine, args.level)
    every = args.every << 20
    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        folder = Path(tmp)
        src = folder / "big.jsonl"
        size = build_jsonl(src, args.mib)
        runs = side_by_side(src, codec, every)
        plain, took0, gz0 = runs[0]
        pointed, took1, gz1 = runs[every]
        mb = size / 1e6
        rows.append((f"compress {args.mib} MiB JSONL, MB/s of CPU", f"{mb / took1:.0f}",
                     f"{mb / took0:.0f}", f"{(took1 / took0 - 1) * 100:+.1f} % time"))  # fmt: skip
        rows.append(("size, JSONL (gz bytes)", f"{pointed.gz_bytes:,}", f"{plain.gz_bytes:,}",
                     f"{(pointed.gz_bytes / plain.gz_bytes - 1) * 100:+.3f} %"))  # fmt: skip
        costs = []
        for n in (1, 2, 4, 8):
            other = Codec(codec.engine, codec.level, n << 20)
            got = pack(src, folder / "n.gz", other)[0].gz_bytes
            costs.append(f"{n}: {(got / plain.gz_bytes - 1) * 100:+.2f} %")
        rows.append(("size cost, JSONL, by MiB between points", "  ".join(costs), "", ""))
        src.unlink()
        for name, other in build_other(folder, args.other_mib).items():
            o = side_by_side(other, codec, every)
            a, b = o[every][0].gz_bytes, o[0][0].gz_bytes
            rows.append((f"size, {args.other_mib} MiB {name}", f"{a:,}", f"{b:,}",
                         f"{(a / b - 1) * 100:+.3f} %"))  # fmt: skip
        rows += reads(size, gz0, gz1, pointed.seek_points, args.reads)
    print(f"JSONL {size / 2**20:.0f} MiB, engine {codec.engine} level {codec.level}, "
          f"seek points every {args.every} MiB; {args.reads} reads of {READ} B")  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    head = ("what", "seek points", "checkpoint cache / none", "note")
    widths = [max(w, len(h)) for w, h in zip(widths, head, strict=True)]
    for row in (head, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def reads(
    size: int, gz0: Path, gz1: Path, points: str | None, n: int
) -> list[tuple[str, str, str, str]]:
    rnd = random.Random(7)
    offsets = [rnd.randrange(max(1, size - READ)) for _ in range(n)]
    plain, pointed = GzipAt(gz0, None, "local"), GzipAt(gz1, None, "local")
    cache = SeekReader()
    subprocess.run(["cat", str(gz0), str(gz1)], stdout=subprocess.DEVNULL, check=True)
    t0 = time.perf_counter()
    SeekReader().read(pointed, size - READ, READ, seek_points=points)
    first_points = time.perf_counter() - t0
    t0 = time.perf_counter()
    cache.read(plain, size - READ, READ, seek_points=None)
    first = time.perf_counter() - t0
    with_points = latencies(lambda o: SeekReader().read(pointed, o, READ, seek_points=points),
                            offsets)  # fmt: skip
    cached = latencies(lambda o: cache.read(plain, o, READ, seek_points=None), offsets)
    rows = [
        ("4 KiB read p50 / p99 / max (ms)", ms3(with_points), ms3(cached),
         "cache: after its first pass"),
        ("first read at the end (s)", f"{first_points:.3f}", f"{first:.2f}",
         "cache: walks the whole gzip once"),
        ("checkpoint cache held", "none",
         f"{cache.checkpoints()} x {checkpoint_bytes() >> 10} KiB", "bounded: 512 copies"),
    ]  # fmt: skip
    with ThreadPoolExecutor(4) as pool:
        t0 = time.perf_counter()
        one = lambda o: latencies(  # noqa: E731
            lambda x: cache.read(pointed, x, READ, seek_points=points), [o])[0]  # fmt: skip
        lat = list(pool.map(one, offsets))
        wall = time.perf_counter() - t0
    rows.append(("4 threads: p50 / p99 / max (ms)", ms3(lat), "",
                 f"{n / wall:.0f} reads/s in all"))  # fmt: skip
    some = offsets[:5]
    t0 = time.perf_counter()
    for o in some:  # no points given: an inflate from the member's start
        read_from_points(plain, [], o, READ)
    from_start = (time.perf_counter() - t0) / len(some)
    rows.append(("inflate from the start", "", f"{from_start * 1000:.0f} ms",
                 "mean of 5: a plain gzip's only way"))  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
