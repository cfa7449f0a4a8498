"""What no fault may cost a site with a remote tier: every entry's bytes are
readable whole from its local copy or from a recorded remote copy, every
recorded remote copy is there with the size and sha256 recorded, and no local
copy is gone without one. ``fetch`` reads an object of the remote (a file of a
``file://`` folder, an object of the S3 server) behind coldkeep's back."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyrage
import pytest
from pyrage import x25519

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.ops.demo import write_demo

from helpers import ck, cli_ok, entries, gunzip_entry
from s3kit import S3Site

Fetch = Callable[[str], bytes | None]


def demo_after_pass(site: Path) -> Path:
    """A demo site (as the crash tests use it) after one pass, through the CLI."""
    cli_ok("demo", str(site), "--scale", "0.02", "--seed", "3", "--no-console")
    ck(site, "pass")
    return site


async def ship_site(base: Path, remote: Path, name: str, seed: int) -> None:
    """A demo site archived and shipped to ``remote`` as ``name``, every local
    copy dropped (keep_local_days = 0): the bucket holds all there is."""
    config = write_demo(base / name, seed=seed, scale=0.02).config
    settings = replace(
        load_settings(config), remote=RemoteSettings(remote.as_uri(), site=name, keep_local_days=0)
    )
    archiver = Archiver(settings, stream=EventStream(), serve_events=False)
    await archiver.run_pass()
    report = await archiver.ship()
    assert not report.problems


def set_remote(site: Path, table: str) -> None:
    """The site's ``[remote]`` table replaced by ``table`` (its keys); the demo's
    config ends with its own."""
    config = site / "coldkeep.toml"
    head = config.read_text().split("\n[remote]\n")[0]
    config.write_text(f"{head}\n[remote]\n{table}")


def folder_fetch(root: Path) -> Fetch:
    def fetch(key: str) -> bytes | None:
        path = root / key
        return path.read_bytes() if path.is_file() else None

    return fetch


def remote_rows(site: Path) -> dict[str, dict[str, Any]]:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        db.row_factory = sqlite3.Row
        return {r["path"]: dict(r) for r in db.execute("SELECT * FROM remote_objects")}


def check_remote_site(
    site: Path,
    fetch: Fetch,
    site_name: str,
    *,
    settled: bool = True,
    identity: x25519.Identity | None = None,
) -> int:
    """The checks; how many ran (for a tally). Not ``settled`` (right after a
    kill): an upload cut short may have left its partial in a remote folder, and
    a snapshot its scratch file, which the next ship removes. ``identity``
    opens the objects sealed to age recipients (``[remote] encrypt_to``)."""
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    leftovers = [
        p
        for p in site.rglob("*")
        if p.name.endswith(".partial") and (settled or not _settled_later(site, p))
    ]
    assert leftovers == [], leftovers
    recorded = remote_rows(site)
    objects: dict[str, bytes] = {}
    for path, row in recorded.items():
        data = fetch(f"{site_name}/{row['stored_as'] or path}")
        assert data is not None, f"{path} recorded as remote and not there"
        assert (len(data), hashlib.sha256(data).hexdigest()) == (row["bytes"], row["sha256"]), path
        objects[path] = _opened(site, row, data, identity)
    archive = site / "archive"
    for e in entries(site):
        if e["status"] not in ("archived", "stale", "restored"):
            continue
        local = (archive / e["gz_path"]).is_file()
        found = recorded.get(e["gz_path"])
        assert local or found is not None, f"{e['gz_path']}: no local copy and none recorded remote"
        if found is not None and found["local_gone_at"] is not None and local:
            assert found["local_present"] == 1, f"{e['gz_path']}: dropped, confirmed, still there"
        data = gunzip_entry(archive, e) if local else _gunzip_remote(objects[e["gz_path"]], e)
        assert (len(data), hashlib.sha256(data).hexdigest()) == (e["bytes"], e["sha256"])
    return 4


def _settled_later(site: Path, partial: Path) -> bool:
    """A partial the next ship removes: an upload cut short in a remote folder,
    a scratch file of its own under archive_root, or the site key's file cut
    short before its rename (the next ship makes the key again)."""
    rel = partial.relative_to(site)
    own = rel.parent == Path("archive") and rel.name.startswith((".remote-", "coldkeep.sitekey."))
    return own or "remote" in rel.parts


def _opened(
    site: Path, row: dict[str, Any], data: bytes, identity: x25519.Identity | None
) -> bytes:
    """A sealed object's plaintext (each of its age streams opened in turn),
    checked against the local file's size and sha256 the row keeps."""
    if row["sealed_to"] is None:
        return data
    assert identity is not None, f"{row['path']} is sealed: the check needs the identity"
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        streams = db.execute(
            "SELECT offset, length FROM sealed_spans WHERE path = ? ORDER BY plain_offset",
            [row["path"]],
        ).fetchall()
    plain = b"".join(
        pyrage.decrypt(data[o : o + n], [identity]) for o, n in streams or [(0, len(data))]
    )
    got = (len(plain), hashlib.sha256(plain).hexdigest())
    assert got == (row["plain_bytes"], row["plain_sha256"]), row["path"]
    return plain


def _gunzip_remote(obj: bytes, e: dict[str, Any]) -> bytes:
    offset, length = e["member_offset"], e["member_length"]
    member = obj if offset is None else obj[int(offset) : int(offset) + int(length)]
    return subprocess.run(["gunzip", "-c"], input=member, check=True, capture_output=True).stdout


@dataclass(frozen=True)
class Tier:
    """A site's remote tier as a test reaches it behind coldkeep's back: the
    ``[remote]`` table its config gets (``set_remote``), and each object read
    and written by its key under the site."""

    table: str
    get: Callable[[str], bytes | None]
    put: Callable[[str, bytes], None]

    def damage(self, key: str) -> None:
        """The object at ``key`` replaced by one of its size whose last byte
        differs: what a ranged read or a HEAD of its size cannot tell apart."""
        data = self.get(key)
        assert data, key
        self.put(key, data[:-1] + bytes([data[-1] ^ 1]))


def folder_tier(site: Path, name: str, extra: str = "") -> Tier:
    """A ``file://`` folder inside the site, shipped to as ``name``."""
    root = site / "remote" / name

    def put(key: str, data: bytes) -> None:
        (root / key).write_bytes(data)

    return Tier(f'url = "file:remote"\nsite = "{name}"\n{extra}', folder_fetch(root), put)


def bucket_tier(s3: S3Site, prefix: str, name: str, extra: str = "") -> Tier:
    """The bucket of ``s3`` under ``prefix``, shipped to as ``name``."""
    top = f"{prefix}/{name}/"
    return Tier(
        f'url = "s3://{s3.bucket}/{prefix}"\nendpoint_url = "{s3.endpoint}"\n'
        f'region = "us-east-1"\nsite = "{name}"\n{extra}',
        lambda key: s3.server.get_raw(s3.bucket, top + key),
        lambda key, data: s3.server.put_raw(s3.bucket, top + key, data),
    )


PREFIX, SITE = "fleet", "web-1"


def shipped_tier(
    request: pytest.FixtureRequest, template: Path, keys: str, retention: str
) -> tuple[Path, Tier]:
    """A copy of the site ``template`` shipped as ``SITE`` to the remote
    ``request.param`` names: a folder inside it ("folder"), or a bucket with
    Object Lock in compliance mode, every object locked until its expiry
    ("worm": the fixture's, under ``PREFIX``). ``keys``: more ``[remote]`` keys;
    ``retention``: its ``[retention]`` table."""
    site = request.getfixturevalue("tmp_path") / "site"
    shutil.copytree(template, site)
    if request.param == "folder":
        tier = folder_tier(site, SITE, keys + retention)
    else:
        bucket: S3Site = request.getfixturevalue("worm")
        tier = bucket_tier(bucket, PREFIX, SITE, f'{keys}object_lock = "compliance"\n{retention}')
    set_remote(site, tier.table)
    ck(site, "ship")
    return site, tier
