"""coldkeep against the archivers a user would pick instead, restic and borg,
on the same trees: each tool given its own fresh copy of the tree, the page
cache flushed (``sync``) before each, whole commands timed from spawn to exit.

    python bench/peers.py [--quick] [--rounds N]     (or: make bench, which
                                                       installs restic and borg)

Trees (written once, copied for each tool and round):
  small files   10,000 old JSONL files of 1–32 KiB in 100 closed units
                (~169 MB; --quick: 100)
  the mix       bench/files.py's tree: ~300 JSONL files of 16 KiB–4 MiB
                (~273 MB; --quick: 2 MB)

Rows, for each tree: ``coldkeep pass`` (each file hashed, compressed, inflated
and hashed again, placed durably, recorded, its source unlinked; small files
packed into bundles) against ``restic backup`` into a new repository
(compression auto) and ``borg create`` into a new unencrypted one, with
``-C zlib,6`` and with ``-C lz4``; then the bytes each keeps. The ratio is the
peer's time over coldkeep's (above 1: coldkeep is faster), each side's best of
``--rounds``; the cells also say the CPU each used (user + sys of the command
and its children). The peers keep the sources and check nothing after writing:
the work coldkeep does above theirs is why a user picks it.

Targets: small files >= 1.0x restic and >= 1.5x borg lz4; the mix >= 1.5x
restic and >= 1.2x borg lz4. Where restic or borg is not installed its rows
say so (``make peers`` installs both as root with apt-get).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from files import COLDKEEP, MB, ROOT, site, write_small_tree, write_tree
from report import Row, met, print_table, size_of, tool_version

PASSWORD = "bench"  # restic always encrypts; borg's repository is unencrypted


@dataclass(frozen=True)
class Timed:
    seconds: float  # wall clock, spawn to exit
    cpu: float  # user + sys of the command and its children


# prctl's option that makes this process the parent of every orphan among its
# descendants (Linux >= 3.4).
PR_SET_CHILD_SUBREAPER = 36


@functools.cache
def _say_unlisted() -> None:
    """Once: a kernel without CONFIG_PROC_CHILDREN lists no children."""
    print(
        "(this kernel does not list a process's children in /proc: the CPU of what a "
        "command leaves running is not counted)",
        flush=True,
    )


def _children() -> set[int]:
    """This process's children now, ended or not (none where the kernel does
    not list them: ``timed`` then says so once)."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            pids.update(int(pid) for pid in (task / "children").read_text().split())
        except FileNotFoundError:  # a thread that ended meanwhile: no children
            continue
    return pids


def _reap_orphans(cmd: list[str], known: set[int]) -> None:
    """Wait for what ``cmd`` left running, so that its CPU is counted too.

    A command's CPU is what the kernel adds to this process's children's
    times as each child is waited for: a grandchild's only once its own parent
    waited for it, and a process orphaned by the command's exit goes to init
    with all it counted. ``coldkeep pass``'s worker processes are children of
    multiprocessing's fork server, which ends just after coldkeep does: without
    this the cell left their CPU out. This process is the orphans' subreaper
    (``timed``); its ``known`` children are not waited for."""
    deadline = time.monotonic() + 30
    while left := _children() - known:
        for pid in left:
            os.waitpid(pid, os.WNOHANG)
        if time.monotonic() > deadline:
            raise SystemExit(f"{' '.join(cmd)} left {sorted(left)} running for 30 s")
        time.sleep(0.01)  # an orphan that has not ended yet: polled, with a deadline


def timed(cmd: list[str], env: dict[str, str] | None = None) -> Timed:
    """Run ``cmd`` after a ``sync`` (so no tool pays for another's dirty
    pages); exit with its output if it fails. Its CPU is its own, its
    children's and that of any process it left behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    if not Path(f"/proc/self/task/{os.getpid()}/children").exists():
        _say_unlisted()
    os.sync()
    known = _children()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    run = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False
    )
    seconds = time.perf_counter() - t0
    _reap_orphans(cmd, known)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({run.returncode}):\n{run.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timed(seconds, cpu)


# Each tool: how it archives a copy of the tree at ``src`` into ``repo``
# (anything it needs first, untimed), returning the timed command.
Tool = Callable[[Path, Path], Timed]


def coldkeep_pass(src: Path, repo: Path) -> Timed:
    ck = site(repo, src)
    ran = timed([str(COLDKEEP), "pass", "--json", "--config", str(ck / "coldkeep.toml")])
    left = [p for p in (ck / "live").rglob("*.jsonl")]
    assert not left, f"coldkeep left {len(left)} files live, e.g. {left[0]}"
    return ran


def restic_backup(src: Path, repo: Path) -> Timed:
    env = {"RESTIC_PASSWORD": PASSWORD, "RESTIC_CACHE_DIR": str(repo.parent / "restic-cache")}
    subprocess.run(["restic", "init", "-q", "--repo", str(repo)], env={**os.environ, **env},
                   check=True, capture_output=True)  # fmt: skip
    return timed(["restic", "backup", "-q", "--repo", str(repo), str(src)], env)


def borg_create(compression: str) -> Tool:
    def create(src: Path, repo: Path) -> Timed:
        env = {
            "BORG_BASE_DIR": str(repo.parent / "borg-base"),
            "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK": "yes",
        }
        subprocess.run(["borg", "init", "-e", "none", str(repo)], env={**os.environ, **env},
                       check=True, capture_output=True)  # fmt: skip
        return timed(["borg", "create", "-C", compression, f"{repo}::one", str(src)], env)

    return create


PEERS: dict[str, tuple[str, Tool]] = {
    "restic backup": ("restic", restic_backup),
    "borg create -C zlib,6": ("borg", borg_create("zlib,6")),
    "borg create -C lz4": ("borg", borg_create("lz4")),
}
# (small files, the mix): the least ratio to meet, or None where none is set.
TARGETS: dict[str, tuple[float | None, float | None]] = {
    "restic backup": (1.0, 1.5),
    "borg create -C zlib,6": (None, None),
    "borg create -C lz4": (1.5, 1.2),
}


@dataclass
class Best:
    ran: Timed | None = None
    kept: int = 0  # bytes the archive or repository holds afterwards

    def keep(self, ran: Timed, kept: int) -> None:
        if self.ran is None or ran.seconds < self.ran.seconds:
            self.ran, self.kept = ran, kept


def race(work: Path, tree: Path, rounds: int) -> dict[str, Best]:
    """Every installed tool on fresh copies of ``tree``, ``rounds`` times (the
    order turned each round); each tool's best run."""
    tools: dict[str, Tool] = {"coldkeep pass": coldkeep_pass}
    tools |= {name: tool for name, (exe, tool) in PEERS.items() if shutil.which(exe)}
    best = {name: Best() for name in tools}
    names = list(tools)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            scratch = work / "scratch"
            scratch.mkdir()
            src = scratch / "tree"
            shutil.copytree(tree, src)
            ran = tools[name](src, scratch / "repo")
            kept = size_of(scratch / "repo" / ("archive" if name == "coldkeep pass" else ""))
            best[name].keep(ran, kept)
            shutil.rmtree(scratch)
    return best


def cell(t: Timed) -> str:
    return f"{t.seconds:.2f} s ({t.cpu:.1f} CPU-s)"


def tree_rows(label: str, best: dict[str, Best], which: int) -> list[Row]:
    ck = best["coldkeep pass"]
    assert ck.ran is not None
    rows: list[Row] = []
    for name, (exe, _) in PEERS.items():
        what = f"{label}: coldkeep pass vs {name}"
        peer = best.get(name)
        if peer is None or peer.ran is None:
            rows.append((what, cell(ck.ran), f"{exe}: not installed", "", "", "?"))
            continue
        ratio = peer.ran.seconds / ck.ran.seconds
        target = TARGETS[name][which]
        goal, ok = ("", "") if target is None else (f">= {target}x", met(ratio >= target))
        rows.append((what, cell(ck.ran), cell(peer.ran), f"{ratio:.2f}x", goal, ok))
    restic = best.get("restic backup")
    if restic is not None and restic.ran is not None:
        rows.append((
            f"  {label}: bytes kept vs restic's repository", f"{ck.kept / MB:.1f} MB",
            f"{restic.kept / MB:.1f} MB", f"{ck.kept / restic.kept:.2f}x", "", "",
        ))  # fmt: skip
    return rows


def measure(work: Path, quick: bool, rounds: int = 1) -> list[Row]:
    small_n, mix_bytes = (100, 2 * MB) if quick else (10_000, 273 * MB)
    small = work / "small"
    size = write_small_tree(small, small_n, seed=4, sizes=(1 << 10, 32 << 10), units=100)
    print(f"(small files: {small_n} files, {size / MB:.0f} MB)", flush=True)
    rows = tree_rows(f"{small_n} small files", race(work, small, rounds), 0)
    shutil.rmtree(small)
    mix = work / "mix"
    n, size = write_tree(mix, mix_bytes, seed=1)
    print(f"(the mix: {n} files, {size / MB:.0f} MB)", flush=True)
    rows += tree_rows(f"the mix of {n} files", race(work, mix, rounds), 1)
    shutil.rmtree(mix)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small trees, a few seconds")
    ap.add_argument("--rounds", type=int, default=1, help="each tool's best of N rounds")
    args = ap.parse_args()
    print(f"{tool_version(['restic', 'version'])}; {tool_version(['borg', '--version'])}")
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        print_table(measure(Path(tmp), args.quick, args.rounds))


if __name__ == "__main__":
    main()
