"""libfuse 2 installed beside libfuse 3 (borgbackup brings ``libfuse.so.2``):
mfusepy on its own would load libfuse 2; the faultfs kit and ``coldkeep mount``
load libfuse 3 (core/ops/libfuse.py) and mount. libfuse 2 is put first on the
loader's path (a folder of links to a real ``libfuse.so.2`` on
``LD_LIBRARY_PATH``), and what each mounting process has mapped is read from
``/proc/PID/maps``. Skipped, with the reason, where FUSE cannot mount or no
``libfuse.so.2`` is installed (``make pytest`` installs it as root). Without
libfuse 3, ``coldkeep mount`` says so in one line, naming what to install."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from faultfs.fixture import start_or_skip
from faultfs.mount import FaultFS, unavailable_reason

from helpers import COLDKEEP, EVERY_FILE, ck, mounting, write_old

# Loaded in a process of its own, so this one never has libfuse 2 mapped.
_WHERE = """
import ctypes, sys
try:
    ctypes.CDLL("libfuse.so.2")
except OSError:
    sys.exit(1)
print(next(line.split()[-1] for line in open("/proc/self/maps") if "/libfuse.so.2" in line))
"""


def _libfuse2() -> str | None:
    """A real ``libfuse.so.2``'s path, as the loader finds it; None without one."""
    where = subprocess.run(
        [sys.executable, "-c", _WHERE], capture_output=True, text=True, check=False
    )
    return where.stdout.strip() if where.returncode == 0 else None


def _mapped(pid: int) -> set[str]:
    """The libfuse files process ``pid`` has mapped."""
    with open(f"/proc/{pid}/maps", encoding="utf-8") as maps:
        return {os.path.basename(line.split()[-1]) for line in maps if "/libfuse" in line}


@pytest.fixture
def libfuse2_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """libfuse 2 where mfusepy's own lookup (``find_library("fuse")``) finds it
    first, for this test and the processes it starts."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no FUSE mount here: {reason}")
    real = _libfuse2()
    if real is None:
        pytest.skip("no libfuse.so.2 here (apt-get install libfuse2, or libfuse2t64)")
    links = tmp_path / "libs"
    links.mkdir()
    # libfuse.so.2 for the loader; libfuse.so for the linker search that
    # find_library falls back to where ldconfig's cache does not have it.
    for name in ("libfuse.so.2", "libfuse.so"):
        (links / name).symlink_to(real)
    path = os.pathsep.join(p for p in (str(links), os.environ.get("LD_LIBRARY_PATH")) if p)
    monkeypatch.setenv("LD_LIBRARY_PATH", path)
    monkeypatch.delenv("FUSE_LIBRARY_PATH", raising=False)
    alone = subprocess.run(
        [sys.executable, "-c", "import mfusepy; print(mfusepy.fuse_version_major)"],
        capture_output=True,
        text=True,
        check=False,
    )
    if alone.stdout.strip() != "2":
        pytest.skip(
            f"mfusepy on its own does not load {real} here even first on LD_LIBRARY_PATH "
            f"(ctypes' find_library needs ldconfig's cache, or binutils): {alone.stderr[-200:]}"
        )


def test_faultfs_mounts_over_libfuse3(libfuse2_first: None, tmp_path: Path) -> None:
    fs = start_or_skip(FaultFS(tmp_path / "backing", tmp_path / "mnt"))
    try:
        fs.path("written").write_bytes(b"through the mount\n")
        assert (tmp_path / "backing" / "written").read_bytes() == b"through the mount\n"
        assert fs.pid is not None
        mapped = _mapped(fs.pid)
    finally:
        fs.stop()
    assert mapped and all(name.startswith("libfuse3.so.3") for name in mapped), mapped


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    (site / "coldkeep.toml").write_text(EVERY_FILE)
    write_old(site, b"app/old.log", b"an old line\n" * 100)
    ck(site, "pass")
    return site


def test_coldkeep_mount_mounts_over_libfuse3(
    libfuse2_first: None, site: Path, tmp_path: Path
) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt) as proc:
        assert (mnt / "app" / "old.log").read_bytes() == b"an old line\n" * 100
        mapped = _mapped(proc.pid)
    assert mapped and all(name.startswith("libfuse3.so.3") for name in mapped), mapped


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace of its own needs root")
@pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse: that line comes first")
def test_without_libfuse3_one_line_says_what_to_install(site: Path, tmp_path: Path) -> None:
    """Run in a mount namespace of its own whose loader cache is empty, with no
    PATH: find_library has no linker to ask either, so libfuse 3 is not found."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cmd = [*COLDKEEP, "mount", str(mnt), "--config", str(site / "coldkeep.toml")]
    hide = 'mount --bind /dev/null /etc/ld.so.cache && PATH=/nonexistent exec "$@"'
    run = subprocess.run(
        ["unshare", "-m", "sh", "-c", hide, "sh", *cmd],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    [line] = run.stderr.splitlines()
    assert line == (
        f"coldkeep: cannot mount {mnt}: libfuse 3 is not installed "
        "(apt-get install fuse3 libfuse3-3; dnf install fuse3)"
    )
    assert not os.path.ismount(mnt)
