"""``coldkeep mount DIR`` as a user runs it: in the foreground, one line when
the mount is made, reads through it, and on SIGTERM, Ctrl-C (SIGINT) or
``fusermount3 -u`` the mount gone and exit 0; a machine without FUSE is one
line saying what to install, exit 1. Skipped, with the reason, where FUSE is
missing (but the no-FUSE case, which makes its own machine without it)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from helpers import COLDKEEP, DAY_NS, EVERY_FILE, ck, mounting


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "live" / "app").mkdir(parents=True)
    (site / "coldkeep.toml").write_text(EVERY_FILE)
    path = site / "live" / "app" / "old.log"
    path.write_bytes(b"an old line\n" * 1000)
    old = path.stat().st_mtime_ns - 30 * DAY_NS
    os.utime(path, ns=(old, old))
    ck(site, "pass")
    return site


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGINT", "fusermount3 -u"])
def test_the_mount_serves_until_stopped_then_exits_0_and_is_gone(
    site: Path, tmp_path: Path, stop: str
) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt) as proc:
        assert (mnt / "app" / "old.log").read_bytes() == b"an old line\n" * 1000
        if stop == "fusermount3 -u":
            subprocess.run(["fusermount3", "-u", str(mnt)], check=True)
        else:
            proc.send_signal(getattr(signal, stop))
        assert proc.wait(timeout=30) == 0
        assert not os.path.ismount(mnt)
    said = (tmp_path / "mnt.log").read_text()
    assert f"coldkeep: mounted {site / 'archive'} at {mnt} (read-only)" in said
    assert "Traceback" not in said


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace of its own needs root")
def test_without_dev_fuse_one_line_says_what_to_do(site: Path, tmp_path: Path) -> None:
    """Run in a mount namespace of its own whose /dev is an empty tmpfs."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cmd = [*COLDKEEP, "mount", str(mnt), "--config", str(site / "coldkeep.toml")]
    run = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount -t tmpfs none /dev && exec "$@"', "sh", *cmd],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 1, run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith(f"coldkeep: cannot mount {mnt}: /dev/fuse does not exist")
    assert "modprobe fuse" in line
    assert not os.path.ismount(mnt)
