"""Bundles of small files packed, checked and unlinked in worker processes
(``[io] processes``): what the workers write is what one process writes, byte
for byte and entry for entry; a source changed while a worker has it stays
live (tests/core/files/test_bundles.py, in both); the workers run while the
pass does and are gone after it; a worker killed mid-pass stops it with
nothing lost; and how many a pass starts. (Killed at each bundle step:
tests/crash/test_crash_cli.py.)"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configio import IoSettings
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.files.bundleprocs import FROM_MEMBERS, WorkerDied, worker_count

from helpers import JSONL_SITE, Roots, ck, entries, jsonl, sha, still_running

CONFIG = JSONL_SITE + "\n[io]\nprocesses = {processes}\n"


def small_files(roots: Roots) -> Path:
    """Four units of small files, one of them across two months."""
    for unit in range(4):
        for n in range(30):
            age = 20 + 40 * (unit == 3 and n % 2)
            roots.write(f"u{unit}/f{n:02d}.jsonl", jsonl(20 + n, seed=unit * 100 + n), age_days=age)
    return roots.base


def site_with(base: Path, to: Path, processes: int) -> Path:
    shutil.copytree(base, to, symlinks=True)
    (to / "coldkeep.toml").write_text(CONFIG.format(processes=processes))
    return to


def workers_of(pid: int) -> set[int]:
    """The processes whose parent's parent is ``pid``: the workers multiprocessing's
    fork server (a child of ``pid``) has forked."""
    parents: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            parents[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return {p for p, parent in parents.items() if parents.get(parent) == pid}


def archive_bytes(site: Path) -> dict[str, bytes]:
    files = site / "archive" / "files"
    return {
        p.relative_to(files).as_posix(): p.read_bytes() for p in files.rglob("*") if p.is_file()
    }


def placed(site: Path) -> list[tuple[object, ...]]:
    keys = ("relpath", "sha256", "bytes", "gz_path", "member_offset", "member_length", "status")
    return sorted(tuple(row[k] for k in keys) for row in entries(site))


def test_workers_write_what_one_process_writes(roots: Roots, tmp_path: Path) -> None:
    base = small_files(roots)
    alone = site_with(base, tmp_path / "alone", processes=1)
    beside = site_with(base, tmp_path / "beside", processes=2)
    seen: set[int] = set()

    async def look(name: StepName, info: StepInfo) -> None:
        if name == "bundle_written":
            seen.update(workers_of(os.getpid()))

    for site, hook in ((alone, None), (beside, look)):
        settings = load_settings(site / "coldkeep.toml")
        archiver = Archiver(settings, step=hook) if hook else Archiver(settings)
        summary = asyncio.run(archiver.run_pass())
        assert summary.files.archived == 120 and summary.files.errors == 0
        assert not list((site / "live").rglob("*.jsonl")), "every source archived and removed"
    assert seen, "the bundles were packed in worker processes"
    assert not still_running(seen, within_s=10), "the workers ended with the pass"
    assert archive_bytes(beside) == archive_bytes(alone), "the same bundles, byte for byte"
    assert placed(beside) == placed(alone)


def test_a_worker_killed_mid_pass_stops_it_with_nothing_lost(roots: Roots, tmp_path: Path) -> None:
    site = site_with(small_files(roots), tmp_path / "site", processes=2)
    live = site / "live"
    before = {p.relative_to(live).as_posix(): sha(p.read_bytes()) for p in live.rglob("*.jsonl")}

    async def kill_the_workers(name: StepName, info: StepInfo) -> None:
        if name == "bundle_written":
            for pid in workers_of(os.getpid()):
                os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would

    archiver = Archiver(load_settings(site / "coldkeep.toml"), step=kill_the_workers)
    with pytest.raises(WorkerDied, match="ended in the middle of a step"):
        asyncio.run(archiver.run_pass())
    ck(site, "recover")
    ck(site, "pass")
    archived = {r["relpath"]: r["sha256"] for r in entries(site) if r["status"] == "archived"}
    assert archived == before, "every file archived once, its bytes as they were"
    assert not list(live.rglob("*.jsonl"))


def test_how_many_workers_a_pass_starts() -> None:
    cores = os.cpu_count() or 1
    auto = IoSettings()
    assert worker_count(auto, FROM_MEMBERS - 1) == 0, "a small pass stays in one process"
    assert worker_count(auto, FROM_MEMBERS) == (cores if cores > 1 else 0)
    assert worker_count(IoSettings(processes=3), 10) == 3, "asked for: any pass with some"
    assert worker_count(IoSettings(processes=3), 0) == 0, "none without bundles of small files"
    assert worker_count(IoSettings(processes=1), 10 * FROM_MEMBERS) == 0
    assert worker_count(IoSettings(bytes_per_s=1 << 20, processes=2), 10**6) == 0, "capped"
