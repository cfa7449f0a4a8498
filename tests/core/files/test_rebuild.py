"""rebuild-manifest: entries from the gzips alone, and gzips whose headers cannot be
trusted (a copied archive, a bucket) refused one by one while the rest is rebuilt."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

from coldkeep.core.base.layout import Layout
from coldkeep.core.base.ratelimit import UNLIMITED
from coldkeep.core.base.stream import EventStream
from coldkeep.core.files.rebuild import RebuildReport, rebuild_manifest
from coldkeep.core.store.manifest import Manifest

from helpers import planted

T_NS = 1_790_000_000_123_456_789


def rebuild(layout: Layout, out: Path) -> RebuildReport:
    return asyncio.run(rebuild_manifest(layout, out, EventStream(), limiter=UNLIMITED))


def entries(db: Path) -> dict[str, tuple[str, int, int]]:
    async def read() -> dict[str, tuple[str, int, int]]:
        async with await Manifest.open(db, readonly=True) as m:
            return {e.gz_path: (e.relpath, e.mode, e.mtime_ns) for e in await m.entries()}

    return asyncio.run(read())


def test_every_gzip_describes_its_entry(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "archive")
    planted(layout, "u/a.jsonl.gz", b"a.jsonl", b"alpha\n", 0o100640, T_NS)
    # A second version: its own name is versioned, the header names the file.
    planted(layout, "u/a.jsonl.0123456789ab.gz", b"a.jsonl", b"older\n", 0o100644, T_NS - 1)
    report = rebuild(layout, tmp_path / "rebuilt.db")
    assert (report.entries, report.unreadable, report.refused) == (2, [], [])
    assert entries(tmp_path / "rebuilt.db") == {
        "files/u/a.jsonl.gz": ("u/a.jsonl", 0o100640, T_NS),
        "files/u/a.jsonl.0123456789ab.gz": ("u/a.jsonl", 0o100644, T_NS - 1),
    }


def test_a_header_that_cannot_be_trusted_refuses_its_gzip_and_the_rest_is_rebuilt(
    tmp_path: Path,
) -> None:
    layout = Layout(tmp_path / "archive")
    hostile = {
        "u/up.gz": b"../../etc/cron.d/x",  # out of its directory
        "u/abs.gz": b"/etc/passwd",
        "u/dots.gz": b"..",
        "u/long.gz": b"x" * 300,  # longer than any file name
    }
    for rel, name in hostile.items():
        planted(layout, rel, name, b"payload\n", 0o100644, T_NS)
    planted(layout, "u/time.gz", b"time.jsonl", b"t\n", 0o100644, 1 << 63)  # no clock
    planted(layout, "u/suid.gz", b"tool", b"#!/bin/sh\n", 0o104755, T_NS)  # set-user-id
    planted(layout, "u/fine.gz", b"fine.jsonl", b"fine\n", 0o100600, T_NS)
    # A terminal escape is a name's own bytes (escaped where it is shown).
    planted(layout, "u/esc.gz", b"\x1b]0;owned\x07report.jsonl", b"e\n", 0o100644, T_NS)

    report = rebuild(layout, tmp_path / "rebuilt.db")

    refused = {line.split(":", 1)[0] for line in report.refused}
    assert refused == {f"files/{rel}" for rel in [*hostile, "u/time.gz"]}
    assert all(": refused: " in line for line in report.refused), report.refused
    got = entries(tmp_path / "rebuilt.db")
    assert got == {
        "files/u/suid.gz": ("u/tool", stat.S_IFREG | 0o755, T_NS),  # no set-user-id back
        "files/u/fine.gz": ("u/fine.jsonl", 0o100600, T_NS),
        "files/u/esc.gz": ("u/\x1b]0;owned\x07report.jsonl", 0o100644, T_NS),
    }
    assert all((layout.files / rel).exists() for rel in hostile), "refused, left as found"
