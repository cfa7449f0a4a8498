"""Reading the archive without restoring it: ``coldkeep mount``, ``cat`` and
``find`` beside what an operator would otherwise use on the same files —
ratarmount on a tar.gz of them, ``tar -xzf`` then read, ``gunzip -c``.

    python bench/readpath.py [--quick] [--entries N]

The data: ``SMALL`` old JSONL files of 4–64 KiB (packed into bundles) and one
big JSONL file (1 GiB; 2 MiB with --quick), archived by a real ``coldkeep
pass``; a ``tar -czf`` of the same live files is the anchors' copy. Then the
manifest gets ``--entries`` more rows (copies of one entry at other paths, their
gzips never read) for the rows at scale.

Rows:
  mount ready           spawn to mounted (``os.path.ismount``): interpreter,
                        imports, what the mount reads first; ratarmount's first
                        mount of the tar.gz builds its index
  read every small file ``find -type f -print0 | xargs -0 cat``, cold mount,
                        against the same through ratarmount and ``tar -xzf``
                        followed by the same read of the extracted tree
  sequential read       ``cat`` of the big file through the mount against
                        ``gunzip -c`` of its gzip
  4 KiB random reads    ``pread`` at random offsets of the big file through the
                        mount (p99), against the same through ratarmount
  one small file        ``cat_file`` in process (what ``coldkeep cat`` does
                        after its imports) of a bundle member, p99
  at scale              mount ready, the server's peak RSS and ``find DIR -type
                        f | wc -l`` with ``--entries`` more rows; ``find`` and
                        ``versions`` in process

ratarmount is an anchor, not a dependency: ``make bench`` installs it into a
venv of its own (bench/.ratarmount); without it its columns say so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine
from contextlib import suppress
from pathlib import Path
from typing import Any, BinaryIO

from files import COLDKEEP, DAY_MS, coldkeep, site, write_small_tree
from mountkit import add_rows, mounted
from report import Row, met, pct, print_table

from coldkeep.core.ops.demo import write_jsonl

ROOT = Path(__file__).resolve().parent.parent
RATARMOUNT = ROOT / "bench" / ".ratarmount" / "bin" / "ratarmount"
KIB4 = 4096


def ratarmount() -> str | None:
    found = shutil.which("ratarmount")
    if found:
        return found
    return str(RATARMOUNT) if RATARMOUNT.exists() else None


def _timed(cmd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, shell=True, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _drop_caches() -> None:
    """Cold reads: the page cache of the gzips and the tar.gz let go (as root)."""
    os.sync()
    with suppress(OSError):
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def coldkeep_mount(ck: Path, mnt: Path) -> list[str]:
    return [str(COLDKEEP), "mount", "--config", str(ck / "coldkeep.toml"), str(mnt)]


def ratarmount_cmd(tgz: Path, mnt: Path) -> list[str]:
    exe = ratarmount()
    assert exe is not None
    return [exe, "-f", str(tgz), str(mnt)]


def _files(top: Path) -> str:
    """A find of the small files under ``top`` (a mount's .versions not walked)."""
    return f"find {top} -path {top}/.versions -prune -o -path '*unit-*' -type f"


def random_reads(path: Path, n: int, seed: int) -> list[float]:
    """Seconds per 4 KiB ``pread`` at ``n`` random offsets of ``path``."""
    rnd = random.Random(seed)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        times = []
        for _ in range(n):
            off = rnd.randrange(0, size - KIB4)
            t0 = time.perf_counter()
            got = os.pread(fd, KIB4, off)
            times.append(time.perf_counter() - t0)
            assert len(got) == KIB4
    finally:
        os.close(fd)
    return times


def build(work: Path, small: int, big_mb: int) -> tuple[Path, Path, Path]:
    """The site after its pass, the tar.gz of the same live files, the big file's gzip."""
    tree = work / "tree"
    write_small_tree(tree, small, seed=7)
    old = int(time.time() * 1000) - 60 * DAY_MS
    rnd = random.Random(8)
    write_jsonl(tree / "big" / "big.jsonl", rnd, "big", big_mb << 20, old)
    (tree / "big" / ".closed").write_text("closed\n")
    tgz = work / "tree.tar.gz"
    subprocess.run(["tar", "-czf", str(tgz), "-C", str(tree), "."], check=True)
    ck = site(work / "site", tree)
    shutil.rmtree(tree)
    coldkeep(ck, "pass")
    [big_gz] = (ck / "archive" / "files").rglob("big.jsonl.gz")
    return ck, tgz, big_gz


def _ratio(anchor: float, ours: float) -> str:
    return f"{anchor / ours:.2f}x" if ours > 0 else ""


def members(ck: Path) -> list[str]:
    """Up to 200 relpaths of ~20 KiB files archived as bundle members."""
    with sqlite3.connect(ck / "archive" / "coldkeep.db") as con:
        return [
            r[0]
            for r in con.execute(
                "SELECT relpath FROM entries WHERE member_offset IS NOT NULL "
                "AND bytes BETWEEN 16384 AND 24576 ORDER BY id LIMIT 200"
            )
        ]


def _read_whole(path: Path) -> float:
    """Seconds to open ``path`` and read it to its end."""
    t0 = time.perf_counter()
    with path.open("rb", buffering=0) as f:
        while f.read(1 << 20):
            pass
    return time.perf_counter() - t0


def small_file_p99(ck: Path, relpaths: list[str]) -> float:
    """``cat_file`` in process of each of ``relpaths`` to /dev/null: p99 seconds."""
    from coldkeep.core.base.config import load_settings
    from coldkeep.core.ops.cat import cat_file

    settings = load_settings(ck / "coldkeep.toml")

    async def each(out: BinaryIO) -> list[float]:
        times = []
        for rel in relpaths:
            t0 = time.perf_counter()
            done = await cat_file(settings, rel, None, out)
            times.append(time.perf_counter() - t0)
            assert done.streamed.problem is None, done.streamed.problem
        return times

    with open(os.devnull, "wb") as out:
        return pct(asyncio.run(each(out)), 99)


def read_rows(work: Path, ck: Path, tgz: Path, big_gz: Path, small: int) -> list[Row]:
    rat = ratarmount()
    rows: list[Row] = []
    _drop_caches()
    with mounted(coldkeep_mount(ck, work / "mnt"), work / "mnt", work / "ck.log") as m:
        ready = m.ready
        member = [m.mnt / rel for rel in members(ck)]
        opened = [_read_whole(p) for p in member]
        read_all = _timed(f"{_files(m.mnt)} -print0 | xargs -0 cat")
        seq = _timed(f"cat {m.mnt}/big/big.jsonl")
        rand = random_reads(m.mnt / "big" / "big.jsonl", 400, seed=1)
    gunzip = _timed(f"gunzip -c {big_gz}")
    r_ready = r_all = float("nan")
    r_rand: list[float] = []
    if rat:
        _drop_caches()
        with mounted(ratarmount_cmd(tgz, work / "rmnt"), work / "rmnt", work / "rat.log") as r:
            r_ready = r.ready
            r_all = _timed(f"{_files(r.mnt)} -print0 | xargs -0 cat")
            r_rand = random_reads(r.mnt / "big" / "big.jsonl", 400, seed=1)
    out = work / "untarred"
    out.mkdir()
    _drop_caches()
    untar = _timed(f"tar -xzf {tgz} -C {out} && {_files(out)} -print0 | xargs -0 cat")
    shutil.rmtree(out)
    none = "" if rat else "ratarmount: not installed"
    p99 = pct(rand, 99)
    p99_member = pct(opened, 99)
    rows += [
        (
            f"a ~20 KiB bundle member read whole through the mount, p99 over {len(opened)}",
            f"{p99_member * 1e3:.1f} ms",
            "",
            "",
            "<= 5 ms",
            met(p99_member <= 0.005),
        ),
        (
            f"mount ready, {small:,} small files + 1 big (vs ratarmount's first mount)",
            f"{ready:.2f} s",
            none or f"{r_ready:.2f} s",
            "" if none else _ratio(r_ready, ready),
            "",
            "",
        ),
        (
            "read every small file through the mount (vs ratarmount on the tar.gz)",
            f"{read_all:.2f} s",
            none or f"{r_all:.2f} s",
            "" if none else _ratio(r_all, read_all),
            "",
            "",
        ),
        (
            "  vs tar -xzf, then the same read",
            f"{read_all:.2f} s",
            f"{untar:.2f} s",
            _ratio(untar, read_all),
            "",
            "",
        ),
        (
            "sequential read of the big file through the mount (vs gunzip -c of its gzip)",
            f"{seq:.2f} s",
            f"{gunzip:.2f} s",
            _ratio(gunzip, seq),
            ">= 1.0x",
            met(gunzip / seq >= 1.0),
        ),
        (
            "4 KiB random reads in the big file through the mount, p99 (vs ratarmount)",
            f"{p99 * 1e3:.1f} ms",
            none or f"{pct(r_rand, 99) * 1e3:.1f} ms",
            "" if none else _ratio(pct(r_rand, 99), p99),
            "<= 20 ms",
            met(p99 <= 0.020),
        ),
    ]
    return rows


def member_row(ck: Path) -> Row:
    rels = members(ck)
    p99 = small_file_p99(ck, rels)
    return (
        "  the same through cat_file in process (its manifest opened each time), p99",
        f"{p99 * 1e3:.1f} ms",
        "",
        "",
        "",
        "",
    )


def scale_rows(work: Path, ck: Path, entries: int) -> list[Row]:
    from coldkeep.core.files.find import find, versions

    add_rows(ck / "archive" / "coldkeep.db", entries)
    _drop_caches()
    with mounted(coldkeep_mount(ck, work / "mnt2"), work / "mnt2", work / "ck2.log") as m:
        ready = m.ready
        t0 = time.perf_counter()
        count = subprocess.run(
            f"find {m.mnt} -path {m.mnt}/.versions -prune -o -type f -print | wc -l",
            shell=True,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        find_s = time.perf_counter() - t0
        assert int(count) >= entries, count
        rss = m.rss_mb()
    db = ck / "archive" / "coldkeep.db"
    live = ck / "live"

    def timed(coro: Coroutine[Any, Any, object]) -> float:
        async def dropped() -> None:
            # Not the result: asyncio.run's SIGINT handler, put back on the way
            # out, reprs the main task (Python 3.11), result and all.
            await coro

        t0 = time.perf_counter()
        asyncio.run(dropped())
        return time.perf_counter() - t0

    mid = f"many/d{entries // 200:05d}/f042"
    find_sub = timed(find(db, mid, live))
    find_glob = timed(find(db, "many/d0*/f04[2]", live))
    vers = timed(versions(db, mid, live))
    n = f"{entries:,}"
    return [
        (f"mount ready at {n} entries", f"{ready:.2f} s", "", "", "<= 1 s", met(ready <= 1)),
        ("  server's peak RSS", f"{rss:.0f} MB", "", "", "<= 200 MB", met(rss <= 200)),
        (
            "  find DIR -type f | wc -l (.versions pruned)",
            f"{find_s:.1f} s",
            "",
            "",
            "<= 10 s",
            met(find_s <= 10),
        ),
        (
            f"find (a path's substring / a glob) at {n} entries, in process",
            f"{find_sub:.2f} / {find_glob:.2f} s",
            "",
            "",
            "<= 0.5 s",
            met(max(find_sub, find_glob) <= 0.5),
        ),
        (f"versions PATH at {n} entries", f"{vers:.3f} s", "", "", "<= 0.5 s", met(vers <= 0.5)),
    ]


def measure(work: Path, quick: bool, entries: int | None = None) -> list[Row]:
    small = 100 if quick else 20_000
    big_mb = 2 if quick else 1024
    entries = entries or (5_000 if quick else 1_000_000)
    ck, tgz, big_gz = build(work, small, big_mb)
    rows = read_rows(work, ck, tgz, big_gz, small)
    rows.append(member_row(ck))
    rows += scale_rows(work, ck, entries)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, under a minute")
    ap.add_argument("--entries", type=int, help="manifest rows for the scale rows")
    args = ap.parse_args()
    if not Path("/dev/fuse").exists():
        raise SystemExit("no /dev/fuse: the mount rows cannot be measured here")
    print(f"coldkeep: {COLDKEEP}; ratarmount: {ratarmount() or 'not installed'}", flush=True)
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        print_table(measure(Path(tmp), args.quick, args.entries))


if __name__ == "__main__":
    sys.exit(main())
