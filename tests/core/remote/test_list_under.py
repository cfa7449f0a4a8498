"""``list_under``: a site's beats and statements listed together, as two
listings would list them, from a folder and from S3; on S3 in one request,
whatever lies beside and between them in key order left out."""

from __future__ import annotations

import asyncio
from pathlib import Path

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.remote.filestore import FileStore
from coldkeep.core.remote.objectstore import ObjectStore
from coldkeep.core.remote.s3store import S3Store

from s3kit import S3Site

KEYS = [
    "web-1/events/2026-03.db",
    "web-1/files/app/a.jsonl.gz",
    "web-1/heartbeat/h0001793534400000-0badc0de.json",
    "web-1/heartbeat/h0001793534500000-0badc0df.json",
    "web-1/heartbeat2/not-a-beat",  # after heartbeat/ in key order, before manifest/
    "web-1/manifest/g000000000007-1793534400000.db",
    "web-1/manifest/g000000000007-1793534400000.db.sig",
    "web-1/site/key.json",
    "web-10/heartbeat/h0001793534400000-00000000.json",  # another site, a prefix of whose
    "web-1\u00e9/manifest/x.db",  # name is this one's (and one after it in UTF-8)
]
UNDER = ["web-1/heartbeat/", "web-1/manifest/"]


async def both_ways(store: ObjectStore) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    try:
        together = await store.list_under(UNDER)
        apart = {p: [i.key async for i in store.list_objects(p)] for p in UNDER}
    finally:
        await store.close()
    return {p: [i.key for i in infos] for p, infos in together.items()}, apart


def expected() -> dict[str, list[str]]:
    return {p: [k for k in KEYS if k.startswith(p)] for p in UNDER}


def test_from_a_folder(tmp_path: Path) -> None:
    for key in KEYS:
        (tmp_path / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / key).write_bytes(key.encode())
    together, apart = asyncio.run(both_ways(FileStore(tmp_path)))
    assert together == apart == expected()


def test_from_s3_in_one_request(s3: S3Site) -> None:
    for key in KEYS:
        s3.server.put_raw(s3.bucket, f"fleet/{key}", key.encode())
    remote = RemoteSettings(url=f"s3://{s3.bucket}/fleet", endpoint_url=s3.endpoint)
    before = len(s3.proxy.exchanges)
    together, apart = asyncio.run(both_ways(S3Store(remote)))
    lists = [x for x in s3.proxy.exchanges[before:] if x.method == "GET"]
    assert len(lists) == 1 + len(UNDER), [x.path for x in lists]  # together, then apart
    assert together == apart == expected()
