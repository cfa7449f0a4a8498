"""A site whose every local copy was dropped once shipped: each entry's gzip read
through the block cache (``RemoteReader.remote_file``) from worker threads
inflates to the archived bytes, each object's bytes fetched once."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import random
from pathlib import Path

from coldkeep.core.base.codec import Digest
from coldkeep.core.base.configmount import MountSettings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.ratelimit import UNLIMITED
from coldkeep.core.files.reader import stream_entry
from coldkeep.core.files.seek import SeekReader
from coldkeep.core.remote.connect import connected
from coldkeep.core.remote.fetch import RemoteReader, remote_reader
from coldkeep.core.remote.rangecache import RangeCache, RemoteFile, range_cache
from coldkeep.core.store.entries import Entry
from coldkeep.core.store.manifest import Manifest

from remotecheck import ship_site


def inflate(f: RemoteFile) -> bytes:
    with gzip.GzipFile(fileobj=f) as gz:
        return gz.read()


async def read_all(base: Path, remote: Path, cache_dir: Path) -> tuple[list[Entry], int, int]:
    layout = Layout(base / "web-1" / "archive")
    settings = RemoteSettings(remote.as_uri(), site="web-1", keep_local_days=0)
    manifest = await Manifest.open_existing(layout.manifest)
    assert manifest is not None
    async with manifest, remote_reader(settings, manifest, layout) as reader:
        assert reader is not None
        async with range_cache(reader.store, MountSettings(16 << 20, cache_dir)) as cache:
            wrong = []
            read = await manifest.entries()
            for entry in read:
                assert await reader.source_of(entry) == "remote"
                f = await reader.remote_file(entry, cache)
                data = await asyncio.to_thread(inflate, f)
                if hashlib.sha256(data).hexdigest() != entry.sha256:
                    wrong.append(entry)
            assert wrong == []
            return read, cache.stats.bytes_fetched, cache.stats.gets


def test_every_remote_only_entry_reads_whole_through_the_cache(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    asyncio.run(ship_site(tmp_path, remote, "web-1", seed=5))
    archive = tmp_path / "web-1" / "archive"
    assert not [p for p in (archive / "files").rglob("*") if p.is_file()], "all dropped"
    read, fetched, gets = asyncio.run(read_all(tmp_path, remote, tmp_path / "cache"))
    assert len(read) > 10
    # Each member's or gzip's bytes once: their sum, no more.
    assert fetched == sum(e.gz_bytes for e in read)
    assert gets >= len(read)
    assert list((tmp_path / "cache").iterdir()) == []


async def seek_one(
    reader: RemoteReader, cache: RangeCache, entry: Entry, seeker: SeekReader
) -> int:
    """``entry``'s gzip through ``cached_gzip``: whole through ``stream_entry``
    (its sha256 checked), then ranges from the seek reader, with the entry's
    seek points and through the checkpoint cache; how many ranges were read."""
    at = await reader.cached_gzip(entry, cache)
    assert at.source == "remote" and at.name.startswith(reader.store.where(""))
    out = io.BytesIO()
    done = await stream_entry(at, Digest(entry.bytes, entry.sha256), out)
    assert done.problem is None, done.problem
    data = out.getvalue()
    rnd = random.Random(entry.id)
    ranges = 0
    for _ in range(5):
        offset, n = rnd.randrange(max(1, len(data))), rnd.choice([1, 4096, 70_000])
        for points in (entry.seek_points, None):
            got = await asyncio.to_thread(seeker.read, at, offset, n, seek_points=points)
            assert got == data[offset : offset + n], (entry.relpath, offset, n)
            ranges += 1
    return ranges


async def seek_all(base: Path, remote: Path, cache_dir: Path) -> int:
    layout = Layout(base / "web-1" / "archive")
    manifest = await Manifest.open_existing(layout.manifest)
    assert manifest is not None
    seeker = SeekReader(spacing=4096)
    ranges = 0
    async with (
        manifest,
        connected(RemoteSettings(remote.as_uri(), site="web-1")) as store,
        range_cache(store, MountSettings(16 << 20, cache_dir)) as cache,
    ):
        reader = RemoteReader(store, "web-1", manifest, layout, UNLIMITED, cache)
        read = await manifest.entries()
        for entry in read:
            ranges += await seek_one(reader, cache, entry, seeker)
        assert seeker.checkpoints() > len(read), "kept per copy"
    return ranges


def test_remote_copies_read_at_random_through_the_cache(tmp_path: Path) -> None:
    """The seek reader opens a remote copy as it opens a file (``GzipAt.open``):
    the same bytes, its checkpoints kept under the object's key and window."""
    remote = tmp_path / "remote"
    asyncio.run(ship_site(tmp_path, remote, "web-1", seed=6))
    assert asyncio.run(seek_all(tmp_path, remote, tmp_path / "cache")) > 100
    assert list((tmp_path / "cache").iterdir()) == []
