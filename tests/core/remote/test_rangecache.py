"""Reads of remote-only bytes through the block cache, against a real folder and
the moto S3 server (behind the counting fault proxy): the bytes equal the
object's, a GET per block and no more, the folder within its bound, a failed
fetch caching nothing, an object replaced at its key never read for the one
pinned, concurrent readers sharing one fetch, and a crashed reader's folder
cleared by the next one."""

from __future__ import annotations

import asyncio
import gzip
import os
import random
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.configmount import MountSettings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import RemoteError
from coldkeep.core.remote.filestore import FileStore
from coldkeep.core.remote.objectstore import ObjectStore, RemoteMissing, RemoteReplaced
from coldkeep.core.remote.rangecache import CacheDirError, RangeCache, Window, range_cache
from coldkeep.core.remote.s3store import S3Store

from s3kit import S3Site
from s3kit.proxy import INTERNAL_ERROR

KEY = "web-1/files/app/2026-03.jsonl.gz"
DATA = random.Random(7).randbytes(3 << 20 | 12345)  # three blocks and a piece


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop on a thread of its own, as the mount runs one: the store's
    client lives there, the reads come from other threads."""
    lp = asyncio.new_event_loop()
    thread = threading.Thread(target=lp.run_forever, daemon=True)
    thread.start()
    yield lp
    lp.call_soon_threadsafe(lp.stop)
    thread.join()
    lp.close()


def on(loop: asyncio.AbstractEventLoop, store: ObjectStore) -> None:
    asyncio.run_coroutine_threadsafe(store.close(), loop).result()


@pytest.fixture
def folder_store(tmp_path: Path) -> FileStore:
    root = tmp_path / "remote"
    (root / KEY).parent.mkdir(parents=True)
    (root / KEY).write_bytes(DATA)
    return FileStore(root)


def s3_store(s3: S3Site) -> S3Store:
    s3.server.put_raw(s3.bucket, f"fleet/{KEY}", DATA)
    remote = RemoteSettings(
        url=f"s3://{s3.bucket}/fleet", endpoint_url=s3.endpoint, region="us-east-1", site="web-1"
    )
    return S3Store(remote)


def cache_files(cache: RangeCache) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in cache.folder.iterdir() if p.name != ".lock"}


def gets(s3: S3Site) -> int:
    return sum(1 for x in s3.proxy.exchanges if x.method == "GET" and KEY in x.path)


# bytes ---------------------------------------------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    start=st.integers(0, len(DATA)),
    size=st.integers(0, len(DATA)),
    reads=st.lists(st.tuples(st.integers(0, len(DATA) + 10), st.integers(0, 1 << 21)), max_size=6),
)
def test_any_read_of_any_window_gives_the_objects_bytes(
    folder_store: FileStore,
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    start: int,
    size: int,
    reads: list[tuple[int, int]],
) -> None:
    size = min(size, len(DATA) - start)
    cache = RangeCache.open(folder_store, tmp_path / "cache", 8 << 20, loop)
    try:
        window = Window(KEY, start, size)
        for offset, length in reads:
            want = DATA[start + offset : start + min(offset + length, size)]
            assert cache.read(window, offset, length) == want
        f = cache.file(KEY, size, start)
        assert f.read() == DATA[start : start + size]
    finally:
        cache.close()
    assert not cache.folder.exists()


def test_a_remote_gzip_is_inflated_through_the_file_and_from_a_flush_point(
    tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    text = b"".join(b'{"n": %d, "msg": "hello"}\n' % i for i in range(200_000))
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    head = c.compress(text[:1_000_000]) + c.flush(zlib.Z_FULL_FLUSH)
    raw = head + c.compress(text[1_000_000:]) + c.flush()
    root = tmp_path / "remote"
    (root / "a").mkdir(parents=True)
    (root / "a" / "whole.gz").write_bytes(gzip.compress(text, 1))
    (root / "a" / "raw").write_bytes(raw)
    store = FileStore(root)
    cache = RangeCache.open(store, tmp_path / "cache", 8 << 20, loop)
    try:
        f = cache.file("a/whole.gz", (root / "a" / "whole.gz").stat().st_size)
        with gzip.GzipFile(fileobj=f) as gz:
            assert gz.read() == text
        # Raw inflate started at a full-flush point's compressed offset.
        f = cache.file("a/raw", len(raw))
        f.seek(len(head))
        assert f.tell() == len(head)
        assert zlib.decompressobj(-15).decompress(f.read()) == text[1_000_000:]
        assert f.seek(-3, os.SEEK_END) == len(raw) - 3 and len(f.read(100)) == 3
        assert f.name.endswith("/a/raw")
    finally:
        cache.close()


# GETs --------------------------------------------------------------------------------


def test_a_small_member_costs_one_get_of_its_size_and_is_then_read_from_the_cache(
    s3: S3Site, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    store = s3_store(s3)
    cache = RangeCache.open(store, tmp_path / "cache", 8 << 20, loop)
    try:
        s3.proxy.reset_counts()
        offset = (1 << 20) - 7000  # straddles the object's first 1 MiB boundary
        member = cache.file(KEY, 20 << 10, offset)
        assert member.read() == DATA[offset : offset + (20 << 10)]
        assert (gets(s3), cache.stats.gets, cache.stats.bytes_fetched) == (1, 1, 20 << 10)
        # The bytes on the wire: the member and the response's head, no more.
        wire = sum(x.body_sent for x in s3.proxy.exchanges if x.method == "GET")
        assert wire == 20 << 10
        member.seek(100)
        assert member.read(5000) == DATA[offset + 100 : offset + 5100]
        assert (gets(s3), cache.stats.hits) == (1, 1)
        # A whole object: one GET per 1 MiB block, each once.
        whole = cache.file(KEY, len(DATA))
        for _ in range(2):
            whole.seek(0)
            assert whole.read() == DATA
        assert gets(s3) == 1 + 4 and cache.stats.bytes_fetched == (20 << 10) + len(DATA)
    finally:
        cache.close()
        on(loop, store)


def test_the_folder_stays_within_cache_bytes_least_recently_used_out_first(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    block = 64 << 10
    cache = RangeCache.open(folder_store, tmp_path / "cache", 4 * block, loop, block_bytes=block)
    window = Window(KEY, 0, len(DATA))
    try:
        for index in range(12):
            assert cache.read(window, index * block + 10, 100) == DATA[index * block + 10 :][:100]
            cache.read(window, 0, 1)  # block 0 kept in use: never the oldest
            assert sum(cache_files(cache).values()) <= 4 * block
            assert cache.cached_bytes == sum(cache_files(cache).values())
        before = cache.stats
        assert before.evicted == 12 - 4  # block 0 among them, never evicted
        cache.read(window, 5, 1)  # still there
        cache.read(window, 2 * block, 1)  # evicted long ago: fetched again
        after = cache.stats
        assert (after.gets - before.gets, after.hits - before.hits) == (1, 1)
    finally:
        cache.close()


# failures ----------------------------------------------------------------------------


def test_a_failed_fetch_raises_one_line_naming_the_key_and_caches_nothing(
    s3: S3Site, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    store = s3_store(s3)
    cache = RangeCache.open(store, tmp_path / "cache", 8 << 20, loop)
    try:
        rule = s3.proxy.fail(INTERNAL_ERROR, method="GET")  # every retry too
        f = cache.file(KEY, 20 << 10, 4096)
        with pytest.raises(RemoteError) as err:
            f.read()
        said = str(err.value)
        assert "\n" not in said and KEY in said and "InternalError" in said, said
        assert cache_files(cache) == {} and cache.cached_bytes == 0
        assert cache.stats.failed == 1
        s3.proxy.remove(rule)
        f.seek(0)
        assert f.read() == DATA[4096 : 4096 + (20 << 10)]
        assert len(cache_files(cache)) == 1
    finally:
        cache.close()
        on(loop, store)


def test_a_missing_or_short_object_is_an_error_naming_it(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    cache = RangeCache.open(folder_store, tmp_path / "cache", 8 << 20, loop)
    try:
        with pytest.raises(RemoteMissing, match=r"web-1/files/gone\.gz: not there"):
            cache.read(Window("web-1/files/gone.gz", 0, 10), 0, 10)
        longer = Window(KEY, 0, len(DATA) + 5)  # the manifest says more than is there
        with pytest.raises(RemoteError, match="shorter than the manifest records"):
            cache.read(longer, len(DATA) - 1, 6)
        assert cache_files(cache) == {}
    finally:
        cache.close()


def _pinned_then_replaced(
    store: ObjectStore,
    loop: asyncio.AbstractEventLoop,
    tmp_path: Path,
    replace: Callable[[], None],
) -> tuple[RangeCache, Window, Window]:
    """A cache with block 0 of ``KEY`` read through a window pinned to the
    version shipped, then ``replace`` run (another object of the same size put
    at the key): the cache, that window, and one of the new object's version."""

    def head() -> str:
        info = asyncio.run_coroutine_threadsafe(store.head(KEY), loop).result()
        assert info is not None and info.version is not None
        return info.version

    cache = RangeCache.open(store, tmp_path / "cache", 8 << 20, loop)
    shipped = Window(KEY, 0, len(DATA), head())
    assert cache.read(shipped, 0, 10) == DATA[:10]
    replace()
    return cache, shipped, Window(KEY, 0, len(DATA), head())


FORGED = bytes(b ^ 0xFF for b in DATA)


@pytest.mark.parametrize("how", ["renamed over", "written in place"])
def test_a_window_pinned_to_a_folders_object_never_reads_another(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path, how: str
) -> None:
    path = folder_store.root / KEY

    def replace() -> None:
        if how == "renamed over":
            (tmp_path / "forged").write_bytes(FORGED)
            os.replace(tmp_path / "forged", path)
        else:
            path.write_bytes(FORGED)

    cache, shipped, now = _pinned_then_replaced(folder_store, loop, tmp_path, replace)
    try:
        assert cache.read(shipped, 0, 10) == DATA[:10]  # a block cached before: still its own
        with pytest.raises(RemoteReplaced, match=rf"{KEY}: no longer the object shipped"):
            cache.read(shipped, 2 << 20, 10)
        assert cache.read(now, 0, 10) == FORGED[:10]  # another version: not the block cached
        assert cache.stats.gets == 3 and cache.stats.failed == 1
    finally:
        cache.close()


def test_a_window_pinned_to_an_etag_never_reads_another_object(
    s3: S3Site, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    store = s3_store(s3)  # a bucket without versions: the ETag, sent as If-Match
    cache, shipped, now = _pinned_then_replaced(
        store, loop, tmp_path, lambda: s3.server.put_raw(s3.bucket, f"fleet/{KEY}", FORGED)
    )
    try:
        assert shipped.version is not None and shipped.version.startswith('"')
        with pytest.raises(RemoteReplaced, match=rf"{KEY}: no longer the object shipped"):
            cache.read(shipped, 2 << 20, 10)
        assert cache.read(now, 2 << 20, 10) == FORGED[2 << 20 :][:10]
        assert cache_files(cache) and cache.stats.failed == 1
    finally:
        cache.close()
        on(loop, store)


def test_a_window_pinned_to_a_version_id_reads_that_version_or_fails(
    s3: S3Site, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    """A bucket that keeps versions: the version shipped is read whatever was
    put over it; once that version is gone, the read fails."""
    s3.server.client.put_bucket_versioning(
        Bucket=s3.bucket, VersioningConfiguration={"Status": "Enabled"}
    )
    store = s3_store(s3)
    cache, shipped, now = _pinned_then_replaced(
        store, loop, tmp_path, lambda: s3.server.put_raw(s3.bucket, f"fleet/{KEY}", FORGED)
    )
    try:
        assert shipped.version is not None and not shipped.version.startswith('"')
        assert cache.read(shipped, 2 << 20, 10) == DATA[2 << 20 :][:10]
        assert cache.read(now, 2 << 20, 10) == FORGED[2 << 20 :][:10]
        s3.server.client.delete_object(
            Bucket=s3.bucket, Key=f"fleet/{KEY}", VersionId=shipped.version
        )
        with pytest.raises(RemoteReplaced, match=rf"{KEY}: no longer the object shipped"):
            cache.read(shipped, 1 << 20, 10)
    finally:
        cache.close()
        on(loop, store)


def test_a_cache_dir_that_cannot_hold_the_cache_is_one_line_naming_it(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(CacheDirError) as err:
        RangeCache.open(folder_store, tmp_path / "file" / "cache", 8 << 20, loop)
    said = str(err.value)
    assert said.startswith(f"{tmp_path / 'file' / 'cache'}: ") and "[mount] cache_dir" in said
    assert "\n" not in said


def test_a_read_on_the_stores_own_loop_is_refused_and_aread_serves_it(
    folder_store: FileStore, tmp_path: Path
) -> None:
    async def main() -> bytes:
        async with range_cache(folder_store, MountSettings(8 << 20, tmp_path / "c")) as cache:
            with pytest.raises(RuntimeError, match="use aread"):
                cache.read(Window(KEY, 0, 10), 0, 10)
            return await cache.aread(Window(KEY, 0, 10), 2, 5)

    assert asyncio.run(main()) == DATA[2:7]
    assert list((tmp_path / "c").iterdir()) == []  # the cache's folder removed


# concurrency -------------------------------------------------------------------------


class GatedStore(FileStore):
    """A folder whose ranged reads from ``gated_from`` on wait for the test to
    let them go; each asked for is noted (``asked``, under ``seen``)."""

    def __init__(self, root: Path, gated_from: int = 0) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.gated_from = gated_from
        self.seen = threading.Condition()
        self.asked: list[int] = []

    @property
    def calls(self) -> int:
        with self.seen:
            return len(self.asked)

    async def read_range(
        self, key: str, start: int, length: int, version: str | None = None
    ) -> bytes:
        with self.seen:
            self.asked.append(start)
            self.seen.notify_all()
        if start >= self.gated_from:
            await asyncio.to_thread(self.gate.wait)
        return await super().read_range(key, start, length, version)


def test_concurrent_readers_of_one_block_share_one_fetch(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    store = GatedStore(folder_store.root)
    cache = RangeCache.open(store, tmp_path / "cache", 8 << 20, loop)
    started = threading.Barrier(9)

    def reader(i: int) -> bytes:
        started.wait()
        return cache.read(Window(KEY, 0, len(DATA)), i * 1000, 5000)

    try:
        with ThreadPoolExecutor(8) as pool:
            done = [pool.submit(reader, i) for i in range(8)]
            started.wait()
            store.gate.set()
            got = [f.result() for f in done]
        assert got == [DATA[i * 1000 : i * 1000 + 5000] for i in range(8)]
        assert store.calls == 1 and cache.stats.gets == 1
    finally:
        cache.close()


def test_many_threads_reading_anywhere_get_the_bytes_within_the_bound(
    s3: S3Site, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    store = s3_store(s3)
    block = 128 << 10
    cache = RangeCache.open(store, tmp_path / "cache", 6 * block, loop, block_bytes=block)
    window = Window(KEY, 0, len(DATA))

    def reader(seed: int) -> int:
        rnd = random.Random(seed)
        for _ in range(40):
            at = rnd.randrange(len(DATA))
            n = rnd.choice((1, 4096, 100_000))
            assert cache.read(window, at, n) == DATA[at : at + n]
        return 40

    try:
        with ThreadPoolExecutor(8) as pool:
            assert sum(pool.map(reader, range(8))) == 320
        assert sum(cache_files(cache).values()) <= 6 * block
        assert cache.stats.gets == gets(s3)
    finally:
        cache.close()
        on(loop, store)


def test_a_reader_in_order_has_the_next_blocks_fetched_ahead_and_a_random_one_not(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    store = GatedStore(folder_store.root, gated_from=1 << 20)
    cache = RangeCache.open(store, tmp_path / "cache", 8 << 20, loop)
    try:
        f = cache.file(KEY, len(DATA))
        got = [f.read(64 << 10) for _ in range(16)]  # block 0, in order
        with store.seen:
            # The next blocks asked for before the reader needs them.
            assert store.seen.wait_for(lambda: len(store.asked) == 4, timeout=30)
            assert sorted(store.asked) == [0, 1 << 20, 2 << 20, 3 << 20]  # in parallel
        store.gate.set()
        got.append(f.read())
        assert b"".join(got) == DATA and cache.stats.gets == 4
        rnd = random.Random(3)
        other = cache.file(KEY, len(DATA) - 1, 1)  # another window: nothing cached
        for _ in range(30):
            at = rnd.randrange((2 << 20) - 4096)  # in the window's first two blocks
            other.seek(at)
            assert other.read(4096) == DATA[1 + at : 1 + at + 4096]
        assert cache.stats.gets - 4 == 2  # the blocks touched, nothing ahead
        assert store.calls == cache.stats.gets
    finally:
        cache.close()


def test_close_during_a_fetch_wakes_its_readers_with_an_error_and_removes_the_folder(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    store = GatedStore(folder_store.root)  # never let go: a GET that hangs
    cache = RangeCache.open(store, tmp_path / "cache", 8 << 20, loop)
    try:
        with ThreadPoolExecutor(3) as pool:
            readers = [pool.submit(cache.read, Window(KEY, 0, len(DATA)), 10, 10) for _ in range(3)]
            with store.seen:
                assert store.seen.wait_for(lambda: len(store.asked) == 1, timeout=30)
            cache.close()
            for r in readers:
                with pytest.raises(RemoteError, match="closed"):
                    r.result(timeout=30)
        assert not cache.folder.exists() and store.calls == 1
        with pytest.raises(RemoteError, match="after the remote cache was closed"):
            cache.read(Window(KEY, 0, len(DATA)), 0, 1)
    finally:
        store.gate.set()  # the folder read's thread, let go


def test_a_block_removed_behind_the_caches_back_is_fetched_again(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    cache = RangeCache.open(folder_store, tmp_path / "cache", 8 << 20, loop)
    try:
        window = Window(KEY, 0, len(DATA))
        assert cache.read(window, 5, 10) == DATA[5:15]
        for name in cache_files(cache):
            (cache.folder / name).unlink()
        assert cache.read(window, 5, 10) == DATA[5:15]
        assert cache.stats.gets == 2 and cache.cached_bytes == 1 << 20
    finally:
        cache.close()


# the folder --------------------------------------------------------------------------


def test_a_crashed_readers_folder_is_removed_by_the_next_and_a_live_ones_is_kept(
    folder_store: FileStore, loop: asyncio.AbstractEventLoop, tmp_path: Path
) -> None:
    cache_dir = tmp_path / "cache"
    crash = (
        "import asyncio, os, sys\n"
        "from pathlib import Path\n"
        "from coldkeep.core.remote.filestore import FileStore\n"
        "from coldkeep.core.remote.rangecache import RangeCache, Window\n"
        "store = FileStore(Path(sys.argv[1]))\n"
        "c = RangeCache.open(store, Path(sys.argv[2]), 8 << 20, asyncio.new_event_loop())\n"
        "os._exit(0)\n"  # no close: a crash
    )
    subprocess.run(
        [sys.executable, "-c", crash, str(folder_store.root), str(cache_dir)], check=True
    )
    (stale,) = cache_dir.iterdir()
    live = RangeCache.open(folder_store, cache_dir, 8 << 20, loop)
    assert not stale.exists()
    live.read(Window(KEY, 0, 100), 0, 100)
    other = RangeCache.open(folder_store, cache_dir, 8 << 20, loop)
    assert live.folder.exists() and len(cache_files(live)) == 1
    other.close()
    live.close()
    assert list(cache_dir.iterdir()) == []
