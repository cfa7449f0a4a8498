"""``mount`` on a real FUSE mount of a real site, through the real CLI: every
archived file (a gzip of its own, bundle members, names that are not UTF-8 or
hold a newline, every byte but "/" and NUL, the newest of two versions) reads
through the mount as the bytes its manifest entry's sha256 names, with its
original size, mtime and mode; every version under ``.versions``; the live
tree merged in; a pass during the mount shows; a write is EROFS; the archive
is left as it was. Skipped, with the reason, where FUSE is missing."""

from __future__ import annotations

import asyncio
import errno
import gzip
import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coldkeep.core.base.layout import Layout
from coldkeep.core.files.reader import GzipAt
from coldkeep.core.ops.mount import SMALL, Smalls
from coldkeep.core.store.entries import Entry
from coldkeep.core.store.manifest import Manifest

from helpers import (
    DAY_NS,
    EVERY_FILE,
    ck,
    entries,
    eventually,
    jsonl,
    mounting,
    preads_match,
    write_old,
    write_raw,
)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """Two passes: a big file in a gzip of its own, small ones in a bundle, odd
    names, and two versions of ``u/v.txt``."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "coldkeep.toml").write_text(EVERY_FILE)
    write_old(site, b"u/big.jsonl", jsonl(60_000, seed=1), 0o600)  # ~7 MiB: past the window
    for n in range(3):
        write_old(site, f"u/deep/small-{n}.jsonl".encode(), jsonl(150, seed=10 + n))
    for raw in (b"u/r\xe9sum\xe9.log", b"u/two\nlines.log", b"u/at@2.log"):
        write_old(site, raw, b"data of " + raw + b"\n", 0o444)
    write_old(site, b"u/v.txt", b"version one\n")
    ck(site, "pass")
    write_old(site, b"u/v.txt", b"version two\n")
    ck(site, "pass")
    return site


@pytest.fixture
def mounted(server: tuple[Path, subprocess.Popen[bytes]]) -> Path:
    return server[0]


@pytest.fixture
def server(site: Path, tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[bytes]]]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt) as proc:
        yield mnt, proc


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


def test_a_gzip_path_leaving_the_archive_is_never_read(site: Path, tmp_path: Path) -> None:
    """A damaged or edited manifest entry whose gzip path climbs out of
    archive_root: EIO, nothing outside read (small and large versions alike)."""
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        for rel in ("at@2.log", "big.jsonl"):
            (tmp_path / f"{rel}.gz").write_bytes(gzip.compress(b"not the archive's\n"))
            db.execute(
                "UPDATE entries SET gz_path = ?, member_offset = NULL, member_length = NULL "
                "WHERE relpath = ?",
                [f"../{rel}.gz", f"u/{rel}"],
            )
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        for rel in ("at@2.log", "big.jsonl"):
            with pytest.raises(OSError) as err:
                (mnt / "u" / rel).read_bytes()
            assert err.value.errno == errno.EIO, rel
        assert (mnt / "u" / "v.txt").read_bytes() == b"version two\n"
    said = (tmp_path / "mnt.log").read_text()
    assert "'../at@2.log.gz' contains '..'" in said and "'../big.jsonl.gz' contains" in said


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


def _random_reads(path: Path, data: bytes, seed: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        preads_match(fd, data, random.Random(seed), 200)
    finally:
        os.close(fd)


def test_random_reads_anywhere_give_the_right_bytes(site: Path, mounted: Path) -> None:
    [big] = [e for e in entries(site) if e["relpath"] == "u/big.jsonl"]
    assert big["seek_points"]  # a gzip written with seek points: reads start there
    _random_reads(mounted / "u" / "big.jsonl", jsonl(60_000, seed=1), seed=3)


def test_random_reads_in_a_gzip_without_seek_points(site: Path, tmp_path: Path) -> None:
    """A gzip written before seek points: random reads go through the checkpoint
    cache and still give the right bytes."""
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.execute("UPDATE entries SET seek_points = NULL")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        _random_reads(mnt / "u" / "big.jsonl", jsonl(60_000, seed=1), seed=4)


def test_a_random_read_in_a_gzip_cut_short_is_eio(site: Path, tmp_path: Path) -> None:
    """A gzip cut short: a read of the file's last bytes (a random read: far past
    what the stream holds) reaches where its deflate data ends too early."""
    [big] = [e for e in entries(site) if e["relpath"] == "u/big.jsonl"]
    gz = site / "archive" / str(big["gz_path"])
    os.chmod(gz, 0o600)
    os.truncate(gz, gz.stat().st_size - 60_000)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        fd = os.open(mnt / "u" / "big.jsonl", os.O_RDONLY)
        try:
            with pytest.raises(OSError) as err:
                os.pread(fd, 4096, int(str(big["bytes"])) - 4096)
            assert err.value.errno == errno.EIO
        finally:
            os.close(fd)
    assert "u/big.jsonl" in (tmp_path / "mnt.log").read_text()


def test_small_versions_held_in_memory_stay_within_their_bound(site: Path) -> None:
    """Small versions are read whole and kept for the next reads, never more
    bytes than the bound: the least recently read go first."""

    async def small_entries() -> list[Entry]:
        async with await Manifest.open(site / "archive" / "coldkeep.db", readonly=True) as m:
            return [e for e in await m.entries() if e.bytes <= SMALL]

    small = asyncio.run(small_entries())
    assert len(small) >= 5
    bound = sum(sorted(e.bytes for e in small)[-2:])
    smalls = Smalls(held=bound)
    layout = Layout(site / "archive")
    for e in small * 2:
        at = GzipAt(layout.abs(e.gz_path), e.span, "local")
        assert hashlib.sha256(smalls.get(at, e)).hexdigest() == e.sha256
        assert smalls.bytes <= bound
    assert 0 < len(smalls.kept) < len(small)


def test_every_version_is_under_versions_named_as_versions_prints_it(
    site: Path, mounted: Path
) -> None:
    where = mounted / ".versions" / "u" / "v.txt"
    names = sorted(os.listdir(where))
    assert len(names) == 2
    printed = ck(site, "versions", "u/v.txt").stdout
    for name in names:
        assert name.split("-")[0][:20] in printed, (name, printed)
    got = {(where / n).read_bytes() for n in names}
    assert got == {b"version one\n", b"version two\n"}
    # Every archived path is a folder there, folders and all.
    assert {"v.txt", "deep", "big.jsonl"} <= set(os.listdir(mounted / ".versions" / "u"))
    [small] = os.listdir(mounted / ".versions" / "u" / "deep" / "small-0.jsonl")
    data = (mounted / ".versions" / "u" / "deep" / "small-0.jsonl" / small).read_bytes()
    assert data == jsonl(150, seed=10)
    with pytest.raises(OSError) as err:
        (where / "new").write_bytes(b"x")
    assert err.value.errno == errno.EROFS


def test_a_pass_during_the_mount_shows_within_a_bounded_time(site: Path, mounted: Path) -> None:
    assert (mounted / "u" / "v.txt").read_bytes() == b"version two\n"
    write_old(site, b"u/later.log", b"archived while mounted\n")
    write_old(site, b"u/v.txt", b"version three\n")
    ck(site, "pass")
    eventually((mounted / "u" / "later.log").exists)
    assert (mounted / "u" / "later.log").read_bytes() == b"archived while mounted\n"
    eventually(lambda: (mounted / "u" / "v.txt").read_bytes() == b"version three\n")
    eventually(lambda: len(os.listdir(mounted / ".versions" / "u" / "v.txt")) == 3)


def test_every_byte_but_slash_and_nul_in_a_name(tmp_path: Path) -> None:
    """A file for each byte 1..255 but "/", in a name of its own and in a
    folder's, plus names that end in a space, start with "-", or are all
    bytes that are not UTF-8: each listed as its exact bytes, each read."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "coldkeep.toml").write_text(EVERY_FILE)
    old = time.time_ns() - 30 * DAY_NS
    names = [bytes([b]) + b"x" for b in range(1, 256) if b != ord("/")]
    names += [b"-rf", b"ends ", b"\xff\xfe", b"\xc3(", b"..x", b"a\\b", b"\x1b[31mred"]
    for n, name in enumerate(names):
        write_raw(site / "live", b"odd/" + name, b"%d\n" % n, old)
        write_raw(site / "live", b"odd/" + name + b"dir/" + name, b"in %d\n" % n, old)
    ck(site, "pass")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        top = os.fsencode(mnt / "odd")
        listed = set(os.listdir(top))
        assert listed == set(names) | {n + b"dir" for n in names}
        for n, name in enumerate(names):
            with open(top + b"/" + name, "rb") as f:
                assert f.read() == b"%d\n" % n, name
            with open(top + b"/" + name + b"dir/" + name, "rb") as f:
                assert f.read() == b"in %d\n" % n, name


def test_with_live_the_live_tree_is_merged_in_and_wins(site: Path, tmp_path: Path) -> None:
    write_old(site, b"u/v.txt", b"live version\n")  # over the archived u/v.txt
    write_old(site, b"u/deep/fresh.txt", b"only live\n")
    write_old(site, b"w/new.txt", b"a live folder\n")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"secret\n")
    os.symlink(outside, site / "live" / "u" / "link.txt")
    os.symlink(tmp_path, site / "live" / "u" / "linkdir")
    os.mkfifo(site / "live" / "u" / "fifo")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt, "--with-live"):
        assert (mnt / "u" / "v.txt").read_bytes() == b"live version\n"
        assert (mnt / "u" / "deep" / "fresh.txt").read_bytes() == b"only live\n"
        assert (mnt / "u" / "deep" / "small-1.jsonl").read_bytes() == jsonl(150, seed=11)
        assert (mnt / "w" / "new.txt").read_bytes() == b"a live folder\n"
        names = set(os.listdir(mnt / "u"))
        assert {"v.txt", "big.jsonl", "deep", "at@2.log"} <= names
        assert not names & {"link.txt", "linkdir", "fifo"}  # never followed, never shown
        assert not (mnt / "u" / "link.txt").exists()
        assert len(os.listdir(mnt / ".versions" / "u" / "v.txt")) == 2  # the archive's
        with pytest.raises(OSError) as err:
            (mnt / "u" / "deep" / "fresh.txt").open("ab")
        assert err.value.errno == errno.EROFS
    assert (site / "live" / "u" / "v.txt").read_bytes() == b"live version\n"


def test_without_a_remote_a_gzip_gone_is_eio_and_says_so(site: Path, tmp_path: Path) -> None:
    e = next(e for e in entries(site) if e["relpath"] == "u/big.jsonl")
    (site / "archive" / str(e["gz_path"])).unlink()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        with pytest.raises(OSError) as err:
            (mnt / "u" / "big.jsonl").read_bytes()
        assert err.value.errno == errno.EIO
        assert (mnt / "u" / "v.txt").read_bytes() == b"version two\n"
    said = (tmp_path / "mnt.log").read_text()
    assert "u/big.jsonl" in said and "no local copy of its gzip" in said
    assert "no [remote] is configured" in said


def test_what_retention_deletes_during_the_mount_vanishes(site: Path, mounted: Path) -> None:
    assert (mounted / "u" / "big.jsonl").exists()
    config = site / "coldkeep.toml"
    config.write_text(config.read_text().replace("[files]", "[retention]\nfiles_days = 1\n[files]"))
    ck(site, "expire", "--yes")
    assert all(e["status"] == "expired" for e in entries(site))
    eventually(lambda: not (mounted / "u" / "big.jsonl").exists())
    eventually(lambda: os.listdir(mounted) == [".versions"])
    assert os.listdir(mounted / ".versions") == []


def test_a_mountpoint_inside_live_root_is_not_shown_inside_itself(site: Path) -> None:
    mnt = site / "live" / "mnt"
    mnt.mkdir()
    with mounting(site, mnt, "--with-live"):
        assert "mnt" not in os.listdir(mnt)
        assert "u" in os.listdir(mnt)
