"""A site whose every local copy was dropped once shipped: each entry's gzip read
through the block cache (``RemoteReader.remote_file``) from worker threads
inflates to the archived bytes, each object's bytes fetched once."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from pathlib import Path

from coldkeep.core.base.config import MountSettings, RemoteSettings
from coldkeep.core.base.layout import Layout
from coldkeep.core.remote.fetch import remote_reader
from coldkeep.core.remote.rangecache import RemoteFile, range_cache
from coldkeep.core.store.manifest import Entry, Manifest

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
