"""The benchmark runs end to end: ``bench/run.py --quick``, a part at a time (its
numbers are for docs/performance.md; here only that every row is measured and
printed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "run.py"
# Each part's rows, as bench/run.py --part NAME prints them.
ROWS: dict[str, tuple[str, ...]] = {
    "files": (
        "file archiving, ",
        "file archiving (vs gzip -6",
        "output size (vs gzip -6)",
        "restore, all ",
        "verify, every gzip",
        "  the protocol's floor: its steps bare, every fsync",
        "  the protocol's floor: its steps bare, no fsync at all",
        "  coldkeep's archiving as a share of that floor",
        "rate cap, io.bytes_per_s",
        "peak RSS, one ",
    ),
    "events": (
        "event move rows/s",
        "writer commit p50 / p99",
        "WAL peak (MB)",
        "writer errors",
        "event move rows/s (",
        "event move rows/s, ",
    ),
    "console": (
        "console loop lag p50 / p99",
        "console start-up to first full paint",
        "restore browser: filter",
        "trends at ",
    ),
    "scale": (
        "status (",
        "plan (",
        "a pass with nothing to do (",
        "find a substring (",
        "find a glob (",
        "expire's plan (",
        "console peak RSS (",
        "restore browser at ",
        "manifest size per entry (",
        "the schema migrations on upgrade from ",
    ),
    "remote": (
        "ship 60 small archived files",
        "restore one 20 KiB file from a",
        "cat the same file (GETs",
        "a month of the demo (",
        "  the same in GLACIER_IR vs STANDARD",
        "thaw one unit (",
    ),
    "sealing": (
        "sealing one ",
        "opening it, plaintext hashed (vs ",
        "sealing a ",
    ),
    "sealedread": (
        "restore one 1 MiB file, sealed vs plain",
        "  the same vs ",
        "restore 30 bundle members, sealed vs plain",
    ),
    "query": (
        "GROUP BY kind over 12 months",
        "a lookup by id in one month, --engine duckdb",
        "a lookup by id in one month, --engine sqlite",
        "a lookup by id in one month, sqlite engine alone",
        "a lookup by id in a remote-only month",
        "Events screen: E to its first chart",
        "Events screen: the next 500 rows",
        "the app's writer (200/s) during 3 GROUP BYs",
    ),
    "fleet": (
        "fleet status --json, 30 sites, cold",
        "fleet status --json, 30 sites, warm",
        "  its peak RSS",
        "the table's sites, judged, sorted, warm (30)",
        "the fleet view's first sites shown, warm (30)",
        "a filter over 30 sites' catalogs, the next key",
        "a filter keystroke, 20 sites x ",
        "  the loop's greatest lag meanwhile",
        "  g (find) over the 20 sites",
    ),
    # Each peer's rows say "not installed" where it is not (make peers).
    "peers": (
        "100 small files: coldkeep pass vs restic backup",
        "100 small files: coldkeep pass vs borg create -C zlib,6",
        "100 small files: coldkeep pass vs borg create -C lz4",
        "the mix of ",
    ),
    "lake": (
        "a month as Parquet (",
        "  its size vs the SQLite month",
        "GROUP BY kind, 3 sites x 12 months",
        "a lookup by id, one site's month: lake objects read",
    ),
    # Measured only where FUSE is (bench/run.py says so when it is not).
    "readpath": (
        "a ~20 KiB bundle member read whole through the mount",
        "mount ready, ",
        "read every small file through the mount",
        "sequential read of the big file through the mount",
        "4 KiB random reads in the big file",
        "mount ready at ",
        "find (a path's substring / a glob)",
        "versions PATH at ",
    ),
}


# A part a test: each one a minute at most, and spread over the workers
# (tests/conftest.py groups them; the read path's with the mounting files).
@pytest.mark.parametrize("part", list(ROWS))
def test_the_quick_benchmark_prints_every_row(part: str) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--part", part],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    fuse = Path("/dev/fuse").exists()
    if part == "readpath" and not fuse:
        assert "no /dev/fuse: the read path's rows are left out" in out.stdout
        pytest.skip("no /dev/fuse: the read path is not measured")
    table = out.stdout[out.stdout.index("what ") :].splitlines()
    for row in ROWS[part]:
        line = next((r for r in table if r.startswith(row)), None)
        assert line is not None, f"no row {row!r} in:\n{out.stdout}"
        # Two spaces separate the columns; the coldkeep column is never empty.
        cells = [c for c in line.split("  ") if c.strip()]
        assert len(cells) >= 3, line
