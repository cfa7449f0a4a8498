"""The archive mutex, between real processes."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from coldkeep.core.base.lock import ArchiveLock, LockHeld, read_holder

HOLD = """
import sys
from pathlib import Path
from coldkeep.core.base.lock import ArchiveLock
lock = ArchiveLock.try_acquire(Path(sys.argv[1]), command="coldkeep pass --demo")
print("held", flush=True)
sys.stdin.read()
"""


def hold_in_subprocess(root: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_second_taker_is_told_who_holds_it(tmp_path: Path) -> None:
    proc = hold_in_subprocess(tmp_path)
    try:
        with pytest.raises(LockHeld) as err:
            ArchiveLock.try_acquire(tmp_path, command="coldkeep sweep")
        assert err.value.holder is not None and err.value.holder.pid == proc.pid
        assert f"pid {proc.pid}" in str(err.value) and "coldkeep pass --demo" in str(err.value)
        assert err.value.holder.alive
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_holder_frees_the_lock(tmp_path: Path) -> None:
    proc = hold_in_subprocess(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    stale = read_holder(tmp_path / ".lock")
    assert stale is not None and stale.pid == proc.pid and not stale.alive
    with ArchiveLock.try_acquire(tmp_path, command="coldkeep recover") as lock:
        assert lock.holder.pid == os.getpid()
        holder = read_holder(tmp_path / ".lock")
        assert holder is not None and holder.command == "coldkeep recover"
    assert read_holder(tmp_path / ".lock") is None, "released: no holder record left"


async def test_acquire_waits_for_the_holder_to_let_go(tmp_path: Path) -> None:
    proc = hold_in_subprocess(tmp_path)
    with pytest.raises(LockHeld):
        await ArchiveLock.acquire(tmp_path, wait=0)
    waiting = asyncio.create_task(ArchiveLock.acquire(tmp_path, wait=30))
    assert proc.stdin is not None
    proc.stdin.close()  # the holder exits, the kernel drops its lock
    proc.wait()
    lock = await waiting
    assert lock.held
    lock.release()


def test_the_lock_is_reentrant_only_through_one_holder(tmp_path: Path) -> None:
    with ArchiveLock.try_acquire(tmp_path), pytest.raises(LockHeld):
        ArchiveLock.try_acquire(tmp_path)


def test_the_lock_file_is_owner_only_whatever_the_umask_or_an_older_file_says(
    tmp_path: Path,
) -> None:
    (tmp_path / ".lock").write_text("")
    (tmp_path / ".lock").chmod(0o666)  # left wide by an older version or a umask
    old = os.umask(0)
    try:
        with ArchiveLock.try_acquire(tmp_path, "test"):
            assert stat.S_IMODE((tmp_path / ".lock").stat().st_mode) == 0o600
    finally:
        os.umask(old)
