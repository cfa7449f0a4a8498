"""files/seek.py: any range of an archived file read from its gzip without
inflating from the start: from its seek points, or through the checkpoint cache
for a gzip without them; in a gzip of its own and in a bundle member; from many
threads at once; in bounded memory."""

from __future__ import annotations

import asyncio
import gzip
import os
import random
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import Codec, CorruptGzip, Span, compress_fd, decode_points
from coldkeep.core.files.reader import GzipAt
from coldkeep.core.files.seek import SeekReader
from coldkeep.core.store.entries import Entry
from coldkeep.core.store.manifest import Manifest

from helpers import JSONL_SITE, Roots, ck_json, jsonl

ENGINES = [Codec("isal", 1), Codec("zlib-ng", 6), Codec("zlib", 6)]


def data_of(size: int, seed: int) -> bytes:
    """Log lines with stretches of random bytes in them: both kinds of deflate
    block (and stored ones) in one gzip."""
    rnd = random.Random(seed)
    out = bytearray()
    while len(out) < size:
        out += jsonl(rnd.randint(1, 60), seed=rnd.randrange(1000))
        if rnd.random() < 0.3:
            out += rnd.randbytes(rnd.randint(1, 20_000))
    return bytes(out[:size])


def packed(folder: Path, data: bytes, codec: Codec) -> tuple[Path, str | None]:
    """``data`` through the real codec into a gzip: its path and seek points."""
    src, gz = folder / "src", folder / "f.gz"
    src.write_bytes(data)
    fd = os.open(src, os.O_RDONLY)
    try:
        got = compress_fd(fd, gz, name=b"f", mtime_ns=0, codec=codec, cancel=CancelToken())
    finally:
        os.close(fd)
    return gz, got.seek_points


def in_bundle(folder: Path, gz: Path, before: int, after: int) -> GzipAt:
    """``gz`` as a bundle member: other bytes on either side, read by its span."""
    data = gz.read_bytes()
    bundle = folder / "b.tar"
    bundle.write_bytes(b"\x17" * before + data + b"\0" * after)
    return GzipAt(bundle, Span(before, len(data)), "local")


ranges = st.lists(
    st.tuples(st.integers(0, 400_000), st.sampled_from([0, 1, 7, 4096, 70_000, 500_000])),
    min_size=1,
    max_size=12,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    size=st.integers(0, 300_000),
    seed=st.integers(0, 10**6),
    every=st.sampled_from([4096, 65_536, 100_003]),
    engine=st.sampled_from(ENGINES),
    reads=ranges,
    spacing=st.sampled_from([8192, 1 << 20]),
)
def test_every_range_read_is_the_original_bytes(
    size: int,
    seed: int,
    every: int,
    engine: Codec,
    reads: list[tuple[int, int]],
    spacing: int,
) -> None:
    data = data_of(size, seed)
    codec = Codec(engine.engine, engine.level, every)
    with tempfile.TemporaryDirectory() as tmp:
        gz, points = packed(Path(tmp), data, codec)
        assert (points is not None) == (size > every), "a point only where more data follows"
        own = GzipAt(gz, None, "local")
        member = in_bundle(Path(tmp), gz, seed % 9000, seed % 700)
        reader = SeekReader(spacing=spacing)
        for offset, length in reads:
            want = data[offset : offset + length]
            for at in (own, member):
                assert reader.read(at, offset, length, seek_points=points) == want
                assert reader.read(at, offset, length, seek_points=None) == want


def test_a_gzip_with_points_is_one_standard_member_the_system_reads(tmp_path: Path) -> None:
    data = data_of(3 * (1 << 20) + 7, seed=3)
    for codec in ENGINES:
        gz, points = packed(tmp_path, data, codec)
        assert points is not None and [u for u, _ in decode_points(points)] == [
            1 << 20,
            2 << 20,
            3 << 20,
        ]
        subprocess.run(["gzip", "-t", str(gz)], check=True)
        out = subprocess.run(["gunzip", "-c", str(gz)], check=True, capture_output=True).stdout
        assert out == data
        listing = subprocess.run(["gzip", "-l", str(gz)], check=True, capture_output=True).stdout
        assert str(len(data)).encode() in listing
        assert gzip.decompress(gz.read_bytes()) == data


def test_the_checkpoints_stay_within_their_bound_and_reads_stay_right(tmp_path: Path) -> None:
    reader = SeekReader(spacing=4096, max_checkpoints=16)
    files = []
    for n in range(4):
        folder = tmp_path / str(n)
        folder.mkdir()
        data = data_of(200_000, seed=n)
        gz, _ = packed(folder, data, Codec("isal", 1, 0))
        files.append((GzipAt(gz, None, "local"), data))
    rnd = random.Random(5)
    for _ in range(200):
        at, data = rnd.choice(files)
        offset = rnd.randrange(len(data))
        assert reader.read(at, offset, 4096, seek_points=None) == data[offset : offset + 4096]
        assert reader.checkpoints() <= 16


def test_reads_from_many_threads_at_once(tmp_path: Path) -> None:
    data = data_of(3 << 20, seed=11)
    gz, points = packed(tmp_path, data, Codec("isal", 1, 256 << 10))
    at = GzipAt(gz, None, "local")
    reader = SeekReader(spacing=128 << 10)
    rnd = random.Random(1)
    jobs = [(rnd.randrange(len(data)), rnd.choice([1, 4096, 200_000])) for _ in range(300)]

    def one(job: tuple[int, int], with_points: bool) -> bool:
        offset, length = job
        got = reader.read(at, offset, length, seek_points=points if with_points else None)
        return got == data[offset : offset + length]

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(one, jobs, [True] * len(jobs)))
        assert all(pool.map(one, jobs, [False] * len(jobs)))


def test_damaged_points_still_give_the_right_bytes(tmp_path: Path) -> None:
    data = data_of(300_000, seed=2)
    gz, _ = packed(tmp_path, data, Codec("isal", 1, 65_536))
    at = GzipAt(gz, None, "local")
    for damaged in ("not base64!", "gA==", "AAAA"):
        assert SeekReader().read(at, 250_000, 10, seek_points=damaged) == data[250_000:250_010]


def test_a_gzip_replaced_under_its_name_is_read_afresh(tmp_path: Path) -> None:
    reader = SeekReader(spacing=4096)
    first, second = data_of(100_000, seed=1), data_of(120_000, seed=2)
    gz, _ = packed(tmp_path, first, Codec("isal", 1, 0))
    at = GzipAt(gz, None, "local")
    assert reader.read(at, 90_000, 100, seek_points=None) == first[90_000:90_100]
    (tmp_path / "new").mkdir()
    gz2, _ = packed(tmp_path / "new", second, Codec("isal", 1, 0))
    os.replace(gz2, gz)
    assert reader.read(at, 90_000, 100, seek_points=None) == second[90_000:90_100]


def test_an_older_gzip_of_several_members_is_read_across_them(tmp_path: Path) -> None:
    parts = [data_of(50_000, seed=n) for n in range(3)]
    gz = tmp_path / "old.gz"
    gz.write_bytes(b"".join(gzip.compress(p) for p in parts))
    data = b"".join(parts)
    at = GzipAt(gz, None, "local")
    reader = SeekReader(spacing=8192)
    for offset in (0, 49_990, 100_000, 149_000, 149_999, 150_000):
        assert reader.read(at, offset, 20, seek_points=None) == data[offset : offset + 20]


def test_a_truncated_gzip_is_corrupt_naming_it(tmp_path: Path) -> None:
    data = data_of(300_000, seed=4)
    gz, points = packed(tmp_path, data, Codec("isal", 1, 65_536))
    gz.write_bytes(gz.read_bytes()[:-5000])
    at = GzipAt(gz, None, "local")
    for seek_points in (points, None):
        with pytest.raises(CorruptGzip, match=str(gz)):
            SeekReader().read(at, 290_000, 9000, seek_points=seek_points)


CONFIG = JSONL_SITE + "bundle_below = 3145728\n"


def test_a_pass_records_points_for_gzips_and_bundle_members(roots: Roots) -> None:
    """What a pass writes: each file over a MiB has its points in the manifest,
    and its ranges read from them equal the file, in a gzip of its own and in a
    bundle."""
    files = {"u/big.jsonl": jsonl(40_000, seed=1), "u/mid.jsonl": jsonl(12_000, seed=2)}
    files |= {f"u/s{n}.jsonl": jsonl(30, seed=n) for n in range(3)}
    for rel, data in files.items():
        roots.write(rel, data, age_days=20)
    (roots.base / "coldkeep.toml").write_text(CONFIG)
    ck_json(roots.base, "pass")

    async def recorded() -> list[Entry]:
        async with await Manifest.open(roots.layout.manifest, readonly=True) as m:
            return await m.entries()

    found = asyncio.run(recorded())
    assert len(found) == len(files)
    reader = SeekReader()
    rnd = random.Random(0)
    kinds = set()
    for entry in found:
        data = files[entry.relpath]
        assert (entry.seek_points is not None) == (len(data) > 1 << 20), entry.relpath
        if entry.seek_points is None:
            continue
        kinds.add(entry.span is not None)
        at = GzipAt(roots.archive / entry.gz_path, entry.span, "local")
        for _ in range(20):
            start = rnd.randrange(len(data))
            assert reader.read_entry(at, entry, start, 4096) == data[start : start + 4096]
    assert kinds == {True, False}, "a gzip of its own and a bundle member, both with points"
