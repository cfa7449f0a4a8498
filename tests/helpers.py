"""Test helpers: real temporary trees and realistic data."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from coldkeep.core.layout import Layout

DAY_NS = 86_400 * 1_000_000_000


@dataclass
class Roots:
    """A live tree and an archive root side by side in a temp dir."""

    base: Path
    live: Path
    archive: Path

    @property
    def layout(self) -> Layout:
        return Layout(self.archive)

    def write(self, relpath: str, data: bytes, *, age_days: float = 30.0) -> Path:
        path = self.live / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        mtime = time.time_ns() - int(age_days * DAY_NS)
        os.utime(path, ns=(mtime, mtime))
        return path


def jsonl(n_lines: int, seed: int = 0) -> bytes:
    """Realistic-looking event lines: compressible, not trivially so."""
    rnd = random.Random(seed)
    kinds = ["webhook_event", "ci_completed", "recheck_noop", "pr_closed"]
    return "".join(
        f'{{"id":{i},"ts":{1_700_000_000_000 + i * 977},"kind":"{rnd.choice(kinds)}",'
        f'"repo":"org/r{rnd.randint(1, 40)}","sha":"{rnd.getrandbits(160):040x}"}}\n'
        for i in range(n_lines)
    ).encode()


def gunzip(path: Path) -> bytes:
    """The system's gunzip, as an operator would check."""
    import subprocess

    return subprocess.run(["gunzip", "-c", str(path)], check=True, capture_output=True).stdout
