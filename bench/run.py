"""Every speed and memory target in one run, coldkeep beside the tools an operator would
otherwise script, on identical copies of data this script builds.

    python bench/run.py [--quick] [--scale-site DIR] [--part NAME ...]   (or: make bench)

One table: what, coldkeep, anchor, ratio, target, met?. The parts, each also
runnable alone:

  bench/files.py     file archiving vs pigz and a gzip + sha256sum script,
                     output size vs gzip -6, restore vs gunzip -c, verify,
                     peak RSS on a 2 GiB file, rate-cap accuracy
  bench/events.py    the event move vs the sqlite3 CLI's one-shot move, with a
                     concurrent writer: rows/s, writer p99, WAL peak; at
                     1,000,000 rows and at 10,000,000
  bench/console.py   the console's loop lag during a pass, start-up and filter
                     time on a 1,000,000-entry manifest, and the trends read
  bench/scale.py     status, plan, a no-op pass, find and the console's start-up
                     and RSS on a 10,000,000-entry manifest
  bench/remote.py    shipping to moto's S3 server vs a PUT per gzip (time and
                     requests); one file's remote restore (bytes transferred)
  bench/query.py     SQL over archived events: coldkeep query vs the sqlite3 CLI
                     on one merged database; the app's writer during queries
  bench/sealing.py   client-side sealing (age) of a 64 MiB gzip and of a bundle
                     a stream per member, and opening, vs the age CLI
  bench/sealedread.py  restoring sealed remote copies (--identity) vs the same
                     archive shipped plain, and vs age -d | gunzip -c
  bench/fleet.py     the fleet at 1,000 sites: fleet status cold and warm and
                     its RSS, the view's table of sites, a filter over all
  bench/readpath.py  reading without a restore: coldkeep mount vs ratarmount
                     on a tar.gz of the same files and tar -xzf; sequential
                     and 4 KiB random reads; find, versions and the mount at
                     1,000,000 entries
  bench/peers.py     coldkeep pass vs restic backup and borg create (zlib,6
                     and lz4) on 10,000 small files and on the mix
  bench/lake.py      the fleet's lake: a month as Parquet vs sqlite3 -csv, its
                     size, query --fleet's GROUP BY vs fetching every site's
                     months and querying them, a one-month lookup's objects

--quick runs everything small (about a minute); the numbers then say nothing
about the targets, only that every row can be measured. --part NAME measures
that part alone (repeatable). --scale-site DIR keeps
bench/scale.py's site (its rows are data, written in a quarter of an hour) for
the next run, which reuses it: its migration row then says so.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import console
import events
import files
import fleet
import lake
import peers
import query
import readpath
import remote
import scale
import sealedread
import sealing
from report import Row, print_table, tool_version

ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    anchors = (["gzip", "--version"], ["pigz", "--version"], ["sqlite3", "-version"])
    tools = "; ".join(tool_version(c) for c in anchors)
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}; {tools}"


# In the order they run; each measures in a folder of its own.
PARTS = (
    "files", "events", "console", "scale", "remote", "sealing", "sealedread", "query", "fleet",
    "readpath", "peers", "lake",
)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, under a minute")
    ap.add_argument(
        "--scale-site",
        type=Path,
        help="bench/scale.py's 10,000,000-entry site: built there and kept, or reused "
        "(its build takes a quarter of an hour)",
    )
    ap.add_argument(
        "--part",
        action="append",
        choices=PARTS,
        help="measure only this part (repeatable; default: every part)",
    )
    args = ap.parse_args()
    chosen = set(args.part or PARTS)
    print(machine(), flush=True)
    t0 = time.perf_counter()
    rows: list[Row] = []
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        work = Path(tmp)
        small, large = (20_000, 60_000) if args.quick else (1_000_000, 10_000_000)
        entries = 20_000 if args.quick else 10_000_000
        rounds = 1 if args.quick else 5
        measures: dict[str, Callable[[Path], list[Row]]] = {
            "files": lambda d: files.measure(d, args.quick),
            "events": lambda d: events.at_two_sizes(small, large, 200.0, d),
            "console": lambda d: console.measure(d, args.quick),
            "scale": lambda d: scale.measure(args.scale_site or d, entries),
            "remote": lambda d: remote.measure(d, args.quick),
            "sealing": lambda d: sealing.measure(d, args.quick, rounds=rounds),
            "sealedread": lambda d: sealedread.measure(d, args.quick, rounds),
            "query": lambda d: query.measure(d, args.quick),
            "fleet": lambda d: fleet.measure(d, args.quick),
            "readpath": lambda d: readpath.measure(d, args.quick),
            "peers": lambda d: peers.measure(d, args.quick),
            "lake": lambda d: lake.measure(d, args.quick),
        }
        for part in PARTS:
            if part not in chosen:
                continue
            if part == "readpath" and not Path("/dev/fuse").exists():
                print("no /dev/fuse: the read path's rows are left out", flush=True)
                continue
            (work / part).mkdir()
            rows += measures[part](work / part)
            shutil.rmtree(work / part)  # a full run's parts would not fit on one disk together
    print(f"(measured in {time.perf_counter() - t0:.0f} s)\n", flush=True)
    print_table(rows)


if __name__ == "__main__":
    main()
