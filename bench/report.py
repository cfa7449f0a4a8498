"""The one table every bench script prints, and the helpers that fill it.

A row is (what, coldkeep, anchor, ratio, target, met?): plain strings, so a
script can leave a column empty where there is no anchor or no target.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

Row = tuple[str, str, str, str, str, str]
HEAD: Row = ("what", "coldkeep", "anchor", "ratio", "target", "met?")


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank); NaN for no values."""
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] if s else float("nan")


@asynccontextmanager
async def loop_lag(period_s: float = 0.005) -> AsyncIterator[list[float]]:
    """How late (ms) a ticker on the running loop woke, every ``period_s``,
    for as long as the block runs: the loop's lag, as a person at the
    console would feel it."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            await asyncio.sleep(period_s)
            lags.append((time.perf_counter() - t0 - period_s) * 1000)

    tick = asyncio.create_task(ticker())
    try:
        yield lags
    finally:
        stop.set()
        await tick


def tool_version(cmd: list[str]) -> str:
    """The first line ``cmd`` (a tool's version command) prints, or that the
    tool is not installed."""
    if shutil.which(cmd[0]) is None:
        return f"{cmd[0]}: not installed"
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).splitlines()[0].strip()


def size_of(path: Path) -> int:
    """The bytes of the file ``path``, or of every file under the folder (links
    not followed); 0 where there is nothing."""
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def met(ok: bool) -> str:
    return "yes" if ok else "NO"


def print_table(rows: list[Row]) -> None:
    widths = [max(len(r[i]) for r in [HEAD, *rows]) for i in range(len(HEAD))]
    for r in [HEAD, tuple("-" * w for w in widths), *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), flush=True)
