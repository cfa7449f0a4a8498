"""``[remote] encrypt_to``: what a ship sends is sealed to age recipients on the
host, before it leaves: no gzip, no row of an event month, no path of the
manifest readable in the bucket, and each object opened with the identity gives
the local file back (a bundle member alone, from its own stream)."""

from __future__ import annotations

import hashlib
import io
import sqlite3
from dataclasses import replace
from pathlib import Path

from pyrage import x25519

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.recipients import parse_recipients
from coldkeep.core.base.stream import EventStream
from coldkeep.core.base.times import now_ms
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.remote.sealing import MAGIC, Identities, open_sealed
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.remoteobjects import RemoteObjects

from s3kit import S3Site
from s3kit.proxy import INTERNAL_ERROR, ResetRequest

PREFIX = "fleet"
SITE = "web-1"
KEY = x25519.Identity.generate()


def archiver_for(config: Path, s3: S3Site) -> Archiver:
    settings = load_settings(config)
    remote = RemoteSettings(
        f"s3://{s3.bucket}/{PREFIX}",
        endpoint_url=s3.endpoint,
        region="us-east-1",
        site=SITE,
        keep_local_days=-1,
        encrypt_to=parse_recipients([str(KEY.to_public())]),
    )
    return Archiver(replace(settings, remote=remote), stream=EventStream(), serve_events=False)


def opened(data: bytes, skip: int = 0) -> bytes:
    out = io.BytesIO()
    ids = Identities(Path("key"), (str(KEY.to_public()),), (KEY,))
    open_sealed(
        io.BytesIO(data), out, ids, length=len(data), what="t", sealed_to=None,
        cancel=CancelToken(), skip=skip,
    )  # fmt: skip
    return out.getvalue()


async def test_nothing_leaves_the_host_unsealed(tmp_path: Path, s3: S3Site) -> None:
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=now_ms()).config
    live = config.parent / "live"
    biggest = max((p for p in live.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    marker = biggest.read_bytes()[100:140]
    ck = archiver_for(config, s3)
    await ck.run_pass()
    # Faults on the way: a PUT reset mid-body, a HEAD and a listing answered 500.
    faults = [
        s3.proxy.fail(ResetRequest(after_bytes=300), method="PUT", path=r"\.age$", times=1),
        s3.proxy.fail(INTERNAL_ERROR, method="HEAD", path=r"\.age$", times=1),
        s3.proxy.fail(INTERNAL_ERROR, method="GET", query=r"list-type=2", times=1),
    ]
    shipped = await ck.ship()
    assert [f.hits for f in faults] == [1, 1, 1]
    assert not shipped.problems and shipped.uploaded > 1 and shipped.snapshot
    archive = config.parent / "archive"
    with sqlite3.connect(archive / "coldkeep.db") as db:
        relpath = str(db.execute("SELECT relpath FROM entries LIMIT 1").fetchone()[0]).encode()
    month_db = sorted((archive / "events").glob("*.db"))[0]
    with sqlite3.connect(month_db) as db:
        [table] = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        row = db.execute(f"SELECT * FROM {table} LIMIT 1").fetchone()
    text = max((v for v in row if isinstance(v, str)), key=len).encode()
    assert len(text) >= 8, row
    keys = s3.server.list_keys(s3.bucket, f"{PREFIX}/{SITE}/")
    assert any("/manifest/" in k for k in keys) and any("/events/" in k for k in keys)
    # The site's claim, its snapshot's signed statement and its heartbeat are
    # plain by design: ids, a host name, a fingerprint, a size and sha256 of the
    # sealed snapshot; counts and times.
    public = [k for k in keys if "/site/id." in k or k.endswith(".sig") or "/heartbeat/" in k]
    assert len(public) == 3, public
    for key in public:
        data = s3.server.get_raw(s3.bucket, key)
        assert data is not None and marker not in data and relpath not in data, key
        assert text not in data, key
    for key in set(keys) - set(public):
        data = s3.server.get_raw(s3.bucket, key)
        assert data is not None and data.startswith(MAGIC), key
        assert not data.startswith(b"\x1f\x8b"), key
        assert marker not in data and relpath not in data and text not in data, key
        assert key.endswith(".age"), key

    async with await Manifest.open(archive / "coldkeep.db") as manifest:
        objects = RemoteObjects(manifest)
        rows = await objects.after(None, 10_000)
        fingerprint = parse_recipients([str(KEY.to_public())]).fingerprint
        assert rows and all(o.sealed_to == fingerprint for o in rows)
        bundles = 0
        for obj in rows:
            stored = s3.server.get_raw(s3.bucket, f"{PREFIX}/{SITE}/{obj.key}")
            assert stored is not None
            assert (len(stored), hashlib.sha256(stored).hexdigest()) == (obj.bytes, obj.sha256)
            if obj.month is not None:
                plain = opened(stored)  # a month: one stream
                assert hashlib.sha256(plain).hexdigest() == obj.local_sha256
                continue
            local = (archive / obj.path).read_bytes()
            assert (len(local), hashlib.sha256(local).hexdigest()) == (
                obj.local_bytes,
                obj.local_sha256,
            )
            members = await objects.member_spans(obj.path)
            if not members:
                assert opened(stored) == local
                continue
            bundles += 1
            for offset, length in members:  # each member alone, from its own stream
                found = await objects.stream_of(obj.path, offset, length)
                assert found is not None, (obj.path, offset)
                at, n, skip = found
                assert opened(stored[at : at + n], skip) == local[offset : offset + length]
        assert bundles > 0
