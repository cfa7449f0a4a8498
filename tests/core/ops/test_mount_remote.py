"""``mount`` of a site whose local copies were dropped once shipped, on a real
FUSE mount through the real CLI, against the moto S3 server (behind the
counting fault proxy) and a folder remote: every file reads as its sha256
through the block cache, in order and at random; a bundle member costs the
GETs of its own bytes, not the bundle's; the cache's folder is gone after the
unmount and what it cost is logged; a remote that cannot be read when the
mount starts leaves local copies served and remote-only ones EIO, saying why.
Skipped, with the reason, where FUSE is missing."""

from __future__ import annotations

import errno
import hashlib
import os
import random
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from pyrage import x25519

from helpers import EVERY_FILE, ck, entries, jsonl, mounting, preads_match, write_old
from s3kit import S3Site

CONFIG = EVERY_FILE + '[mount]\ncache_dir = "{cache}"\n'
BIG = jsonl(60_000, seed=1)  # ~7 MiB: its gzip spans blocks, with seek points
SMALL = [jsonl(150, seed=10 + n) for n in range(4)]  # ~20 KiB each: bundle members


def _site(tmp_path: Path, remote: str) -> Path:
    """A site shipped to ``remote`` (a ``[remote]`` table's body) with
    keep_local_days = 0: every local copy dropped."""
    site = tmp_path / "site"
    site.mkdir()
    config = CONFIG.format(cache=tmp_path / "cache")
    (site / "coldkeep.toml").write_text(f"{config}[remote]\n{remote}keep_local_days = 0\n")
    write_old(site, b"u/big.jsonl", BIG)
    for n, data in enumerate(SMALL):
        write_old(site, f"u/deep/small-{n}.jsonl".encode(), data)
    write_old(site, b"u/odd\xe9 name.log", b"an odd name\n")
    ck(site, "pass")
    ck(site, "ship")
    left = [p for p in (site / "archive" / "files").rglob("*") if p.is_file()]
    assert left == [], "every local copy dropped"
    return site


def _s3(s3: S3Site) -> str:
    return (
        f'url = "s3://{s3.bucket}/p"\nendpoint_url = "{s3.endpoint}"\n'
        'region = "us-east-1"\nsite = "t"\n'
    )


def _entry(site: Path, relpath: str) -> dict[str, Any]:
    [found] = [e for e in entries(site) if e["relpath"] == relpath]
    return found


def _gets_of(s3: S3Site, gz_path: str) -> list[int]:
    """The body sizes of the GETs of ``gz_path``'s object since the last reset."""
    return [
        x.body_sent for x in s3.proxy.exchanges if x.method == "GET" and x.path.endswith(gz_path)
    ]


def _logged(mnt: Path) -> str:
    return (mnt.parent / f"{mnt.name}.log").read_text(errors="replace")


def test_remote_only_files_read_through_the_cache(tmp_path: Path, s3: S3Site) -> None:
    site = _site(tmp_path, _s3(s3))
    member = _entry(site, "u/deep/small-2.jsonl")
    assert member["member_offset"] is not None, "a bundle member"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        s3.proxy.reset_counts()
        # The mount is made before the remote is opened (in the background); a
        # read waits for it, so the cache's folder is there once one is done
        # (listed before it, the folder was missing on a loaded machine).
        assert (mnt / "u" / "deep" / "small-2.jsonl").read_bytes() == SMALL[2]
        [folder] = os.listdir(tmp_path / "cache")  # the mount's own, for its life
        # One GET of the member's bytes: not the bundle's, whatever its size.
        assert _gets_of(s3, member["gz_path"]) == [member["member_length"]]
        for e in entries(site):
            rel = os.fsencode(e["relpath"]) if isinstance(e["relpath"], str) else e["relpath"]
            with open(os.fsencode(mnt) + b"/" + rel, "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == e["sha256"], rel
        assert folder in os.listdir(tmp_path / "cache")
    said = _logged(mnt)
    assert os.listdir(tmp_path / "cache") == [], "the cache's folder removed at the unmount"
    gets, fetched = map(int, re.findall(r"remote reads: (\d+) GETs, (\d+) bytes fetched", said)[0])
    assert gets >= len(entries(site)) - len(SMALL) + 1
    total = sum(e["gz_bytes"] for e in entries(site))
    assert fetched >= total  # each gzip or member's bytes at least once
    assert fetched <= total + member["member_length"] * 2, said


def test_random_reads_in_a_remote_only_file(tmp_path: Path, s3: S3Site) -> None:
    """Reads far apart in a big file only the remote holds: each one served from
    its seek point's blocks, the right bytes, without fetching the whole gzip."""
    site = _site(tmp_path, _s3(s3))
    big = _entry(site, "u/big.jsonl")
    assert big["seek_points"]
    assert big["gz_bytes"] > 2 << 20, "more blocks than one read needs"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        s3.proxy.reset_counts()
        fd = os.open(mnt / "u" / "big.jsonl", os.O_RDONLY)
        try:
            # The end first: a random read, nothing before it inflated or fetched.
            end = len(BIG) - 4096
            assert os.pread(fd, 4096, end) == BIG[end:]
            first = sum(_gets_of(s3, big["gz_path"]))
            preads_match(fd, BIG, random.Random(5), 100)
        finally:
            os.close(fd)
    # From its seek point: at most the two blocks around it, not the gzip.
    assert first <= 2 << 20 and first < big["gz_bytes"], first


def test_a_remote_that_cannot_be_read_leaves_local_copies_served(tmp_path: Path) -> None:
    site = _site(tmp_path, 'url = "file:remote"\nsite = "t"\n')
    write_old(site, b"u/later.log", b"archived after the ship\n")
    ck(site, "pass")
    os.rename(site / "remote", site / "remote-away")  # the remote's disk not mounted
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        assert (mnt / "u" / "later.log").read_bytes() == b"archived after the ship\n"
        with pytest.raises(OSError) as err:
            (mnt / "u" / "deep" / "small-1.jsonl").read_bytes()
        assert err.value.errno == errno.EIO
    said = _logged(mnt)
    assert "copies only the remote tier holds will be EIO" in said
    lines = [x for x in said.splitlines() if "u/deep/small-1.jsonl" in x]
    assert lines and all("the remote tier cannot be read (the remote folder" in x for x in lines)
    assert os.listdir(tmp_path / "cache") == []


def test_an_endpoint_that_does_not_answer_leaves_local_copies_served(
    tmp_path: Path, s3: S3Site
) -> None:
    site = _site(tmp_path, _s3(s3))
    write_old(site, b"u/later.log", b"archived after the ship\n")
    ck(site, "pass")
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = site / "coldkeep.toml"
    config.write_text(config.read_text().replace(s3.endpoint, dead))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        assert (mnt / "u" / "later.log").read_bytes() == b"archived after the ship\n"
        with pytest.raises(OSError) as err:
            (mnt / "u" / "big.jsonl").read_bytes()
        assert err.value.errno == errno.EIO
    said = _logged(mnt)
    [first] = [x for x in said.splitlines() if "will be EIO" in x]
    assert dead in first, said
    assert any("u/big.jsonl" in x and "cannot be read" in x for x in said.splitlines()), said


def test_sealed_copies_read_with_the_identity_and_eio_without(tmp_path: Path) -> None:
    """Copies sealed to an age key: with --identity every file reads as its
    sha256 (each stream opened whole into the cache's folder, gone at the
    unmount); without it each read is EIO, the log naming the key it needs."""
    key = x25519.Identity.generate()
    identity = tmp_path / "key.txt"
    identity.write_text(f"{key}\n")
    seal = f'encrypt_to = ["{key.to_public()}"]\n'
    site = _site(tmp_path, f'url = "file:remote"\nsite = "t"\n{seal}')
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt, "--identity", str(identity)):
        for e in entries(site):
            rel = os.fsencode(e["relpath"]) if isinstance(e["relpath"], str) else e["relpath"]
            with open(os.fsencode(mnt) + b"/" + rel, "rb") as f:
                assert hashlib.sha256(f.read()).hexdigest() == e["sha256"], rel
        fd = os.open(mnt / "u" / "big.jsonl", os.O_RDONLY)
        try:
            preads_match(fd, BIG, random.Random(6), 30)
        finally:
            os.close(fd)
    assert os.listdir(tmp_path / "cache") == []
    blind = tmp_path / "mnt2"
    blind.mkdir()
    with mounting(site, blind):
        for rel in ("u/deep/small-1.jsonl", "u/big.jsonl"):
            with pytest.raises(OSError) as err:
                (blind / rel).read_bytes()
            assert err.value.errno == errno.EIO
        # A random read of another open: its own line.
        fd = os.open(blind / "u" / "big.jsonl", os.O_RDONLY)
        try:
            with pytest.raises(OSError) as err:
                os.pread(fd, 4096, len(BIG) // 2)
            assert err.value.errno == errno.EIO
        finally:
            os.close(fd)
    lines = [x for x in _logged(blind).splitlines() if "give --identity FILE" in x]
    assert all(".age is sealed to" in x for x in lines), lines
    # One line for each file that failed, not one for each time the kernel
    # asked again after the EIO (its readahead, then the page).
    said = [_entry(site, rel)["gz_path"] for rel in ("u/deep/small-1.jsonl", "u/big.jsonl")]
    assert [sum(gz in x for x in lines) for gz in said] == [1, 2], lines


def _read_to_end(fd: int) -> bytes:
    got = bytearray()
    while piece := os.read(fd, 1 << 16):
        got += piece
    return bytes(got)


def test_an_open_handle_reads_on_from_the_remote_once_a_ship_drops_its_local_copy(
    tmp_path: Path,
) -> None:
    """Files opened (a big one read at its end and its start, a small one not
    yet read) while their local copies are there; a ship then drops them: the
    same handles read on from the remote copies, every byte right, no EIO."""
    site = _site(tmp_path, 'url = "file:remote"\nsite = "t"\n')
    # Big enough that its end lies past what the stream from its start holds.
    big, small = jsonl(150_000, seed=3), jsonl(120, seed=4)
    write_old(site, b"v/late-big.jsonl", big)
    write_old(site, b"v/late-small.jsonl", small)
    ck(site, "pass")
    late = [_entry(site, "v/late-big.jsonl"), _entry(site, "v/late-small.jsonl")]
    assert all((site / "archive" / e["gz_path"]).exists() for e in late), "local, not shipped"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mounting(site, mnt):
        big_fd = os.open(mnt / "v" / "late-big.jsonl", os.O_RDONLY)
        small_fd = os.open(mnt / "v" / "late-small.jsonl", os.O_RDONLY)
        try:
            end = len(big) - 4096
            assert os.pread(big_fd, 4096, end) == big[end:]  # a random read: its gzip found
            assert os.pread(big_fd, 4096, 0) == big[:4096]  # the stream begun
            ck(site, "ship")
            assert not any((site / "archive" / e["gz_path"]).exists() for e in late), "dropped"
            assert _read_to_end(small_fd) == small
            assert os.pread(big_fd, 4096, end - 4096) == big[end - 4096 : end]  # at random
            preads_match(big_fd, big, random.Random(7), 40)
            os.lseek(big_fd, 0, os.SEEK_SET)
            assert hashlib.sha256(_read_to_end(big_fd)).hexdigest() == late[0]["sha256"]
        finally:
            os.close(big_fd)
            os.close(small_fd)
    assert "EIO" not in _logged(mnt) and "error" not in _logged(mnt).lower(), _logged(mnt)
