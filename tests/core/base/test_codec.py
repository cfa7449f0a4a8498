"""Streaming gzip: every engine writes what the system's gzip accepts, and archive
-> restore round-trips any bytes."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import subprocess
import tempfile
import threading
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import (
    CHUNK,
    Codec,
    DamagedSeekPoints,
    _chunk_buffer,
    compress_fd,
    decode_points,
    encode_points,
    keep_freed_buffers,
    read_gzip_header,
)
from coldkeep.core.base.fsutil import identity_of
from coldkeep.core.files.gzfile import (
    ArchiveOk,
    Restored,
    RestoreExpect,
    Roots,
    archive_file,
    restore_file,
)

from helpers import as_legacy_gzip, gunzip

ENGINES = [Codec("isal", 1), Codec("isal", 3), Codec("zlib-ng", 6), Codec("zlib", 6)]
EDGE_SIZES = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7]


def payload(size: int, seed: int, compressible: bool) -> bytes:
    rnd = random.Random(seed)
    if not compressible:
        return rnd.randbytes(size)
    words = [rnd.randbytes(rnd.randint(1, 12)) for _ in range(64)]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(words)
    return bytes(out[:size])


async def round_trip(base: Path, data: bytes, codec: Codec) -> None:
    src = base / "live" / "u" / "f.jsonl"
    src.parent.mkdir(parents=True)
    src.write_bytes(data)
    ident = identity_of(src, root=base)
    roots = Roots(base / "live", base)
    ok = await archive_file(src, base / "files" / "u" / "f.jsonl.gz", roots=roots, codec=codec)
    assert isinstance(ok, ArchiveOk) and ok.bytes == len(data)
    assert gunzip(ok.dest) == data
    src.unlink()
    restored = await restore_file(
        ok.dest, src, RestoreExpect(ok.bytes, ok.sha256, ident.mtime_ns, ident.mode), root=base
    )
    assert isinstance(restored, Restored)
    assert src.read_bytes() == data


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    codec=st.sampled_from(ENGINES),
    data=st.one_of(
        st.binary(max_size=5000),
        st.builds(
            payload,
            st.one_of(st.sampled_from(EDGE_SIZES), st.integers(0, 3 * CHUNK)),
            st.integers(0, 2**32),
            st.booleans(),
        ),
    ),
)
def test_archive_then_restore_round_trips_any_bytes(codec: Codec, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(round_trip(Path(tmp), data, codec))


def test_every_engine_passes_gzip_t_at_the_edge_sizes(tmp_path: Path) -> None:
    for i, codec in enumerate(ENGINES):
        for size in EDGE_SIZES:
            base = tmp_path / f"{i}-{size}"
            data = payload(size, size, compressible=True)
            asyncio.run(round_trip(base, data, codec))
            gz = base / "files" / "u" / "f.jsonl.gz"
            subprocess.run(["gzip", "-t", str(gz)], check=True)


def test_gzip_reads_a_new_gzip_without_a_word(tmp_path: Path) -> None:
    """GNU gzip -v warned "extra field of 16 bytes ignored" on every gzip
    coldkeep wrote; the mode and exact mtime now ride in the comment, which
    every reader skips in silence."""
    data = payload(5000, 1, compressible=True)
    asyncio.run(round_trip(tmp_path, data, Codec("isal", 1)))
    gz = tmp_path / "files" / "u" / "f.jsonl.gz"
    for argv in (["gzip", "-tv"], ["gunzip", "-Nvc"], ["gzip", "-lv"]):
        run = subprocess.run([*argv, str(gz)], capture_output=True, check=True)
        said = (run.stderr + run.stdout[-2000:]).decode(errors="replace")
        assert "extra field" not in said and "ignored" not in said, (argv, said)
    if shutil.which("pigz"):
        run = subprocess.run(["pigz", "-tv", str(gz)], capture_output=True, check=True)
        assert b"extra" not in run.stderr, run.stderr
    src = tmp_path / "live" / "u" / "f.jsonl"
    header = read_gzip_header(gz)
    assert header.name == "f.jsonl"
    assert (header.mtime_ns, header.mode) == (src.stat().st_mtime_ns, src.stat().st_mode)


def test_an_older_coldkeeps_gzip_with_the_extra_field_still_reads(tmp_path: Path) -> None:
    data = payload(5000, 2, compressible=True)
    asyncio.run(round_trip(tmp_path, data, Codec("isal", 1)))
    gz = tmp_path / "files" / "u" / "f.jsonl.gz"
    src = tmp_path / "live" / "u" / "f.jsonl"
    as_legacy_gzip(gz)
    header = read_gzip_header(gz)
    assert header.name == "f.jsonl"
    assert (header.mtime_ns, header.mode) == (src.stat().st_mtime_ns, src.stat().st_mode)
    assert gunzip(gz) == data


@given(
    steps=st.lists(st.tuples(st.integers(1, 2**40), st.integers(1, 2**36)), max_size=300),
)
def test_seek_points_come_back_from_their_text_as_they_were(steps: list[tuple[int, int]]) -> None:
    points, u, c = [], 0, 0
    for du, dc in steps:
        u, c = u + du, c + dc
        points.append((u, c))
    text = encode_points(points)
    assert (text is None) == (not points)
    if text is not None:
        assert text.isascii() and decode_points(text) == points
        assert len(text) <= 16 * len(points)


@pytest.mark.parametrize("damaged", ["", "!!", "gA==", "AQ==", "AAAA", "AQEBAA=="])
def test_damaged_seek_points_are_said_so(damaged: str) -> None:
    with pytest.raises(DamagedSeekPoints):
        decode_points(damaged)


def test_raw_inflate_from_each_seek_point_gives_the_bytes_from_there(tmp_path: Path) -> None:
    """The compressed offset of a point is where a raw inflate can start (the
    stream fully flushed there): each engine's."""
    data = payload(3 * CHUNK + 7, 9, compressible=True)
    for i, codec in enumerate(ENGINES):
        base = tmp_path / str(i)
        asyncio.run(round_trip(base, data, codec))
        every = Codec().seek_every
        src = base / "live" / "u" / "f.jsonl"
        fd = os.open(src, os.O_RDONLY)
        try:
            packed = compress_fd(fd, base / "again.gz", name=b"f.jsonl", mtime_ns=0, codec=codec,
                                 cancel=CancelToken())  # fmt: skip
        finally:
            os.close(fd)
        assert packed.seek_points is not None
        points = decode_points(packed.seek_points)
        assert [u for u, _ in points] == [every, 2 * every, 3 * every]
        again = (base / "again.gz").read_bytes()
        for u, c in points:
            assert zlib.decompressobj(-15).decompress(again[c:], 10_000) == data[u : u + 10_000]


def test_each_thread_lends_its_read_buffer_to_one_stream_at_a_time() -> None:
    """A stream begun while another reads on the same thread gets a buffer of its
    own; once they end, the thread's next stream reuses one (no new 1 MiB)."""
    with _chunk_buffer() as outer, _chunk_buffer() as inner:
        assert outer is not inner
        assert len(outer) == len(inner) == CHUNK
    with _chunk_buffer() as again:
        assert again is outer or again is inner
    seen: list[bytearray] = []

    def elsewhere() -> None:
        with _chunk_buffer() as buf:
            seen.append(buf)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert seen[0] is not outer and seen[0] is not inner


def test_the_allocator_told_to_keep_freed_buffers_changes_no_byte(tmp_path: Path) -> None:
    keep_freed_buffers()
    keep_freed_buffers()  # again: the same settings, nothing else
    asyncio.run(round_trip(tmp_path, payload(3 * CHUNK + 7, 4, True), Codec()))
