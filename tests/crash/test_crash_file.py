"""SIGKILL at every announced step of archiving and restoring one file, in a real
subprocess; then recovery; then the operation again. Nothing is ever lost or
duplicated, and nothing is left but what recovery removes."""

from __future__ import annotations

import hashlib
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from coldkeep.core.base.codec import Codec
from coldkeep.core.base.steps import ARCHIVE_STEPS, RESTORE_STEPS
from coldkeep.core.files.filemove import Archived, FileMover
from coldkeep.core.files.gzfile import Restored
from coldkeep.core.files.recovery import Recovery
from coldkeep.core.store.entries import Entry
from coldkeep.core.store.manifest import Manifest

from helpers import Roots, gunzip, jsonl

pytestmark = pytest.mark.crash
DRIVER = Path(__file__).with_name("driver.py")
RELPATH = "unit-7/2026/events.jsonl"
DATA = jsonl(60_000)  # ~6 MiB: several chunks


def run_driver(op: str, roots: Roots, what: str, kill_at: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DRIVER), op, str(roots.live), str(roots.archive), what, kill_at],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def partials(roots: Roots) -> list[Path]:
    return [p for p in roots.base.rglob("*") if p.name.endswith((".partial", ".restore-partial"))]


def entries(roots: Roots) -> list[tuple[int, str, str, str, int]]:
    with sqlite3.connect(roots.layout.manifest) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return db.execute(
            "SELECT id, relpath, gz_path, status, source_present FROM entries ORDER BY id"
        ).fetchall()


def gzips(roots: Roots) -> list[Path]:
    return sorted(roots.layout.files.rglob("*.gz"))


def assert_data_safe(roots: Roots) -> None:
    """The original bytes are live, or in a committed entry's gzip (system gunzip)."""
    src = roots.live / RELPATH
    if src.exists():
        assert src.read_bytes() == DATA
        return
    committed = [e for e in entries(roots) if e[1] == RELPATH]
    assert committed, "the source is gone and no entry was committed"
    assert any(gunzip(roots.archive / e[2]) == DATA for e in committed)


async def recover(roots: Roots) -> None:
    async with await Manifest.open(roots.layout.manifest) as m:
        await Recovery(m, FileMover(roots.live, roots.layout, m, Codec())).run()


async def archive_again(roots: Roots) -> None:
    async with await Manifest.open(roots.layout.manifest) as m:
        result = await FileMover(roots.live, roots.layout, m, Codec()).archive(RELPATH)
        assert isinstance(result, Archived)


def assert_archived_once(roots: Roots) -> None:
    assert not (roots.live / RELPATH).exists()
    rows = entries(roots)
    assert len(rows) == 1, f"exactly one entry for the file, got {rows}"
    (_, relpath, gz_path, status, source_present) = rows[0]
    assert (relpath, status, source_present) == (RELPATH, "archived", 0)
    assert gzips(roots) == [roots.archive / gz_path], "no duplicate gzip"
    assert gunzip(roots.archive / gz_path) == DATA
    subprocess.run(["gzip", "-t", str(roots.archive / gz_path)], check=True)
    assert partials(roots) == []


@pytest.mark.parametrize("kill_at", ARCHIVE_STEPS)
async def test_archive_killed_at_each_step(roots: Roots, kill_at: str) -> None:
    roots.write(RELPATH, DATA)
    done = run_driver("archive", roots, RELPATH, kill_at)
    assert done.returncode == -signal.SIGKILL, done.stderr

    assert_data_safe(roots)
    leftovers = partials(roots)
    assert all(p.name.endswith(".partial") for p in leftovers)
    if gzips(roots) and not entries(roots):
        assert (roots.live / RELPATH).read_bytes() == DATA, "an orphan needs its source"

    await recover(roots)
    assert partials(roots) == []
    assert_data_safe(roots)
    entered = {roots.archive / e[2] for e in entries(roots)}
    assert set(gzips(roots)) == entered, "recovery leaves no gzip without an entry"

    if (roots.live / RELPATH).exists():
        await archive_again(roots)
    assert_archived_once(roots)


async def archived_entry(roots: Roots) -> Entry:
    roots.write(RELPATH, DATA)
    async with await Manifest.open(roots.layout.manifest) as m:
        result = await FileMover(roots.live, roots.layout, m, Codec()).archive(RELPATH)
    assert isinstance(result, Archived) and not (roots.live / RELPATH).exists()
    return result.entry


@pytest.mark.parametrize("kill_at", RESTORE_STEPS)
async def test_restore_killed_at_each_step(roots: Roots, kill_at: str) -> None:
    entry = await archived_entry(roots)
    target = roots.live / RELPATH
    done = run_driver("restore", roots, str(entry.id), kill_at)
    assert done.returncode == -signal.SIGKILL, done.stderr

    # The archive is untouched; the target is absent or whole, never partial.
    assert gunzip(roots.archive / entry.gz_path) == DATA
    assert not target.exists() or target.read_bytes() == DATA
    assert all(p == target.with_name(target.name + ".restore-partial") for p in partials(roots))

    await recover(roots)
    assert partials(roots) == []
    async with await Manifest.open(roots.layout.manifest) as m:
        assert await m.restore_intents() == []
        if not target.exists():
            mover = FileMover(roots.live, roots.layout, m, Codec())
            assert isinstance(await mover.restore(entry, target, root=roots.live), Restored)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == entry.sha256
    assert target.stat().st_mtime_ns == entry.mtime_ns
    assert gzips(roots) == [roots.archive / entry.gz_path]


def test_an_uninterrupted_run_reports_its_result(roots: Roots) -> None:
    roots.write(RELPATH, DATA)
    done = run_driver("archive", roots, RELPATH, "none")
    assert (done.returncode, done.stdout) == (0, "archived\n"), done.stderr
    assert_archived_once(roots)
