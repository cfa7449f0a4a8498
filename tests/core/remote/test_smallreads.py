"""The fleet view's small reads: a statement or beat read at one look is not
read again at the next while its listing says it is the same object; one
written over at the same key is; a torn cache file is an empty cache."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from coldkeep.core.remote.filestore import FileStore
from coldkeep.core.remote.objectstore import ObjectInfo
from coldkeep.core.remote.smallreads import SmallReads


class CountingStore(FileStore):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    async def read_range(
        self, key: str, start: int, length: int, version: str | None = None
    ) -> bytes:
        self.reads.append(key)
        return await super().read_range(key, start, length, version)


async def look(store: CountingStore, cache: Path) -> dict[str, bytes]:
    """One look: every object under ``s/`` listed and read through the cache."""
    reads = SmallReads.loaded(store, cache)
    listed: list[ObjectInfo] = [i async for i in store.list_objects("s/")]
    got = {i.key: await reads.read(i) for i in listed}
    await reads.save(cache.with_name("scratch.partial"))
    return got


def test_only_what_changed_is_read_again(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    (bucket / "s").mkdir(parents=True)
    for name in ("a", "b"):
        (bucket / "s" / name).write_bytes(name.encode() * 10)
    store = CountingStore(bucket)
    cache = tmp_path / "reads.json"

    assert asyncio.run(look(store, cache)) == {"s/a": b"a" * 10, "s/b": b"b" * 10}
    assert sorted(store.reads) == ["s/a", "s/b"]
    store.reads.clear()
    assert asyncio.run(look(store, cache))["s/b"] == b"b" * 10
    assert store.reads == [], "nothing changed: nothing read"

    # Written over (another inode at the key), and one gone, one new.
    other = bucket / "s" / "b.new"
    other.write_bytes(b"B" * 10)
    os.replace(other, bucket / "s" / "b")
    (bucket / "s" / "a").unlink()
    (bucket / "s" / "c").write_bytes(b"c")
    got = asyncio.run(look(store, cache))
    assert got == {"s/b": b"B" * 10, "s/c": b"c"} and sorted(store.reads) == ["s/b", "s/c"]
    assert "s/a" not in cache.read_text(), "the cache keeps only what the last look read"
    assert not cache.with_name("scratch.partial").exists()


def test_a_torn_cache_is_an_empty_one(tmp_path: Path) -> None:
    bucket = tmp_path / "bucket"
    (bucket / "s").mkdir(parents=True)
    (bucket / "s" / "a").write_bytes(b"a")
    store = CountingStore(bucket)
    cache = tmp_path / "reads.json"
    asyncio.run(look(store, cache))
    [(tag, _)] = json.loads(cache.read_text()).values()
    bad = json.dumps({"s/a": [tag, "not base64!"]})
    for torn in (cache.read_text()[:20], bad, "[]"):
        cache.write_text(torn)
        store.reads.clear()
        assert asyncio.run(look(store, cache)) == {"s/a": b"a"} and store.reads == ["s/a"]
