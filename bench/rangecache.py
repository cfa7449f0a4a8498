"""The remote read cache's block size, chosen by measurement: each candidate read
against moto's S3 server (a child process on 127.0.0.1) and a folder, from worker
threads with the store's loop on a thread of its own (as the mount runs it).

    python bench/rangecache.py [--quick]

For each block size:
  miss           a 4 KiB read at a random offset of a block not cached: one
                 ranged GET of the block (p50 / p99 over distinct blocks)
  sequential     a cold read of the whole object in 1 MiB reads, as a gzip
                 inflater reads (MB/s), the GETs it took
  member         a 20 KiB window (a bundle member): GETs, bytes fetched
moto copies the whole object for each ranged GET (bench/s3client.py), so the
object is kept small (16 MiB) and a 1-byte GET's time is printed as its floor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import boto3
from remote import CREDENTIALS, Moto

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.remote.filestore import FileStore
from coldkeep.core.remote.objectstore import ObjectStore
from coldkeep.core.remote.rangecache import RangeCache, Window
from coldkeep.core.remote.s3store import S3Store

MIB = 1 << 20
KEY = "site/files/big.gz"
BLOCKS = (64 << 10, 256 << 10, 1 << 20, 4 << 20)


def p(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def one_size(store: ObjectStore, loop: asyncio.AbstractEventLoop, size: int, block: int) -> str:
    rnd = random.Random(block)
    window = Window(KEY, 0, size)
    with tempfile.TemporaryDirectory() as tmp:
        cache = RangeCache.open(store, Path(tmp), 1 << 30, loop, block_bytes=block)
        try:
            misses = []
            for index in rnd.sample(range(size // block), min(40, size // block)):
                at = index * block + rnd.randrange(block - 4096)
                t0 = time.perf_counter()
                cache.read(window, at, 4096)
                misses.append((time.perf_counter() - t0) * 1000)
        finally:
            cache.close()
        cache = RangeCache.open(store, Path(tmp), 1 << 30, loop, block_bytes=block)
        try:
            f = cache.file(KEY, size)
            t0 = time.perf_counter()
            while f.read(MIB):
                pass
            seq = size / MIB / (time.perf_counter() - t0)
            seq_gets = cache.stats.gets
            member = cache.file(KEY, 20 << 10, size // 2 - 5000)
            before = cache.stats
            cache.close()
            cache = RangeCache.open(store, Path(tmp), 1 << 30, loop, block_bytes=block)
            member = cache.file(KEY, 20 << 10, size // 2 - 5000)
            member.read()
            after = cache.stats
            assert before is not None
        finally:
            cache.close()
    return (
        f"block {block >> 10:>5} KiB  miss p50 {statistics.median(misses):6.1f} ms  "
        f"p99 {p(misses, 0.99):6.1f} ms   sequential {seq:7.1f} MB/s in {seq_gets:4d} GETs   "
        f"20 KiB member: {after.gets} GET, {after.bytes_fetched} bytes"
    )


def floor(store: ObjectStore, loop: asyncio.AbstractEventLoop) -> float:
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        asyncio.run_coroutine_threadsafe(store.read_range(KEY, 0, 1), loop).result()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    size = (4 if args.quick else 16) * MIB
    data = random.Random(1).randbytes(size)
    os.environ.update(CREDENTIALS)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    moto = Moto()
    try:
        client = boto3.client("s3", endpoint_url=moto.endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="bench")
        client.put_object(Bucket="bench", Key=f"p/{KEY}", Body=data)
        remote = RemoteSettings(url="s3://bench/p", endpoint_url=moto.endpoint, site="site")
        s3 = S3Store(remote)
        with tempfile.TemporaryDirectory() as folder:
            (Path(folder) / KEY).parent.mkdir(parents=True)
            (Path(folder) / KEY).write_bytes(data)
            for name, store in (("moto", s3), ("folder", FileStore(Path(folder)))):
                print(f"{name}: {size >> 20} MiB object, a 1-byte GET {floor(store, loop):.1f} ms")
                for block in BLOCKS:
                    print("  " + one_size(store, loop, size, block), flush=True)
        asyncio.run_coroutine_threadsafe(s3.close(), loop).result()
    finally:
        moto.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
    sys.exit(0)


if __name__ == "__main__":
    main()
