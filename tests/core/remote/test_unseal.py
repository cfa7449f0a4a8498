"""Sealed remote copies read back (remote/unseal.py through fetch.py): a site
shipped to a folder, every local copy dropped, every object then sealed as a
sealing ship leaves it (tests/sealkit.py). With the identity every file
restores and cats bit-identical, a bundle member by one ranged GET of its
stream; without it, or with another, each read says the one line; an altered
stream is refused, nothing placed."""

from __future__ import annotations

import asyncio
import io
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sealkit import new_identity, seal_remote, ship_sealed_site

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import Digest
from coldkeep.core.base.config import Settings, load_settings
from coldkeep.core.base.configmount import MountSettings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.stream import EventStream
from coldkeep.core.files.reader import stream_entry
from coldkeep.core.files.restore import RestoreReport, Selection
from coldkeep.core.remote.fetch import RemoteReader, remote_reader
from coldkeep.core.remote.rangecache import range_cache
from coldkeep.core.remote.sealing import Identities, IdentityNeeded, load_identities
from coldkeep.core.remote.unseal import SealedUnreadable, unsealed_name
from coldkeep.core.store.entries import Entry
from coldkeep.core.store.manifest import Manifest

from remotecheck import ship_site

SITE = "web-1"


@pytest.fixture(scope="module")
def sealed_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the base holding the site, the identity file): shipped, dropped, sealed."""
    base = tmp_path_factory.mktemp("sealed")
    remote = base / "remote"
    asyncio.run(ship_site(base, remote, SITE, seed=11))
    key, recipients = new_identity(base)
    archive = base / SITE / "archive"
    assert asyncio.run(seal_remote(archive, remote, SITE, recipients)) > 5
    return base, key


def settings_of(base: Path) -> Settings:
    remote = RemoteSettings((base / "remote").as_uri(), site=SITE, keep_local_days=0)
    return replace(load_settings(base / SITE / "coldkeep.toml"), remote=remote)


def restore_all(base: Path, to: Path, identities: Identities | None) -> RestoreReport:
    archiver = Archiver(settings_of(base), stream=EventStream(), serve_events=False)
    archiver.sessions.identities = identities
    return asyncio.run(archiver.restore(Selection(glob="**"), to))


def test_every_file_restores_with_the_identity(
    sealed_site: tuple[Path, Path], tmp_path: Path
) -> None:
    base, key = sealed_site
    report = restore_all(base, tmp_path / "out", load_identities(key))
    assert not report.failed, [f.detail for f in report.files if f.result != "restored"]
    assert report.counts == {"restored": len(report.files)} and len(report.files) > 10
    for f in report.files:
        assert Path(f.target).is_file()
    assert not [n for n in (base / SITE / "archive").iterdir() if n.name.startswith(".remote-")]


def test_without_the_identity_each_file_says_the_key_it_needs(
    sealed_site: tuple[Path, Path], tmp_path: Path
) -> None:
    base, _ = sealed_site
    report = restore_all(base, tmp_path / "out", None)
    assert report.failed and {f.result for f in report.files} == {"error"}
    for f in report.files:
        assert "give --identity FILE" in f.detail and ".age is sealed to " in f.detail, f.detail
        assert "\n" not in f.detail
    assert not list((tmp_path / "out").rglob("*.*"))


def test_a_wrong_identity_is_named(sealed_site: tuple[Path, Path], tmp_path: Path) -> None:
    base, _ = sealed_site
    other, _ = new_identity(tmp_path, "other.txt")
    report = restore_all(base, tmp_path / "out", load_identities(other))
    assert report.failed and {f.result for f in report.files} == {"error"}
    assert all(str(other) in f.detail and "sealed to" in f.detail for f in report.files)


class Counting:
    """A store's ranged GETs and downloads, counted (bytes asked)."""

    def __init__(self, reader: RemoteReader) -> None:
        self.ranges: list[int] = []
        self.downloads = 0
        store: Any = reader.store
        read_range, download = store.read_range, store.download

        async def counted_range(
            key: str, start: int, length: int, version: str | None = None
        ) -> bytes:
            self.ranges.append(length)
            return await read_range(key, start, length, version)  # type: ignore[no-any-return]

        async def counted_download(key: str, fd: int) -> int:
            self.downloads += 1
            return await download(key, fd)  # type: ignore[no-any-return]

        store.read_range, store.download = counted_range, counted_download


async def fetch_each(base: Path, identities: Identities) -> list[tuple[Entry, bytes, int]]:
    """Each entry's gzip fetched into a scratch file: (entry, its gzip, the bytes
    its one GET asked for; 0 for a whole object)."""
    layout = Layout(base / SITE / "archive")
    manifest = await Manifest.open_existing(layout.manifest)
    assert manifest is not None
    remote = settings_of(base).remote
    got = []
    async with manifest, remote_reader(remote, manifest, layout, identities) as reader:
        assert reader is not None
        counting = Counting(reader)
        for entry in await manifest.entries():
            counting.ranges.clear()
            async with reader.fetched(entry, reader_cancel()) as tmp:
                data = await asyncio.to_thread(tmp.read_bytes)
            got.append((entry, data, sum(counting.ranges)))
    return got


def reader_cancel() -> CancelToken:
    return CancelToken()


def test_a_bundle_member_is_one_ranged_get_of_its_stream(sealed_site: tuple[Path, Path]) -> None:
    base, key = sealed_site
    fetched = asyncio.run(fetch_each(base, load_identities(key)))
    members = [(e, data, asked) for e, data, asked in fetched if e.span is not None]
    assert members, "the demo bundles small files"
    for entry, data, _ in fetched:
        assert len(data) == entry.gz_bytes
    for entry, _, asked in members:
        assert entry.span is not None
        assert entry.span.length < asked <= entry.span.length + (64 << 10)


async def cat_each(base: Path, cache_dir: Path, identities: Identities | None) -> list[str]:
    """Each entry read through the block cache (cat, the mount): what was wrong."""
    layout = Layout(base / SITE / "archive")
    manifest = await Manifest.open_existing(layout.manifest)
    assert manifest is not None
    remote = settings_of(base).remote
    wrong = []
    async with manifest, remote_reader(remote, manifest, layout, identities) as reader:
        assert reader is not None
        async with range_cache(reader.store, MountSettings(16 << 20, cache_dir)) as cache:
            for entry in await manifest.entries():
                try:
                    at = await reader.cached_gzip(entry, cache)
                except SealedUnreadable as err:
                    wrong.append(str(err))
                    continue
                out = io.BytesIO()
                done = await stream_entry(at, Digest(entry.bytes, entry.sha256), out)
                if done.problem is not None:
                    wrong.append(done.problem)
                # Read twice: the opened copy is kept for the next read of it.
                again = await reader.cached_gzip(entry, cache)
                assert again.name == at.name
    return wrong


def test_reads_through_the_block_cache_open_the_stream_whole(
    sealed_site: tuple[Path, Path], tmp_path: Path
) -> None:
    base, key = sealed_site
    assert asyncio.run(cat_each(base, tmp_path / "cache", load_identities(key))) == []
    assert list((tmp_path / "cache").iterdir()) == [], "the opened copies go with the cache"
    refused = asyncio.run(cat_each(base, tmp_path / "cache", None))
    assert refused and all("give --identity" in line for line in refused)


def test_an_altered_stream_is_refused_and_nothing_placed(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    asyncio.run(ship_site(tmp_path, remote, SITE, seed=12))
    key, recipients = new_identity(tmp_path)
    asyncio.run(seal_remote(tmp_path / SITE / "archive", remote, SITE, recipients))
    with sqlite3.connect(tmp_path / SITE / "archive" / "coldkeep.db") as db:
        objects = db.execute(
            "SELECT path, stored_as FROM remote_objects WHERE path LIKE 'files/%'"
        ).fetchall()
        first = dict(
            db.execute("SELECT path, min(offset + length) FROM sealed_spans GROUP BY path")
        )
    assert objects and all(unsealed_name(stored) for _, stored in objects)
    for path, stored in objects:
        p = remote / SITE / stored
        data = bytearray(p.read_bytes())
        # In the last chunk of the object's first stream, past any header:
        # the stream fails its authentication (a header's byte would read as
        # a wrong key).
        data[first.get(path, len(data)) - 20] ^= 0x40
        p.write_bytes(bytes(data))
    report = restore_all(tmp_path, tmp_path / "out", load_identities(key))
    failed = [f for f in report.files if f.result != "restored"]
    # A byte changed in a bundle spoils the one member's stream it lies in.
    assert failed and {f.result for f in failed} == {"error"}
    assert all("fails age's authentication" in f.detail for f in failed), failed
    placed = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert len(placed) == len(report.files) - len(failed)


def test_a_month_only_the_remote_holds_comes_back_with_the_identity(tmp_path: Path) -> None:
    remote = tmp_path / "remote"
    asyncio.run(ship_site(tmp_path, remote, SITE, seed=13))
    key, recipients = new_identity(tmp_path)
    asyncio.run(seal_remote(tmp_path / SITE / "archive", remote, SITE, recipients))
    archive = tmp_path / SITE / "archive"
    with sqlite3.connect(archive / "coldkeep.db") as db:
        [month] = db.execute(
            "SELECT month FROM remote_objects WHERE month IS NOT NULL ORDER BY month LIMIT 1"
        ).fetchone()
    month_db = archive / "events" / f"{month}.db"
    month_db.unlink()
    archiver = Archiver(settings_of(tmp_path), stream=EventStream(), serve_events=False)
    with pytest.raises(
        IdentityNeeded, match=rf"events/{month}\.[0-9a-f]+\.db\.gz\.[0-9a-f-]+\.age is sealed"
    ):
        asyncio.run(archiver.restore_events(months=[month]))
    assert not month_db.exists()
    archiver.sessions.identities = load_identities(key)
    report = asyncio.run(archiver.restore_events(months=[month]))
    assert month_db.exists() and report.restored + report.already_live > 0


def test_without_any_snapshot_sealed_gzips_open_and_sealed_bundles_are_named(
    tmp_path: Path,
) -> None:
    remote = tmp_path / "remote"
    key, _ = new_identity(tmp_path)
    asyncio.run(ship_sealed_site(tmp_path, remote, SITE, 14, key))
    shutil.rmtree(tmp_path / SITE / "archive")
    shutil.rmtree(remote / SITE / "manifest")
    archiver = Archiver(settings_of(tmp_path), stream=EventStream(), serve_events=False)
    archiver.sessions.identities = load_identities(key)
    report = asyncio.run(archiver.rebuild_from_remote())
    assert report.snapshot is None and report.fetched > 0
    assert report.sealed_skipped and all(".tar." in k for k in report.sealed_skipped)
    assert all("sealed bundle not fetched" in p for p in report.problems), report.problems
    gzips = [p for p in (tmp_path / SITE / "archive" / "files").rglob("*") if p.is_file()]
    assert gzips and all(p.name.endswith(".gz") for p in gzips)
    assert report.entries == len(gzips)


def test_deep_without_sealed_objects_needs_no_identity(tmp_path: Path) -> None:
    asyncio.run(ship_site(tmp_path, tmp_path / "remote", SITE, seed=15))
    archiver = Archiver(settings_of(tmp_path), stream=EventStream(), serve_events=False)
    report = asyncio.run(archiver.verify_remote(deep=True))
    assert not report.failed and report.ok == report.checked > 1
