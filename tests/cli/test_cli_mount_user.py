"""``coldkeep mount`` run by a user who is not root: the mount made through the
setuid ``fusermount3`` (the kernel's table says whose it is), its files shown
as that user's and read whole, closed to everyone else (root included), and
ended by ``fusermount3 -u`` or SIGTERM with exit 0; where this user cannot
mount or read the manifest, one line says why and what to do.

Each mount runs in a mount namespace of its own whose ``/dev/fuse`` is a node of
the mode a test picks (a host's udev makes it 0666; a bare VM may leave it
0600), so nothing of the host's is changed. The user is ``nobody``, given only
``CAP_DAC_READ_SEARCH`` so that it can reach this interpreter and checkout
(under root's folders here); it cannot write where root owns, and its archive
is its own. Skipped, with the reason, where the machine cannot do this."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultfs.mount import unavailable_reason

from helpers import COLDKEEP, DAY_NS, EVERY_FILE, ck

USER = 65534  # nobody
AS_USER = [
    "setpriv",
    f"--reuid={USER}",
    f"--regid={USER}",
    "--clear-groups",
    "--inh-caps=+dac_read_search",
    "--ambient-caps=+dac_read_search",
]
DATA = b"an old line\n" * 1000


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "switching to another user needs root"
    for tool in ("setpriv", "unshare", "nsenter", "fusermount3"):
        if shutil.which(tool) is None:
            return f"needs {tool} (util-linux, fuse3)"
    fusermount = shutil.which("fusermount3")
    assert fusermount is not None
    if not os.stat(fusermount).st_mode & stat.S_ISUID:
        return f"{fusermount} is not setuid root: no user can mount with it"
    reason = unavailable_reason()
    if reason is not None:
        return f"no FUSE mount here: {reason}"
    probe = subprocess.run(
        [*AS_USER, sys.executable, "-c", "import mfusepy, coldkeep.core.ops.mount"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        return f"uid {USER} cannot run {sys.executable} with coldkeep: {last}"
    return None


@pytest.fixture(scope="module")
def can() -> None:
    reason = _why_not()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture
def home(can: None) -> Iterator[Path]:
    """A folder of the user's own, where it may make a mountpoint (fusermount3
    checks the mountpoint as the user, without the capability)."""
    top = Path(tempfile.mkdtemp(prefix="ck-user-"))
    os.chown(top, USER, USER)
    try:
        yield top
    finally:
        shutil.rmtree(top)


def _site(home: Path, owner: int) -> Path:
    site = home / "site"
    (site / "live" / "app").mkdir(parents=True)
    (site / "coldkeep.toml").write_text(EVERY_FILE)
    path = site / "live" / "app" / "old.log"
    path.write_bytes(DATA)
    old = path.stat().st_mtime_ns - 30 * DAY_NS
    os.utime(path, ns=(old, old))
    ck(site, "pass")
    for folder, dirs, files in os.walk(site):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, owner, owner)
    return site


def _fuse_node(home: Path, mode: int) -> Path:
    node = home / "fuse"
    try:
        os.mknod(node, stat.S_IFCHR | mode, os.stat("/dev/fuse").st_rdev)
    except OSError as err:
        pytest.skip(f"cannot make a device node in {home}: {err.strerror}")
    os.chmod(node, mode)  # past the umask
    return node


def _mount(home: Path, site: Path, mnt: Path, node: Path) -> subprocess.Popen[bytes]:
    """The mount as the user, in a namespace whose /dev/fuse is ``node``."""
    setup = 'mount --bind "$0" /dev/fuse && exec "$@"'
    cmd = [*AS_USER, *COLDKEEP, "mount", str(mnt), "--config", str(site / "coldkeep.toml")]
    with (home / "mount.log").open("wb") as out:
        return subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", setup, str(node), *cmd],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HOME": str(home)},
        )


def _table_line(pid: int, mnt: Path) -> str | None:
    """The mount's line in the kernel's table of ``pid``'s namespace."""
    with open(f"/proc/{pid}/mountinfo", encoding="utf-8") as f:
        for line in f:
            if line.split()[4] == str(mnt):
                return line
    return None


def _wait_mounted(proc: subprocess.Popen[bytes], mnt: Path, log: Path) -> str:
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, log.read_text(errors="replace")
        line = _table_line(proc.pid, mnt)
        if line is not None:
            return line
        assert time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.005)  # polling the kernel's table with a deadline, not waiting blind


def _inside(
    proc: subprocess.Popen[bytes], *cmd: str, user: bool = True
) -> subprocess.CompletedProcess[bytes]:
    """``cmd`` in the mount's namespace, as the user (or as root)."""
    who = AS_USER if user else []
    return subprocess.run(
        ["nsenter", "-t", str(proc.pid), "-m", *who, *cmd], capture_output=True, check=False
    )


@pytest.mark.parametrize("stop", ["fusermount3 -u", "SIGTERM"])
def test_a_user_mounts_reads_and_unmounts_their_archive(home: Path, stop: str) -> None:
    site = _site(home, USER)
    mnt = home / "mnt"
    mnt.mkdir()
    os.chown(mnt, USER, USER)
    proc = _mount(home, site, mnt, _fuse_node(home, 0o666))
    try:
        line = _wait_mounted(proc, mnt, home / "mount.log")
        assert f"user_id={USER}" in line, line  # made by fusermount3 for the user
        read = _inside(proc, "cat", str(mnt / "app" / "old.log"))
        assert read.returncode == 0, read.stderr
        assert hashlib.sha256(read.stdout).digest() == hashlib.sha256(DATA).digest()
        owner = _inside(proc, "stat", "-c", "%u %a", str(mnt / "app" / "old.log"))
        assert owner.stdout.split()[0] == str(USER).encode()
        # Without allow_other the mount is the user's alone, root's reads refused.
        refused = _inside(proc, "cat", str(mnt / "app" / "old.log"), user=False)
        assert refused.returncode != 0 and b"Permission denied" in refused.stderr
        if stop == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        else:
            done = _inside(proc, "fusermount3", "-u", str(mnt))
            assert done.returncode == 0, done.stderr
        assert proc.wait(timeout=30) == 0, (home / "mount.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    said = (home / "mount.log").read_text()
    assert f"coldkeep: mounted {site / 'archive'} at {mnt} (read-only)" in said
    assert "Traceback" not in said


def test_a_user_who_may_not_open_dev_fuse_is_told_what_to_do(home: Path) -> None:
    site = _site(home, USER)
    mnt = home / "mnt"
    mnt.mkdir()
    os.chown(mnt, USER, USER)
    proc = _mount(home, site, mnt, _fuse_node(home, 0o600))
    assert proc.wait(timeout=60) == 1
    said = (home / "mount.log").read_text().strip().splitlines()
    assert said == [
        f"coldkeep: cannot mount {mnt}: /dev/fuse (crw-------) may not be opened by uid "
        f"{USER}: a user's mount needs it crw-rw-rw- (fuse3's udev rule sets it so: "
        "chmod 0666 /dev/fuse), or mount as root"
    ]


def test_a_user_who_may_not_write_the_archive_folder_is_told_why(home: Path) -> None:
    site = _site(home, 0)  # root's archive, readable by everyone
    manifest = site / "archive" / "coldkeep.db"
    assert not Path(f"{manifest}-shm").exists()  # the pass took it away as it closed
    run = subprocess.run(
        [*AS_USER, *COLDKEEP, "find", "**", "--config", str(site / "coldkeep.toml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        f"coldkeep: {manifest} cannot be read as uid {USER}: SQLite needs coldkeep.db-shm "
        f"beside it (there while coldkeep has it open) and {manifest.parent} is not writable "
        "for this user to make it; run as the archive's owner or root"
    ]
    assert not Path(f"{manifest}-shm").exists()
