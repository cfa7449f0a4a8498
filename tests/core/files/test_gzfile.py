"""The per-file protocol, on real files: what an operator would see on disk."""

from __future__ import annotations

import asyncio
import io
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from coldkeep.core.base.codec import CHUNK, Codec, Digest, read_gzip_header
from coldkeep.core.base.fsutil import identity_of
from coldkeep.core.base.layout import partial_of, restore_partial_of
from coldkeep.core.base.ratelimit import RateLimiter
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.files.gzfile import (
    ArchiveOk,
    Changed,
    Corrupt,
    Exists,
    InUse,
    Mismatch,
    Restored,
    RestoreExpect,
    Stale,
    Unarchivable,
    Verified,
    VerifyFailed,
    adopt_orphan,
    archive_file,
    restore_file,
    sweep_partials,
    verify_gzip,
)
from coldkeep.core.files.reader import CachedCopy

from helpers import Roots, gunzip, jsonl, leases_or_skip

ISAL = Codec("isal", 1)


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith("partial"))


async def test_archive_writes_a_standard_gzip_with_name_and_mtime(
    roots: Roots, codec: Codec
) -> None:
    data = jsonl(20_000)
    src = roots.write("u1/events.jsonl", data)
    dest = roots.layout.gz_for("u1/events.jsonl")

    result = await archive_file(src, dest, roots=roots.pair, codec=codec)

    assert isinstance(result, ArchiveOk)
    assert result.dest == dest and dest.exists()
    assert result.bytes == len(data) and result.gz_bytes == dest.stat().st_size
    assert gunzip(dest) == data
    subprocess.run(["gzip", "-t", str(dest)], check=True)
    listing = subprocess.run(
        ["gzip", "-lN", str(dest)], check=True, capture_output=True, text=True
    ).stdout
    assert "events.jsonl" in listing
    header = read_gzip_header(dest)
    assert header.name == "events.jsonl"
    assert header.mtime == src.stat().st_mtime_ns // 1_000_000_000
    assert (header.mtime_ns, header.mode) == (src.stat().st_mtime_ns, src.stat().st_mode)
    assert dest.stat().st_mtime_ns == src.stat().st_mtime_ns
    assert src.read_bytes() == data, "archive_file never touches the source"
    assert leftovers(roots.base) == []


async def test_a_second_version_gets_its_own_name(roots: Roots) -> None:
    src = roots.write("u/a.jsonl", b"first\n")
    dest = roots.layout.gz_for("u/a.jsonl")
    first = await archive_file(src, dest, roots=roots.pair, codec=ISAL)
    src.write_bytes(b"second\n")
    second = await archive_file(src, dest, roots=roots.pair, codec=ISAL)

    assert isinstance(first, ArchiveOk) and isinstance(second, ArchiveOk)
    assert first.dest == dest
    assert second.dest.name == f"a.jsonl.{second.sha256[:12]}.gz"
    assert gunzip(first.dest) == b"first\n" and gunzip(second.dest) == b"second\n"
    assert read_gzip_header(second.dest).name == "a.jsonl"


async def test_an_append_between_read_and_place_is_changed_and_loses_nothing(
    roots: Roots,
) -> None:
    data = jsonl(5_000)
    src = roots.write("u/live.jsonl", data)
    dest = roots.layout.gz_for("u/live.jsonl")
    writer = [sys.executable, "-c", "import sys; open(sys.argv[1], 'ab').write(b'late\\n')"]

    async def append_once(name: StepName, info: StepInfo) -> None:
        if name == "partial_written":
            # A real second process appends after the bytes were hashed.
            proc = await asyncio.create_subprocess_exec(*writer, str(src))
            assert await proc.wait() == 0

    result = await archive_file(src, dest, roots=roots.pair, codec=ISAL, step=append_once)

    assert isinstance(result, Changed)
    assert "changed while it was archived" in result.detail
    assert src.read_bytes() == data + b"late\n"
    assert not dest.exists() and leftovers(roots.base) == []


async def test_a_source_appended_to_throughout_is_left_live(roots: Roots) -> None:
    """A writer holding the file open: its write lease is refused (``InUse``), and
    where leases are not supported the read sees it change (``Changed``). Either
    way every appended byte is still live."""
    src = roots.write("u/busy.jsonl", jsonl(40_000))
    before = src.read_bytes()
    dest = roots.layout.gz_for("u/busy.jsonl")
    # The writer appends a numbered line every millisecond until stdin closes.
    script = (
        "import sys, time\n"
        "f = open(sys.argv[1], 'ab', buffering=0)\n"
        "print('started', flush=True)\n"
        "n = 0\n"
        "import select\n"
        "while not select.select([sys.stdin], [], [], 0.001)[0]:\n"
        "    f.write(b'line %d\\n' % n); n += 1\n"
        "print(n, flush=True)\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        str(src),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert await proc.stdout.readline() == b"started\n"
    # Slow the read down so the writer is surely mid-stream.
    try:
        result: object = await archive_file(
            src, dest, roots=roots.pair, codec=ISAL, limiter=RateLimiter(8 * CHUNK)
        )
    except InUse as err:
        result = err
    proc.stdin.close()
    written = int(await proc.stdout.readline())
    await proc.wait()

    assert isinstance(result, InUse | Changed), result
    expected_tail = b"".join(b"line %d\n" % i for i in range(written))
    assert src.read_bytes() == before + expected_tail, "every appended byte is still live"
    assert not dest.exists() and leftovers(roots.base) == []


def _flip_byte(path: Path, offset: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


async def test_a_partial_damaged_before_its_verify_is_verify_failed(roots: Roots) -> None:
    data = jsonl(3_000)
    src = roots.write("u/a.jsonl", data)
    dest = roots.layout.gz_for("u/a.jsonl")

    async def damage(name: StepName, info: StepInfo) -> None:
        if name == "partial_written":
            partial = info["partial"]
            assert isinstance(partial, Path)
            _flip_byte(partial, partial.stat().st_size // 2)

    result = await archive_file(src, dest, roots=roots.pair, codec=ISAL, step=damage)

    assert isinstance(result, VerifyFailed)
    assert str(partial_of(dest)) in result.detail
    assert src.read_bytes() == data
    assert not dest.exists() and leftovers(roots.base) == []


async def test_a_truncated_partial_is_verify_failed(roots: Roots) -> None:
    src = roots.write("u/a.jsonl", jsonl(3_000))
    dest = roots.layout.gz_for("u/a.jsonl")

    async def truncate(name: StepName, info: StepInfo) -> None:
        if name == "partial_written":
            partial = info["partial"]
            assert isinstance(partial, Path)
            os.truncate(partial, partial.stat().st_size - 9)

    result = await archive_file(src, dest, roots=roots.pair, codec=ISAL, step=truncate)
    assert isinstance(result, VerifyFailed) and "truncated" in result.detail
    assert not dest.exists() and leftovers(roots.base) == []


async def _archived(roots: Roots, relpath: str, data: bytes) -> tuple[Path, ArchiveOk]:
    src = roots.write(relpath, data)
    result = await archive_file(src, roots.layout.gz_for(relpath), roots=roots.pair, codec=ISAL)
    assert isinstance(result, ArchiveOk)
    return src, result


async def test_verify_gzip_verdicts(roots: Roots) -> None:
    data = jsonl(4_000)
    _, ok = await _archived(roots, "u/a.jsonl", data)
    gz = ok.dest
    expect = Digest(len(data), ok.sha256)

    assert await verify_gzip(gz, expect) == Verified(len(data), ok.sha256)
    assert isinstance(await verify_gzip(gz, Digest(len(data), "0" * 64)), Mismatch)

    flipped = gz.with_name("flipped.gz")
    flipped.write_bytes(gz.read_bytes())
    _flip_byte(flipped, flipped.stat().st_size // 2)
    assert isinstance(await verify_gzip(flipped, expect), Corrupt)

    truncated = gz.with_name("truncated.gz")
    truncated.write_bytes(gz.read_bytes()[:-5])
    result = await verify_gzip(truncated, expect)
    assert isinstance(result, Corrupt) and "truncated" in result.detail

    empty = gz.with_name("empty.gz")
    empty.write_bytes(b"")
    assert isinstance(await verify_gzip(empty), Corrupt)


async def test_verify_of_an_unreadable_path_raises(roots: Roots) -> None:
    not_a_file = roots.archive / "files" / "dir.gz"
    not_a_file.mkdir(parents=True)
    with pytest.raises(IsADirectoryError):
        await verify_gzip(not_a_file)


async def test_adopt_an_orphan_that_matches_its_source(roots: Roots) -> None:
    data = jsonl(2_000)
    src, ok = await _archived(roots, "u/a.jsonl", data)
    result = await adopt_orphan(
        src, ok.dest, roots=roots.pair, identity=identity_of(src, root=roots.live)
    )
    assert isinstance(result, ArchiveOk)
    assert (result.bytes, result.sha256, result.dest) == (len(data), ok.sha256, ok.dest)
    assert ok.dest.exists() and src.exists()


async def test_adopt_keeps_an_earlier_version_as_stale(roots: Roots) -> None:
    src, ok = await _archived(roots, "u/a.jsonl", b"version one\n")
    src.write_bytes(b"version two, longer\n")
    result = await adopt_orphan(
        src, ok.dest, roots=roots.pair, identity=identity_of(src, root=roots.live)
    )
    assert isinstance(result, Stale)
    assert (result.bytes, result.sha256) == (len(b"version one\n"), ok.sha256)
    assert ok.dest.exists(), "a stale gzip may be the only copy of that version"


async def test_adopt_removes_a_corrupt_orphan(roots: Roots) -> None:
    src, ok = await _archived(roots, "u/a.jsonl", jsonl(2_000))
    _flip_byte(ok.dest, ok.dest.stat().st_size // 2)
    result = await adopt_orphan(
        src, ok.dest, roots=roots.pair, identity=identity_of(src, root=roots.live)
    )
    assert isinstance(result, Corrupt)
    assert not ok.dest.exists() and src.exists()


async def test_adopt_with_a_source_that_changed_decides_nothing(roots: Roots) -> None:
    src, ok = await _archived(roots, "u/a.jsonl", jsonl(2_000))
    seen = identity_of(src, root=roots.live)
    with src.open("ab") as f:
        f.write(b"more\n")
    result = await adopt_orphan(src, ok.dest, roots=roots.pair, identity=seen)
    assert isinstance(result, Changed)
    assert ok.dest.exists() and src.exists()


async def test_adopt_raises_on_a_gzip_it_cannot_read(roots: Roots) -> None:
    src = roots.write("u/a.jsonl", b"data\n")
    gz = roots.layout.gz_for("u/a.jsonl")
    gz.mkdir(parents=True)  # a read error (EISDIR), not a verdict on the bytes
    with pytest.raises(IsADirectoryError):
        await adopt_orphan(src, gz, roots=roots.pair, identity=identity_of(src, root=roots.live))
    assert gz.exists()


async def test_adopt_raises_on_a_mode_000_gzip_as_another_user(roots: Roots) -> None:
    """EACCES proves nothing about the bytes: raised, never taken for corruption."""
    src, ok = await _archived(roots, "u/a.jsonl", jsonl(500))
    for p in (roots.base, roots.base.parent, roots.live, roots.live / "u"):
        p.chmod(0o755)
    for p in ok.dest.parents:
        if p == roots.base.parent:
            break
        p.chmod(0o755)
    src.chmod(0o644)
    ok.dest.chmod(0o000)
    if os.geteuid() == 0:
        # Root reads through mode 000; a forked child drops to nobody first.
        # (A fork, not an exec: the interpreter may live where nobody cannot read.)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(r)
            os.dup2(w, 1)
            try:
                os.setgid(65534)
                os.setuid(65534)
                res = asyncio.run(
                    adopt_orphan(
                        src, ok.dest, roots=roots.pair, identity=identity_of(src, root=roots.live)
                    )
                )
                os.write(1, f"result {res.kind}\n".encode())
            except PermissionError:
                os.write(1, b"raised PermissionError\n")
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            said = f.read()
        os.waitpid(pid, 0)
    else:
        try:
            await adopt_orphan(
                src, ok.dest, roots=roots.pair, identity=identity_of(src, root=roots.live)
            )
            said = "returned"
        except PermissionError:
            said = "raised PermissionError\n"
    assert said == "raised PermissionError\n"
    assert ok.dest.exists(), "an unreadable gzip is never removed"


@pytest.mark.parametrize("kind", ["symlink", "fifo", "directory"])
async def test_non_regular_sources_are_refused_and_never_followed(roots: Roots, kind: str) -> None:
    target = roots.write("u/real.jsonl", b"secret\n")
    src = roots.live / "u" / "odd.jsonl"
    if kind == "symlink":
        src.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(src)
    else:
        src.mkdir()
    dest = roots.layout.gz_for("u/odd.jsonl")

    with pytest.raises(Unarchivable, match=f"odd.jsonl is a {kind.replace('fifo', 'FIFO')}"):
        await archive_file(src, dest, roots=roots.pair, codec=ISAL)
    assert not dest.exists() and leftovers(roots.base) == []
    assert target.read_bytes() == b"secret\n"


async def test_restore_round_trip_sets_mode_and_mtime(roots: Roots) -> None:
    data = jsonl(3_000)
    src, ok = await _archived(roots, "u/a.jsonl", data)
    src.chmod(0o640)
    ident = identity_of(src, root=roots.live)
    src.unlink()
    expect = RestoreExpect(ok.bytes, ok.sha256, ident.mtime_ns, ident.mode)

    result = await restore_file(ok.dest, src, expect, root=roots.live)

    assert isinstance(result, Restored)
    assert src.read_bytes() == data
    assert src.stat().st_mtime_ns == ident.mtime_ns
    assert src.stat().st_mode & 0o7777 == 0o640
    assert not restore_partial_of(src).exists()


async def test_restore_from_an_open_copy_names_it_and_closes_it(roots: Roots) -> None:
    """A gzip given as a ``CachedCopy`` (a remote copy read through the block
    cache opens so): restored from the file it opens, closed after, named by its
    ``name`` in a mismatch."""
    data = jsonl(2_000)
    src, ok = await _archived(roots, "u/a.jsonl", data)
    src.unlink()
    opened: list[io.RawIOBase] = []

    def opener() -> io.RawIOBase:
        f = open(ok.dest, "rb", buffering=0)  # noqa: SIM115 - restore closes it
        opened.append(f)
        return f

    copy = CachedCopy("s3://bucket/site/u/a.jsonl.gz", ("site/u/a.jsonl.gz", 0, 1), opener)
    expect = RestoreExpect(ok.bytes, ok.sha256, 0, 0o644)
    assert isinstance(await restore_file(copy, src, expect, root=roots.live), Restored)
    assert src.read_bytes() == data
    src.unlink()
    wrong = await restore_file(copy, src, RestoreExpect(1, "f" * 64, 0, 0o644), root=roots.live)
    assert isinstance(wrong, Mismatch)
    assert wrong.detail.startswith("s3://bucket/site/u/a.jsonl.gz gave "), wrong.detail
    assert len(opened) == 2 and all(f.closed for f in opened)
    assert not src.exists() and not restore_partial_of(src).exists()


async def test_restore_never_overwrites(roots: Roots) -> None:
    src, ok = await _archived(roots, "u/a.jsonl", b"archived bytes\n")
    src.write_bytes(b"the application wrote this since\n")
    expect = RestoreExpect(ok.bytes, ok.sha256, 0, 0o644)

    assert isinstance(await restore_file(ok.dest, src, expect, root=roots.live), Exists)
    assert src.read_bytes() == b"the application wrote this since\n"
    assert not restore_partial_of(src).exists()


async def test_restore_refuses_bytes_the_manifest_does_not_describe(roots: Roots) -> None:
    src, ok = await _archived(roots, "u/a.jsonl", b"archived bytes\n")
    src.unlink()
    wrong = RestoreExpect(ok.bytes, "f" * 64, 0, 0o644)
    result = await restore_file(ok.dest, src, wrong, root=roots.live)
    assert isinstance(result, Mismatch)
    assert not src.exists() and not restore_partial_of(src).exists()

    assert result.detail.count(str(ok.dest)) == 1, result.detail

    _flip_byte(ok.dest, ok.dest.stat().st_size - 6)  # in the CRC-32 of the trailer
    right = RestoreExpect(ok.bytes, ok.sha256, 0, 0o644)
    corrupt = await restore_file(ok.dest, src, right, root=roots.live)
    assert isinstance(corrupt, Mismatch)
    # The operator reads the gzip's path once, then why: "<gz>: … CRC …; the manifest …"
    assert corrupt.detail.count(str(ok.dest)) == 1, corrupt.detail
    assert not src.exists() and not restore_partial_of(src).exists()


async def test_sweep_removes_partials_and_nothing_else(roots: Roots) -> None:
    files = roots.layout.files
    (files / "u" / "d").mkdir(parents=True)
    keep = [files / "u" / "a.jsonl.gz", files / "u" / "d" / "partial.gz"]
    drop = [files / "u" / "a.jsonl.gz.partial", files / "u" / "d" / "b.gz.partial"]
    for p in keep + drop:
        p.write_bytes(b"x")

    removed = await sweep_partials(files)

    assert sorted(removed) == sorted(drop)
    assert all(p.exists() for p in keep) and not any(p.exists() for p in drop)
    assert await sweep_partials(roots.archive / "nothing-here") == []


async def test_a_restore_never_brings_back_a_set_user_id_bit(roots: Roots) -> None:
    """A file the application's user made set-user-id, restored by root, would
    become a set-user-id root program: only the permission bits come back."""
    src, ok = await _archived(roots, "u/tool", b"#!/bin/sh\nid\n")
    src.unlink()
    expect = RestoreExpect(ok.bytes, ok.sha256, 0, stat.S_IFREG | 0o6755)
    assert isinstance(await restore_file(ok.dest, src, expect, root=roots.live), Restored)
    assert stat.S_IMODE(src.stat().st_mode) == 0o755


OPENER = (
    "import os, sys, time\n"
    "t0 = time.monotonic()\n"
    "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
    "waited = time.monotonic() - t0\n"
    "os.write(fd, b'opened during the read\\n')\n"
    "os.close(fd)\n"
    "print(waited, flush=True)\n"
)


async def test_a_source_opened_during_its_read_stops_the_read_and_is_left_live(
    roots: Roots,
) -> None:
    """The write lease breaks when another process opens the file: the read stops
    at the next chunk, the lease goes with it, and the opener goes on at once
    (never the kernel's lease-break-time, 45 s by default)."""
    leases_or_skip(roots.live)
    data = os.urandom(24 * CHUNK)
    src = roots.write("u/busy.log", data)
    dest = roots.layout.gz_for("u/busy.log")
    opener: list[subprocess.Popen[str]] = []

    def open_during_read(n: int) -> None:
        if not opener:
            opener.append(
                subprocess.Popen(
                    [sys.executable, "-c", OPENER, str(src)], stdout=subprocess.PIPE, text=True
                )
            )

    with pytest.raises(InUse, match="opened by another process"):
        await archive_file(
            src,
            dest,
            roots=roots.pair,
            codec=ISAL,
            limiter=RateLimiter(2 * CHUNK),  # 12 s for the whole file, were it read
            progress=open_during_read,
        )
    (proc,) = opener
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and float(out) < 5, f"the opener waited {out} s"
    assert src.read_bytes() == data + b"opened during the read\n"
    assert not dest.exists() and leftovers(roots.base) == []
