"""The protocol's floor: the steps coldkeep takes for each file, bare.

Each file is read once through sha256 and ISA-L level 1 into a partial gzip,
the partial fsynced, read back through inflate and sha256 and compared, renamed
into place, its directory fsynced, the source unlinked and its directory
fsynced. Nothing else: no manifest, no events, no identity checks or leases, no
walk beneath a root, no bundles (every file alone), in as many threads as
coldkeep runs workers. The codec and every system call let go of the GIL, and
the Python left is a few calls per MiB: what the floor takes is about what the
same steps would take outside the interpreter, on this machine, in threads.
``durable=False`` leaves out every fsync: the codec and the page cache alone.
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import threading
import time
from pathlib import Path

from isal import isal_zlib

CHUNK = 1 << 20


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _one(src: Path, dst: Path, durable: bool) -> None:
    sha, comp = hashlib.sha256(), isal_zlib.compressobj(1, isal_zlib.DEFLATED, 31)
    partial = dst.with_name(dst.name + ".partial")
    fd = os.open(src, os.O_RDONLY)
    out = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while chunk := os.read(fd, CHUNK):
            sha.update(chunk)
            os.write(out, comp.compress(chunk))
        os.write(out, comp.flush())
        if durable:
            os.fsync(out)
    finally:
        os.close(fd)
        os.close(out)
    back, inflater = hashlib.sha256(), isal_zlib.decompressobj(31)
    fd = os.open(partial, os.O_RDONLY)
    try:
        while data := os.read(fd, CHUNK):
            while data:
                back.update(inflater.decompress(data, CHUNK))
                data = inflater.unconsumed_tail
    finally:
        os.close(fd)
    if back.digest() != sha.digest():
        raise SystemExit(f"{partial}: does not read back as {src}")
    os.rename(partial, dst)
    if durable:
        _fsync_dir(dst.parent)
    os.unlink(src)
    if durable:
        _fsync_dir(src.parent)


def floor(tree: Path, work: Path, *, threads: int, durable: bool) -> float:
    """The floor's seconds over a copy of ``tree`` (made in ``work``, then removed)."""
    live, out = work / "floor-live", work / "floor-out"
    shutil.copytree(tree, live)
    jobs: queue.SimpleQueue[tuple[Path, Path]] = queue.SimpleQueue()
    for src in sorted(p for p in live.rglob("*.jsonl") if p.is_file()):
        dst = out / src.relative_to(live).with_suffix(".jsonl.gz")
        dst.parent.mkdir(parents=True, exist_ok=True)
        jobs.put((src, dst))
    os.sync()
    failed: list[BaseException] = []

    def worker() -> None:
        try:
            while True:
                try:
                    src, dst = jobs.get_nowait()
                except queue.Empty:
                    return
                _one(src, dst, durable)
        except BaseException as err:  # noqa: BLE001 (reported below, after the join)
            failed.append(err)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    seconds = time.perf_counter() - t0
    shutil.rmtree(live)
    shutil.rmtree(out)
    if failed:
        raise failed[0]
    return seconds
