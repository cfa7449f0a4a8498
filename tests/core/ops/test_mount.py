"""``mount`` on a real FUSE mount of a real site: every archived file (a gzip of
its own, bundle members, names that are not UTF-8 or hold a newline, the newest
of two versions) reads through the mount as the bytes its manifest entry's
sha256 names, with its original size, mtime and mode; a write is EROFS; the
archive is left as it was. Skipped, with the reason, where FUSE is missing."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from faultfs.mount import _unmount, unavailable_reason

from helpers import DAY_NS, ck, entries, jsonl

CONFIG = """live_root = "live"
archive_root = "archive"
mode = "on"
[files]
include = ["**"]
min_age_days = 1
"""
SERVE = (
    "import sys; from pathlib import Path; "
    "from coldkeep.core.base.config import load_settings; "
    "from coldkeep.core.ops.mount import serve; "
    "serve(load_settings(Path(sys.argv[1])), Path(sys.argv[2]))"
)


def _write(site: Path, rel: bytes, data: bytes, mode: int = 0o640) -> None:
    path = os.fsencode(site / "live") + b"/" + rel
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)
    old = os.stat(path).st_mtime_ns - 30 * DAY_NS
    os.utime(path, ns=(old, old))


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """Two passes: a big file in a gzip of its own, small ones in a bundle, odd
    names, and two versions of ``u/v.txt``."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "coldkeep.toml").write_text(CONFIG)
    _write(site, b"u/big.jsonl", jsonl(60_000, seed=1), 0o600)  # ~7 MiB: past the window
    for n in range(3):
        _write(site, f"u/deep/small-{n}.jsonl".encode(), jsonl(150, seed=10 + n))
    for raw in (b"u/r\xe9sum\xe9.log", b"u/two\nlines.log", b"u/at@2.log"):
        _write(site, raw, b"data of " + raw + b"\n", 0o444)
    _write(site, b"u/v.txt", b"version one\n")
    ck(site, "pass")
    _write(site, b"u/v.txt", b"version two\n")
    ck(site, "pass")
    return site


@pytest.fixture
def mounted(server: tuple[Path, subprocess.Popen[bytes]]) -> Path:
    return server[0]


@pytest.fixture
def server(site: Path, tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no FUSE mount here: {reason}")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "mount.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, str(site / "coldkeep.toml"), str(mnt)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 30
    try:
        while not os.path.ismount(mnt):
            assert proc.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.005)  # polling the mount with a deadline, not waiting blind
        yield mnt, proc
    finally:
        _unmount(mnt)
        proc.wait(timeout=30)


def _newest(site: Path) -> dict[bytes, dict[str, object]]:
    newest: dict[bytes, dict[str, object]] = {}
    for e in sorted(entries(site), key=lambda e: (e["mtime_ns"], e["id"])):
        rel = e["relpath"]
        newest[rel if isinstance(rel, bytes) else os.fsencode(rel)] = e
    return newest


def test_every_file_reads_as_its_sha256_with_its_attributes(site: Path, mounted: Path) -> None:
    newest = _newest(site)
    assert any(e["member_offset"] is not None for e in newest.values())  # bundle members too
    seen = set()
    for dirpath, dirs, names in os.walk(os.fsencode(mounted)):
        if dirpath == os.fsencode(mounted):
            dirs.remove(b".versions")
        for name in names:
            path = os.path.join(dirpath, name)
            seen.add(os.path.relpath(path, os.fsencode(mounted)))
    assert seen == set(newest)
    for rel, e in newest.items():
        path = os.path.join(os.fsencode(mounted), rel)
        with open(path, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == e["sha256"], rel
        st = os.stat(path)
        assert st.st_size == e["bytes"]
        assert st.st_mtime_ns == e["mtime_ns"]
        assert st.st_mode & 0o7777 == int(e["mode"]) & 0o7777  # type: ignore[call-overload]
    assert (mounted / "u" / "v.txt").read_bytes() == b"version two\n"


def test_writes_are_refused_and_the_archive_is_untouched(site: Path, mounted: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in (site / "archive").rglob("*") if p.is_file()}
    for attempt in (
        lambda: (mounted / "u" / "v.txt").open("ab"),
        lambda: (mounted / "u" / "new.txt").write_bytes(b"x"),
        (mounted / "u" / "v.txt").unlink,
        (mounted / "u" / "dir").mkdir,
    ):
        with pytest.raises(OSError) as err:
            attempt()
        assert err.value.errno == errno.EROFS
    after = {p: p.stat().st_mtime_ns for p in (site / "archive").rglob("*") if p.is_file()}
    assert after == before


@pytest.fixture
def tampered(site: Path) -> Path:
    """The site with ``u/v.txt``'s newest version recorded under another sha256."""
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.execute(
            "UPDATE entries SET sha256 = ? WHERE id = "
            "(SELECT max(id) FROM entries WHERE relpath = 'u/v.txt')",
            ["0" * 64],
        )
    return site


def test_bytes_that_are_not_the_archived_file_fail_the_read(tampered: Path, mounted: Path) -> None:
    with pytest.raises(OSError) as err:
        (mounted / "u" / "v.txt").read_bytes()
    assert err.value.errno == errno.EIO
    # The other files still read.
    assert (mounted / "u" / "at@2.log").read_bytes() == b"data of u/at@2.log\n"


def test_sigterm_unmounts_and_the_server_exits(
    server: tuple[Path, subprocess.Popen[bytes]],
) -> None:
    mnt, proc = server
    assert (mnt / "u" / "v.txt").read_bytes() == b"version two\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert not os.path.ismount(mnt)


def test_reads_out_of_order_give_the_right_bytes(mounted: Path) -> None:
    """Backwards through a file bigger than what a handle keeps in memory: each
    read before what is kept inflates again from the start."""
    data = jsonl(60_000, seed=1)
    step = 1 << 20
    fd = os.open(mounted / "u" / "big.jsonl", os.O_RDONLY)
    try:
        for offset in [*range(len(data) - 1000, 0, -step), 0, len(data) // 2]:
            assert os.pread(fd, 4096, offset) == data[offset : offset + 4096], offset
    finally:
        os.close(fd)
