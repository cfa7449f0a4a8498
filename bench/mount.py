"""The FUSE binding for ``coldkeep mount``, chosen by measurement: one tiny
read-only filesystem written against each binding, served from the same
in-memory tree, measured side by side in one run.

    python bench/mount.py [--entries 100000] [--big-mb 100] [--quick]

The tree: ``--entries`` files, 100 to a directory (``d00000/f000`` ...), their
sizes and mtimes synthetic (never read), plus ``big``: a file of ``--big-mb`` MiB
whose bytes are the data file's on disk, read with ``pread``. Every binding sets
the same kernel cache timeouts (60 s entry and attribute: the tree is read-only)
and hands ``readdir`` each entry's attributes, so ``find -type f`` needs no
per-file ``lstat`` round trip when the binding passes ``d_type`` on.

Servers (each its own process, spawned with this interpreter):
  mfusepy          libfuse3's high-level (path) API, a thread per request
  pyfuse3-trio     libfuse3's low-level (inode) API, trio tasks
  pyfuse3-asyncio  the same under ``pyfuse3.asyncio`` (coldkeep's event loop)

Rows per server: mount ready (spawn to ``ismount``: interpreter start, imports,
the tree built, the mount made), ``find DIR -type f | wc -l`` (cold kernel
caches), peak RSS of the server (VmHWM after the find and the read), and
``cat big > /dev/null`` in MB/s beside ``cat`` of the data file on disk (page
cache warm: the ceiling). A binding that is not installed prints why.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mountkit import add_rows, mounted

PER_DIR = 100
TIMEOUT = 60.0
WIDTHS = (8, 8, 8, 10, 8)
BACKENDS = ("mfusepy", "pyfuse3-trio", "pyfuse3-asyncio")


class Tree:
    """Directories of ``PER_DIR`` files, and ``big`` at the root backed by
    ``data``. Nodes are inode numbers; 1 is the root."""

    def __init__(self, entries: int, data: str) -> None:
        self.data_fd = os.open(data, os.O_RDONLY)
        self.big_size = os.fstat(self.data_fd).st_size
        self.now = time.time()
        # inode -> (is_dir, size, children as {name: inode} or None)
        self.children: dict[int, dict[bytes, int]] = {1: {}}
        self.size: dict[int, int] = {}
        self.parent_dir: dict[int, int] = {}
        ino = 2
        self.big = ino
        self.children[1][b"big"] = ino
        self.size[ino] = self.big_size
        ino += 1
        ndirs = (entries + PER_DIR - 1) // PER_DIR
        made = 0
        for d in range(ndirs):
            dino = ino
            ino += 1
            self.children[1][b"d%05d" % d] = dino
            kids: dict[bytes, int] = {}
            self.children[dino] = kids
            for f in range(min(PER_DIR, entries - made)):
                kids[b"f%03d" % f] = ino
                self.size[ino] = 1000 + f
                ino += 1
                made += 1
        self.paths: dict[str, int] = {}

    def is_dir(self, ino: int) -> bool:
        return ino in self.children

    def stat_of(self, ino: int) -> dict[str, Any]:
        if self.is_dir(ino):
            mode, size, nlink = stat.S_IFDIR | 0o555, 4096, 2
        else:
            mode, size, nlink = stat.S_IFREG | 0o444, self.size[ino], 1
        t = self.now
        return {
            "st_mode": mode,
            "st_size": size,
            "st_nlink": nlink,
            "st_ino": ino,
            "st_mtime": t,
            "st_atime": t,
            "st_ctime": t,
            "st_uid": 0,
            "st_gid": 0,
        }

    def resolve(self, path: str) -> int | None:
        ino = 1
        for part in path.strip("/").split("/"):
            if not part:
                continue
            kids = self.children.get(ino)
            if kids is None:
                return None
            got = kids.get(part.encode("utf-8", "surrogateescape"))
            if got is None:
                return None
            ino = got
        return ino

    def read(self, ino: int, size: int, offset: int) -> bytes:
        if ino != self.big:
            return b"x" * max(0, min(size, self.size[ino] - offset))
        return os.pread(self.data_fd, size, offset)


def serve_mfusepy(tree: Tree, mnt: str) -> None:
    from coldkeep.core.ops.libfuse import mfusepy as bound

    mfusepy = bound()  # libfuse 3, as coldkeep mount loads it

    class Ops(mfusepy.Operations):  # type: ignore[misc]
        def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
            ino = tree.resolve(path)
            if ino is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            return tree.stat_of(ino)

        def readdir(self, path: str, fh: Any) -> Any:
            ino = tree.resolve(path)
            assert ino is not None
            yield "."
            yield ".."
            for name, kid in tree.children[ino].items():
                yield name.decode("utf-8", "surrogateescape"), tree.stat_of(kid), 0

        def open(self, path: str, flags: int) -> int:
            if flags & (os.O_WRONLY | os.O_RDWR):
                raise mfusepy.FuseOSError(errno.EROFS)
            ino = tree.resolve(path)
            if ino is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            return ino

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return tree.read(fh, size, offset)

    mfusepy.FUSE(
        Ops(),
        mnt,
        foreground=True,
        ro=True,
        fsname="benchmount",
        attr_timeout=TIMEOUT,
        entry_timeout=TIMEOUT,
    )


def serve_pyfuse3(tree: Tree, mnt: str, loop: str) -> None:
    import pyfuse3

    def attrs(ino: int) -> Any:
        a = pyfuse3.EntryAttributes()
        s = tree.stat_of(ino)
        a.st_ino = ino
        a.st_mode = s["st_mode"]
        a.st_size = s["st_size"]
        a.st_nlink = s["st_nlink"]
        ns = int(tree.now * 1e9)
        a.st_mtime_ns = a.st_atime_ns = a.st_ctime_ns = ns
        a.entry_timeout = a.attr_timeout = TIMEOUT
        return a

    class Ops(pyfuse3.Operations):  # type: ignore[misc]
        async def lookup(self, parent: int, name: bytes, ctx: Any = None) -> Any:
            kid = tree.children.get(parent, {}).get(name)
            if kid is None:
                raise pyfuse3.FUSEError(errno.ENOENT)
            return attrs(kid)

        async def getattr(self, ino: int, ctx: Any = None) -> Any:
            return attrs(ino)

        async def opendir(self, ino: int, ctx: Any) -> int:
            return ino

        async def readdir(self, fh: int, start_id: int, token: Any) -> None:
            items = list(tree.children[fh].items())
            for i in range(start_id, len(items)):
                name, kid = items[i]
                if not pyfuse3.readdir_reply(token, name, attrs(kid), i + 1):
                    return

        async def open(self, ino: int, flags: int, ctx: Any) -> Any:
            if flags & (os.O_WRONLY | os.O_RDWR):
                raise pyfuse3.FUSEError(errno.EROFS)
            return pyfuse3.FileInfo(fh=ino)

        async def read(self, fh: int, off: int, size: int) -> bytes:
            return tree.read(fh, size, off)

    options = set(pyfuse3.default_options) | {"ro", "fsname=benchmount"}
    pyfuse3.init(Ops(), mnt, options)
    try:
        if loop == "asyncio":
            import asyncio

            import pyfuse3.asyncio as pa

            pa.enable()
            asyncio.run(pyfuse3.main())
        else:
            import trio

            trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=False)


def serve(backend: str, mnt: str, data: str, entries: int) -> None:
    tree = Tree(entries, data)
    if backend == "mfusepy":
        serve_mfusepy(tree, mnt)
    else:
        serve_pyfuse3(tree, mnt, backend.split("-", 1)[1])


def available(backend: str) -> str | None:
    mod = "mfusepy" if backend == "mfusepy" else "pyfuse3"
    extra = ["trio"] if backend == "pyfuse3-trio" else []
    code = "; ".join(f"import {m}" for m in [mod, *extra])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if out.returncode == 0:
        return None
    hint = (
        " (pip install pyfuse3: builds against libfuse3-dev + pkg-config)"
        if mod == "pyfuse3"
        else ""
    )
    return f"{mod} is not importable{hint}"


def _timed(cmd: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, out.stdout.strip()


def measure(backend: str, work: Path, data: Path, entries: int) -> dict[str, Any]:
    mnt = work / f"mnt-{backend}"
    cmd = [sys.executable, __file__, "--serve", backend, str(mnt), str(data), str(entries)]
    with mounted(cmd, mnt, work / f"{backend}.log") as m:
        find_s, count = _timed(f"find {mnt} -type f | wc -l")
        assert int(count) == entries + 1, (backend, count)
        read_s, _ = _timed(f"cat {mnt}/big > /dev/null")
        rss = m.rss_mb()
    mb = data.stat().st_size / 1e6
    return {"ready": m.ready, "find": find_s, "rss": rss, "read": mb / read_s}


CONFIG = """live_root = "live"
archive_root = "archive"
mode = "on"
[files]
include = ["**"]
min_age_days = 1
"""
SERVE = (
    "import sys; from pathlib import Path; "
    "from coldkeep.core.base.config import load_settings; "
    "from coldkeep.core.ops.mount import serve; "
    "serve(load_settings(Path(sys.argv[1])), Path(sys.argv[2]))"
)


def coldkeep_site(work: Path, entries: int, big_mb: int) -> tuple[Path, Path]:
    """A site whose ``big.jsonl`` (``big_mb`` MiB of log-like JSONL) went through
    a real pass, and whose manifest then gets ``entries`` more rows (copies of
    that entry at other paths, their gzips never read): the config and the gzip."""
    import random
    import sqlite3

    site = work / "site"
    (site / "live").mkdir(parents=True)
    (site / "coldkeep.toml").write_text(CONFIG)
    big = site / "live" / "big.jsonl"
    rnd = random.Random(1)
    with big.open("w") as f:
        while f.tell() < big_mb << 20:
            f.write(
                "".join(
                    f'{{"ts":{1_700_000_000 + i},"level":"info","user":{rnd.randrange(10**6)},'
                    f'"msg":"request {rnd.randrange(10**9):x} served","ms":{rnd.random():.3f}}}\n'
                    for i in range(10_000)
                )
            )
    old = time.time_ns() - 30 * 86_400 * 10**9
    os.utime(big, ns=(old, old))
    ck = [sys.executable, "-m", "coldkeep.tui.cli.main"]
    subprocess.run(
        [*ck, "pass", "--config", str(site / "coldkeep.toml")], check=True, capture_output=True
    )
    db = site / "archive" / "coldkeep.db"
    with sqlite3.connect(db) as con:
        [gz] = [r[0] for r in con.execute("SELECT gz_path FROM entries")]
    add_rows(db, entries)
    return site / "coldkeep.toml", site / "archive" / gz


SERVE_FILE = (
    "import sys, importlib.util, coldkeep.core.ops; from pathlib import Path; "
    "from coldkeep.core.base.config import load_settings; "
    "spec = importlib.util.spec_from_file_location('coldkeep.core.ops.mount_then', sys.argv[3]); "
    "mod = importlib.util.module_from_spec(spec); sys.modules[spec.name] = mod; "
    "spec.loader.exec_module(mod); "
    "mod.serve(load_settings(Path(sys.argv[1])), Path(sys.argv[2]))"
)


def mount_then(work: Path, rev: str) -> Path:
    """core/ops/mount.py as it was at git ``rev``, to serve beside today's."""
    src = subprocess.run(
        ["git", "show", f"{rev}:core/ops/mount.py"],
        cwd=Path(__file__).parents[1],
        capture_output=True,
        check=True,
    ).stdout
    path = work / "mount_then.py"
    path.write_bytes(src)
    return path


def measure_coldkeep(
    work: Path, config: Path, gz: Path, entries: int, big_mb: int, then: Path | None = None
) -> dict[str, Any]:
    """``coldkeep mount`` itself on a real manifest (or, with ``then``, that
    file's ``serve``): the same rows, and the big file's read beside
    ``gunzip -c`` of its gzip."""
    mnt = work / f"mnt-coldkeep{'-then' if then else ''}"
    log = work / f"coldkeep{'-then' if then else ''}.log"
    args = ["-c", SERVE_FILE, str(config), str(mnt), str(then)] if then else ["-c", SERVE]
    if not then:
        args += [str(config), str(mnt)]
    with mounted([sys.executable, *args], mnt, log) as m:
        find_s, count = _timed(f"find {mnt} -path {mnt}/.versions -prune -o -type f -print | wc -l")
        assert int(count) == entries + 1, count
        read_s, _ = _timed(f"cat {mnt}/big.jsonl > /dev/null")
        rss = m.rss_mb()
    gunzip_s, _ = _timed(f"gunzip -c {gz} > /dev/null")
    mb = (big_mb << 20) / 1e6
    return {
        "ready": m.ready,
        "find": find_s,
        "rss": rss,
        "read": mb / read_s,
        "gunzip": mb / gunzip_s,
    }


def _coldkeep_rows(work: Path, args: argparse.Namespace) -> None:
    config, gz = coldkeep_site(work, args.entries, args.big_mb)
    runs = [("coldkeep mount", None)]
    if args.against:
        runs.append((f"at {args.against[:12]}", mount_then(work, args.against)))
    for label, then in runs:
        r = measure_coldkeep(work, config, gz, args.entries, args.big_mb, then)
        print(
            f"{label:<16} {r['ready']:>8.2f} {r['find']:>8.2f} {r['rss']:>8.0f} "
            f"{r['read']:>10,.0f}  (gunzip -c of its gzip: {r['gunzip']:,.0f} MB/s, "
            f"{r['read'] / r['gunzip']:.2f}x)"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--serve", nargs=4, metavar=("BACKEND", "MNT", "DATA", "N"))
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--big-mb", type=int, default=100)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-coldkeep", action="store_true", help="the bindings alone")
    ap.add_argument("--no-bindings", action="store_true", help="coldkeep mount alone")
    ap.add_argument("--against", metavar="REV", help="also core/ops/mount.py as of git REV")
    args = ap.parse_args()
    if args.serve:
        b, mnt, data, n = args.serve
        serve(b, mnt, data, int(n))
        return
    if args.quick:
        args.entries, args.big_mb = 2_000, 8
    with tempfile.TemporaryDirectory(prefix="bench-mount-") as tmp:
        work = Path(tmp)
        data = work / "big.bin"
        with data.open("wb") as f:
            for _ in range(args.big_mb):
                f.write(os.urandom(1 << 20))
        subprocess.run(["cat", str(data)], stdout=subprocess.DEVNULL, check=True)
        disk_s, _ = _timed(f"cat {data} > /dev/null")
        disk = data.stat().st_size / 1e6 / disk_s
        print(
            f"{args.entries:,} entries + one {args.big_mb} MiB file; "
            f"cat of the file on disk (page cache): {disk:,.0f} MB/s"
        )
        head = ("ready s", "find s", "RSS MB", "read MB/s", "vs disk")
        print(
            f"{'binding':<16} " + " ".join(f"{h:>{w}}" for h, w in zip(head, WIDTHS, strict=True))
        )
        for backend in () if args.no_bindings else BACKENDS:
            why = available(backend)
            if why:
                print(f"{backend:<16} skipped: {why}")
                continue
            r = measure(backend, work, data, args.entries)
            print(
                f"{backend:<16} {r['ready']:>8.2f} {r['find']:>8.2f} {r['rss']:>8.0f} "
                f"{r['read']:>10,.0f} {r['read'] / disk:>7.2f}x"
            )
        if not args.no_coldkeep:
            _coldkeep_rows(work, args)


if __name__ == "__main__":
    main()
