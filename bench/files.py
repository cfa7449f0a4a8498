"""File archiving, restore and verify, against the gzip/pigz/sha256sum scripts an
operator would otherwise run, each on an identical copy of the same tree.

    python bench/files.py [--quick]
    python bench/files.py --only restore [--rounds 3] [--against OTHER/.venv/bin/coldkeep]
                          [--workers N]
    python bench/files.py --only archive [--rounds 5] [--against OTHER/.venv/bin/coldkeep]
                          [--workers N]

Rows:
  file archiving end to end   ``coldkeep pass`` (hash, compress, fsync, verify,
                              place, manifest entry, unlink) vs ``pigz -p <cores>
                              -6 -r`` and vs a ``gzip -6`` + ``sha256sum`` +
                              ``gunzip -c | sha256sum`` loop over the same files
  output size                 coldkeep's gzips vs ``gzip -6``'s
  restore                     ``coldkeep restore --to`` vs ``gunzip -c`` of the
                              same gzips
  verify                      ``coldkeep verify`` vs ``gunzip -c | sha256sum``
  peak RSS, one big file      a pass over a tree holding one 2 GiB file: the
                              child process's ru_maxrss
  rate cap                    a pass with ``io.bytes_per_s`` set: bytes read
                              (sources and verify) per second of the pass
  small files                 5,000 files of 4–64 KiB in 50 units (packed into
                              bundles): ``coldkeep pass`` vs ``pigz -p <cores> -6
                              -r``, files per second, whole commands timed
  codec ceiling               ISA-L level 1 compress + inflate of the same bytes,
                              per core, times the cores, measured in this run:
                              the most the protocol could reach
  the protocol's floor        the same per-file steps bare (bench/floor.py: no
                              manifest, events, checks or bundles), every fsync
                              and none, in as many threads as coldkeep's workers;
                              coldkeep's archiving as a share of it

``--only archive`` times only the archiving rows, ``--rounds`` times (each
round on fresh copies of the mix, best of each side): ``coldkeep pass``, with
``--against`` another checkout's ``coldkeep`` on its own copy in the same
round (the order of the two alternating), ``pigz -p <cores> -6`` and the codec
ceiling measured in the same rounds, each ratio against those.

``--only restore`` archives the 302-file mix (untimed), then times only the
restore row, ``--rounds`` times (each to a fresh folder, best of each side),
and with ``--against`` another checkout's ``coldkeep`` restoring the same
archive in the same rounds (its ``coldkeep`` column beside this one's).

coldkeep's time runs from when the command holds the lock and starts work
(its ``seconds``, or its audit time stamp) to the end, leaving out the CLI's
start-up (~0.4 s of imports); the anchors are timed from spawn to exit. Targets: archiving at >= 4x
``pigz -p 2 -6``, size <= 1.35x ``gzip -6``, peak RSS < 150 MB, rate within 10 %.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from floor import floor
from report import Row, met, print_table

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import Codec, compress_fd, inflate
from coldkeep.core.ops.demo import write_jsonl

ROOT = Path(__file__).resolve().parent.parent
COLDKEEP = Path(sys.executable).parent / "coldkeep"
DAY_MS = 86_400_000
MB = 1_000_000
CORES = os.cpu_count() or 2

CONFIG = """\
live_root = "live"
archive_root = "archive"
mode = "on"

[files]
include = ["**/*.jsonl"]
min_age_days = 14
unit_closed = "marker:.closed"

[io]
bytes_per_s = {rate}
"""


# Linux carries a process's RSS high-water mark across exec, and a child forked
# from this (large) bench process starts at its size: the command to measure is
# started from a fresh, small interpreter, which reports its child's peak.
PEAK_RSS = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


@dataclass
class Ran:
    seconds: float  # wall clock, spawn to exit
    ended: float  # time.time() at exit
    out: str


def run(cmd: list[str]) -> Ran:
    """Run to completion: its wall time and output; exit if it fails."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        proc.wait()
        seconds = time.perf_counter() - t0
        out.seek(0)
        text = out.read()
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{text[-2000:]}")
    return Ran(seconds, time.time(), text)


def coldkeep(
    site: Path, *args: str, peak_rss: bool = False, exe: Path = COLDKEEP
) -> tuple[Any, Ran]:
    """Run a coldkeep command with --json: its result, and how it ran (and with
    ``peak_rss``, the command's peak RSS in KiB as the output's last line)."""
    cmd = [str(exe), *args, "--json", "--config", str(site / "coldkeep.toml")]
    ran = run([sys.executable, "-c", PEAK_RSS, *cmd] if peak_rss else cmd)
    doc, _ = json.JSONDecoder().raw_decode(ran.out[ran.out.index("{") :])
    return doc["result"], ran


def write_tree(live: Path, total: int, seed: int) -> tuple[int, int]:
    """Closed units of old JSONL files, log-uniform 16 KiB to 4 MiB, about
    ``total`` bytes in all; returns how many files and bytes."""
    rnd = random.Random(seed)
    old = int(time.time() * 1000) - 60 * DAY_MS
    done = n = 0
    while done < total:
        unit = f"unit-{n // 8:04d}"
        size = min(total - done, int(2 ** rnd.uniform(14, 22)))
        done += write_jsonl(live / unit / f"part-{n % 8:02d}.jsonl", rnd, unit, size, old)
        (live / unit / ".closed").write_text("closed\n")
        n += 1
    return n, done


def write_big(live: Path, size: int) -> None:
    """One ``size``-byte JSONL file: a 64 MiB generated block, repeated (far
    apart for deflate's 32 KiB window, so it compresses like fresh data)."""
    path = live / "bulk" / "firehose.jsonl"
    block = live / "bulk" / "block"
    write_jsonl(block, random.Random(3), "bulk", min(size, 64 << 20), 0)
    data = block.read_bytes()
    block.unlink()
    with path.open("wb") as f:
        for _ in range(size // len(data)):
            f.write(data)
        f.write(data[: size % len(data)])
    old = time.time_ns() - 60 * DAY_MS * 1_000_000
    os.utime(path, ns=(old, old))
    (live / "bulk" / ".closed").write_text("closed\n")


def site(base: Path, tree: Path, rate: int = 0) -> Path:
    """A coldkeep site whose live tree is a copy of ``tree`` (mtimes kept)."""
    shutil.copytree(tree, base / "live")
    (base / "archive").mkdir()
    (base / "coldkeep.toml").write_text(CONFIG.format(rate=rate))
    return base


def files_of(root: Path, suffix: str) -> list[Path]:
    return sorted(p for p in root.rglob(f"*{suffix}") if p.is_file())


def script(lines: list[str], work: Path) -> Ran:
    path = work / f"anchor-{time.monotonic_ns()}.sh"
    path.write_text("set -euo pipefail\n" + "\n".join(lines) + "\n")
    return run(["bash", str(path)])


def archive_rows(work: Path, tree: Path, size: int) -> list[Row]:
    ck = site(work / "ck", tree)
    summary, _ = coldkeep(ck, "pass")
    files = summary["files"]
    assert files["errors"] == 0 and files["bytes_in"] == size, files
    ck_rate = size / summary["seconds"]

    pz = work / "pigz"
    shutil.copytree(tree, pz)
    pigz = run(["pigz", "-p", str(CORES), "-6", "-r", str(pz)]) if shutil.which("pigz") else None
    floors = (floor_seconds(tree, work, durable=True), floor_seconds(tree, work, durable=False))

    gz = work / "gzip"
    shutil.copytree(tree, gz)
    sources = files_of(gz, ".jsonl")
    gzip = script(
        [
            f'f="{p}"; sha256sum "$f" > "$f.sha"; gzip -6 -c "$f" > "$f.gz"; '
            'gunzip -c "$f.gz" | sha256sum > "$f.back"'
            for p in sources
        ],
        work,
    )
    gzip_bytes = sum(p.with_name(p.name + ".gz").stat().st_size for p in sources)
    ratio = files["bytes_out"] / gzip_bytes
    what = f"file archiving, {size / MB:.0f} MB, {len(sources)} files (vs pigz -p {CORES} -6)"
    rows: list[Row] = []
    if pigz is not None:
        r = ck_rate / (size / pigz.seconds)
        rows.append(
            (
                what,
                f"{ck_rate / MB:.0f} MB/s",
                f"{size / pigz.seconds / MB:.0f} MB/s",
                f"{r:.1f}x",
                ">= 4x",
                met(r >= 4),
            )
        )
    else:
        rows.append((what, f"{ck_rate / MB:.0f} MB/s", "not installed", "", ">= 4x", "?"))
    rows += [
        (
            "file archiving (vs gzip -6 + sha256sum + gunzip|sha256sum)",
            f"{ck_rate / MB:.0f} MB/s",
            f"{size / gzip.seconds / MB:.0f} MB/s",
            f"{ck_rate / (size / gzip.seconds):.1f}x",
            "",
            "",
        ),
        (
            "output size (vs gzip -6)",
            f"{files['bytes_out'] / MB:.1f} MB",
            f"{gzip_bytes / MB:.1f} MB",
            f"{ratio:.3f}",
            "<= 1.35",
            met(ratio <= 1.35),
        ),
    ]
    # The anchors read the same files' gzip -6 outputs (coldkeep's small ones are
    # bundle members).
    gzs = files_of(gz, ".gz")
    rows += restore_rows(work, ck, gzs, size)
    verified, _ = coldkeep(ck, "verify")
    assert verified["ok"] == verified["checked"] == len(gzs), verified
    verify_s = verified["seconds"]
    check = script([f'gunzip -c "{p}" | sha256sum > /dev/null' for p in gzs], work)
    rows.append(
        (
            "verify, every gzip (vs gunzip -c | sha256sum)",
            f"{size / verify_s / MB:.0f} MB/s",
            f"{size / check.seconds / MB:.0f} MB/s",
            f"{check.seconds / verify_s:.1f}x",
            "",
            "",
        )
    )
    ceiling = codec_ceiling()
    rows.append(ceiling_row(ck_rate, ceiling))
    pigz_rate = size / pigz.seconds if pigz is not None else None
    return rows + floor_rows(size, ck_rate, pigz_rate, ceiling, *floors)


def restore_rows(
    work: Path, ck: Path, gzs: list[Path], size: int, rounds: int = 1, against: Path | None = None
) -> list[Row]:
    """``coldkeep restore --to`` of every file vs a ``gunzip -c`` loop over the
    same files' gzips, ``rounds`` times in turn (best of each); with ``against``,
    that ``coldkeep`` too, restoring the same archive in the same rounds."""
    best: dict[str, float] = {}
    for r in range(rounds):
        for who, exe in [("this", COLDKEEP), *([("against", against)] if against else [])]:
            dest = work / f"restored-{who}-{r}"
            restored, ran = coldkeep(ck, "restore", "--path", "**", "--to", str(dest), exe=exe)
            assert isinstance(restored, list) and len(restored) == len(gzs), len(restored)
            best[who] = min(best.get(who, 1e9), ran.ended - _started(ck, "restore"))
            shutil.rmtree(dest)
        out = work / f"gunzipped-{r}"
        out.mkdir()
        gunzip = script([f'gunzip -c "{p}" > "{out}/{i}"' for i, p in enumerate(gzs)], work)
        best["gunzip"] = min(best.get("gunzip", 1e9), gunzip.seconds)
        shutil.rmtree(out)
    rows: list[Row] = []
    for who in [w for w in ("this", "against") if w in best]:
        said = "" if who == "this" else f" [{against}]"
        rows.append(
            (
                f"restore, all {len(gzs)} files (vs gunzip -c, {CORES}-core machine){said}",
                f"{size / best[who] / MB:.0f} MB/s",
                f"{size / best['gunzip'] / MB:.0f} MB/s",
                f"{best['gunzip'] / best[who]:.2f}x",
                ">= 2x",
                met(best["gunzip"] / best[who] >= 2),
            )
        )
    return rows


def restore_only(
    work: Path, quick: bool, rounds: int, against: Path | None, workers: int | None
) -> list[Row]:
    """The restore row alone: the mix archived (untimed), then restored (with
    ``workers``, that ``io.workers`` for the restores)."""
    tree = work / "tree"
    n, size = write_tree(tree, 24 * MB if quick else 200 * MB, seed=1)
    print(f"(tree: {n} files, {size / MB:.0f} MB of JSONL)", flush=True)
    ck = site(work / "ck", tree)
    summary, _ = coldkeep(ck, "pass")
    assert summary["files"]["errors"] == 0, summary["files"]
    if workers is not None:
        config = ck / "coldkeep.toml"
        config.write_text(config.read_text() + f"workers = {workers}\n")  # [io] is last
    gz = work / "gzip"
    shutil.copytree(tree, gz)
    sources = files_of(gz, ".jsonl")
    script([f'gzip -6 "{p}"' for p in sources], work)
    return restore_rows(work, ck, files_of(gz, ".gz"), size, rounds, against)


def ceiling_row(ck_rate: float, ceiling: float | None = None, said: str = "") -> Row:
    """The codec ceiling (measured now unless given) and coldkeep's archiving
    rate as a share of it."""
    ceiling = codec_ceiling() if ceiling is None else ceiling
    share = ck_rate / ceiling
    return (
        f"codec ceiling: compress + verify, {CORES} cores (coldkeep's archiving as a share){said}",
        f"{ck_rate / MB:.0f} MB/s",
        f"{ceiling / MB:.0f} MB/s",
        f"{share:.0%}",
        ">= 65 %",
        met(share >= 0.65),
    )


def floor_seconds(tree: Path, work: Path, *, durable: bool) -> float:
    """The protocol's steps bare over a copy of ``tree`` (bench/floor.py), in as
    many threads as coldkeep's default workers."""
    return floor(tree, work, threads=2 * CORES, durable=durable)


def floor_rows(
    size: int,
    ck_rate: float,
    pigz_rate: float | None,
    ceiling: float,
    durable_s: float,
    bare_s: float,
    said: str = "",
) -> list[Row]:
    """What the same steps take bare (bench/floor.py), beside pigz and the codec
    ceiling, and coldkeep's archiving as a share of them: how far the targets
    are from what the protocol allows at all on this machine."""
    rows: list[Row] = []
    for what, seconds in (("every fsync", durable_s), ("no fsync at all", bare_s)):
        rate = size / seconds
        vs_pigz = f"{rate / pigz_rate:.2f}x pigz" if pigz_rate else "pigz not installed"
        rows.append(
            (
                f"  the protocol's floor: its steps bare, {what} (vs pigz; share of the ceiling)",
                f"{rate / MB:.0f} MB/s",
                vs_pigz,
                f"{rate / ceiling:.0%}",
                "",
                "",
            )
        )
    rows.append(
        (
            f"  coldkeep's archiving as a share of that floor (every fsync){said}",
            f"{ck_rate / MB:.0f} MB/s",
            f"{size / durable_s / MB:.0f} MB/s",
            f"{ck_rate * durable_s / size:.0%}",
            "",
            "",
        )
    )
    return rows


def codec_ceiling() -> float:
    """The codec ceiling in bytes/s, measured now: one core compressing (ISA-L
    level 1, with sha256 and CRC-32) then inflating and re-hashing the same
    bytes, times the cores. The protocol cannot beat it: every byte takes both."""
    data = Path(tempfile.mkdtemp()) / "sample.jsonl"
    size = write_jsonl(data, random.Random(7), "ceiling", 64 << 20, 0)
    gz = data.with_suffix(".gz")
    token = CancelToken()
    fd = os.open(data, os.O_RDONLY)
    try:
        t0 = time.perf_counter()
        compress_fd(fd, gz, name=b"x", mtime_ns=0, codec=Codec("isal", 1), cancel=token)
        t1 = time.perf_counter()
        inflate(gz, cancel=token)
        t2 = time.perf_counter()
    finally:
        os.close(fd)
        shutil.rmtree(data.parent)
    per_core = size / ((t1 - t0) + (t2 - t1))
    return per_core * CORES


def archive_only(
    work: Path, quick: bool, rounds: int, against: Path | None, workers: int | None
) -> list[Row]:
    """The archiving rows alone, ``rounds`` times (best of each side): each
    ``coldkeep`` (this one, and ``against``) archiving its own fresh copy of the
    mix, in alternating order, then ``pigz`` on another copy and the codec
    ceiling, all in the same round (``workers``: that ``io.workers``)."""
    tree = work / "tree"
    n, size = write_tree(tree, 24 * MB if quick else 200 * MB, seed=1)
    print(f"(tree: {n} files, {size / MB:.0f} MB of JSONL)", flush=True)
    sides = [("this", COLDKEEP), *([("against", against)] if against else [])]
    best: dict[str, float] = {}
    for r in range(rounds):
        for who, exe in sides if r % 2 == 0 else sides[::-1]:
            ck = site(work / f"ck-{who}-{r}", tree)
            if workers is not None:
                config = ck / "coldkeep.toml"
                config.write_text(config.read_text() + f"workers = {workers}\n")  # [io] is last
            summary, _ = coldkeep(ck, "pass", exe=exe)
            files = summary["files"]
            assert files["errors"] == 0 and files["bytes_in"] == size, files
            best[who] = min(best.get(who, 1e9), summary["seconds"])
            shutil.rmtree(ck)
        pz = work / f"pigz-{r}"
        shutil.copytree(tree, pz)
        pigz = run(["pigz", "-p", str(CORES), "-6", "-r", str(pz)])
        best["pigz"] = min(best.get("pigz", 1e9), pigz.seconds)
        shutil.rmtree(pz)
        best["ceiling"] = min(best.get("ceiling", 1e9), size / codec_ceiling())
        best["floor"] = min(best.get("floor", 1e9), floor_seconds(tree, work, durable=True))
        best["bare"] = min(best.get("bare", 1e9), floor_seconds(tree, work, durable=False))
        said = ", ".join(f"{k} {size / v / MB:.0f} MB/s" for k, v in best.items())
        print(f"(round {r + 1}, best so far: {said}; {os.getloadavg()[0]:.1f} load)", flush=True)
    rows: list[Row] = []
    pigz_rate = size / best["pigz"]
    for who, _ in sides:
        said = "" if who == "this" else f" [{against}]"
        rate = size / best[who]
        rows.append(
            (
                f"file archiving, {size / MB:.0f} MB, {n} files (vs pigz -p {CORES} -6){said}",
                f"{rate / MB:.0f} MB/s",
                f"{pigz_rate / MB:.0f} MB/s",
                f"{rate / pigz_rate:.2f}x",
                ">= 4x",
                met(rate / pigz_rate >= 4),
            )
        )
        rows.append(ceiling_row(rate, size / best["ceiling"], said))
    ceiling = size / best["ceiling"]
    for who, _ in sides:
        said = "" if who == "this" else f" [{against}]"
        rows += floor_rows(
            size, size / best[who], pigz_rate, ceiling, best["floor"], best["bare"], said
        )[0 if who == "this" else 2 :]
    return rows


def write_small_tree(
    live: Path, n: int, seed: int, sizes: tuple[int, int] = (4 << 10, 64 << 10), units: int = 50
) -> int:
    """``n`` old JSONL files of ``sizes`` bytes (uniform, 4–64 KiB by default)
    in ``units`` closed units; returns the bytes."""
    rnd = random.Random(seed)
    old = int(time.time() * 1000) - 60 * DAY_MS
    done = 0
    for i in range(n):
        unit = f"unit-{i % units:03d}"
        size = rnd.randint(*sizes)
        done += write_jsonl(live / unit / f"f-{i:05d}.jsonl", rnd, unit, size, old)
    for u in range(units):
        (live / f"unit-{u:03d}" / ".closed").write_text("closed\n")
    return done


def small_files_row(work: Path, n: int) -> Row:
    """Many small files: ``coldkeep pass`` against ``pigz -p <cores> -6 -r`` on a
    copy, each whole command timed from spawn to exit (pigz neither verifies
    nor fsyncs)."""
    tree = work / "small-tree"
    write_small_tree(tree, n, seed=2)
    ck = site(work / "small-ck", tree)
    t0 = time.perf_counter()
    summary, _ = coldkeep(ck, "pass")
    ck_s = time.perf_counter() - t0
    assert summary["files"]["archived"] == n, summary["files"]
    what = f"small files, {n} of 4-64 KiB (files/s vs pigz -p {CORES} -6 -r)"
    if not shutil.which("pigz"):
        return (what, f"{n / ck_s:.0f} files/s", "not installed", "", ">= 1.0x", "?")
    pz = work / "small-pigz"
    shutil.copytree(tree, pz)
    pigz = run(["pigz", "-p", str(CORES), "-6", "-r", str(pz)])
    r = pigz.seconds / ck_s
    for path in (tree, ck, pz):
        shutil.rmtree(path)
    return (
        what,
        f"{n / ck_s:.0f} files/s",
        f"{n / pigz.seconds:.0f} files/s",
        f"{r:.2f}x",
        ">= 1.0x",
        met(r >= 1.0),
    )


def _started(ck: Path, action: str) -> float:
    """When the last ``action`` started its work (the audit's time stamp, taken
    once the lock is held), in seconds since the epoch."""
    audit, _ = coldkeep(ck, "history")
    return float(next(a["at"] for a in audit if a["action"] == action)) / 1000


def rss_row(work: Path, size: int) -> Row:
    tree = work / "big-tree"
    write_big(tree, size)
    big = site(work / "big", tree)
    shutil.rmtree(tree)
    summary, ran = coldkeep(big, "pass", peak_rss=True)
    rss = int(ran.out.split()[-1]) / 1024
    speed = size / summary["seconds"] / MB
    return (
        f"peak RSS, one {size / (1 << 30):.2g} GiB file (archived at {speed:.0f} MB/s)",
        f"{rss:.0f} MiB",
        "",
        "",
        "< 150 MiB",
        met(rss < 150),
    )


def rate_row(work: Path, tree: Path, rate: int) -> Row:
    capped = site(work / "capped", tree, rate)
    summary, _ = coldkeep(capped, "pass")
    files = summary["files"]
    read = files["bytes_in"] + files["bytes_out"]  # sources, and the gzips re-read to verify
    got = read / summary["seconds"]
    off = got / rate - 1
    return (
        f"rate cap, io.bytes_per_s = {rate / MB:.0f} MB/s ({read / MB:.0f} MB read)",
        f"{got / MB:.1f} MB/s",
        "",
        f"{off:+.1%}",
        "within 10 %",
        met(abs(off) <= 0.10),
    )


def measure(work: Path, quick: bool) -> list[Row]:
    size, big, rate = (8 * MB, 8 << 20, 48 * MB) if quick else (200 * MB, 2 << 30, 50 * MB)
    tree = work / "tree"
    n, size = write_tree(tree, size, seed=1)
    print(f"(tree: {n} files, {size / MB:.0f} MB of JSONL)", flush=True)
    rows = archive_rows(work, tree, size)
    rows.append(rate_row(work, tree, rate))
    shutil.rmtree(tree)
    rows.append(small_files_row(work, 200 if quick else 5000))
    rows.append(rss_row(work, big))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, a few seconds")
    ap.add_argument(
        "--only", choices=["restore", "archive"], help="only these rows (their data built first)"
    )
    ap.add_argument(
        "--rounds", type=int, default=1, help="--only restore|archive: best of N rounds"
    )
    ap.add_argument(
        "--against", type=Path, help="--only restore|archive: another coldkeep executable, beside"
    )
    ap.add_argument("--workers", type=int, help="--only restore|archive: io.workers")
    args = ap.parse_args()
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        if args.only == "archive":
            rows = archive_only(Path(tmp), args.quick, args.rounds, args.against, args.workers)
            print_table(rows)
        elif args.only == "restore":
            rows = restore_only(Path(tmp), args.quick, args.rounds, args.against, args.workers)
            print_table(rows)
        else:
            print_table(measure(Path(tmp), args.quick))


if __name__ == "__main__":
    main()
