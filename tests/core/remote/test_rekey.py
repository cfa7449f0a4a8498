"""``coldkeep rekey``: after ``[remote] encrypt_to`` changes, every object is
sealed again to the new recipients, from the local copy where there is one and
from the remote one opened with the old identity where not; the old objects go."""

from __future__ import annotations

import hashlib
import io
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from pyrage import x25519

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.recipients import parse_recipients
from coldkeep.core.base.stream import EventStream
from coldkeep.core.base.times import now_ms
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.remote.rekey import NothingToSealTo
from coldkeep.core.remote.sealing import Identities, open_sealed
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.remoteobjects import RemoteObject, RemoteObjects

SITE = "web-1"


def archiver_for(config: Path, key: x25519.Identity | None, keep_local_days: float) -> Archiver:
    settings = load_settings(config)
    remote = RemoteSettings(
        (config.parent / "remote").as_uri(),
        site=SITE,
        keep_local_days=keep_local_days,
        encrypt_to=None if key is None else parse_recipients([str(key.to_public())]),
    )
    return Archiver(replace(settings, remote=remote), stream=EventStream(), serve_events=False)


async def rows(config: Path) -> list[RemoteObject]:
    async with await Manifest.open(config.parent / "archive" / "coldkeep.db") as manifest:
        return await RemoteObjects(manifest).after(None, 100_000)


def opens_with(config: Path, obj: RemoteObject, key: x25519.Identity) -> bool:
    """The object opens with ``key`` to the local file's bytes: each of its
    streams in turn (a bundle's tile it; otherwise one, the whole object)."""
    with sqlite3.connect(config.parent / "archive" / "coldkeep.db") as db:
        streams = db.execute(
            "SELECT offset, length FROM sealed_spans WHERE path = ? ORDER BY plain_offset",
            [obj.path],
        ).fetchall()
    data = (config.parent / "remote" / SITE / obj.key).read_bytes()
    ids = Identities(Path("key"), (str(key.to_public()),), (key,))
    out = io.BytesIO()
    for offset, length in streams or [(0, len(data))]:
        open_sealed(
            io.BytesIO(data[offset : offset + length]), out, ids, length=length, what=obj.path,
            sealed_to=None, cancel=CancelToken(),
        )  # fmt: skip
    plain = out.getvalue()
    return (len(plain), hashlib.sha256(plain).hexdigest()) == (obj.local_bytes, obj.local_sha256)


def stored(config: Path) -> set[str]:
    root = config.parent / "remote" / SITE
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


async def test_new_recipients_get_every_object_sealed_again(tmp_path: Path) -> None:
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=now_ms()).config
    first, second, third = (x25519.Identity.generate() for _ in range(3))
    await archiver_for(config, None, 0).run_pass()
    # Shipped unsealed at first, local copies dropped for some: nothing to open.
    plain = await archiver_for(config, None, -1).ship()
    assert not plain.problems
    ck = archiver_for(config, first, -1)
    plan = await ck.rekey_plan()
    assert plan.items and {i.source for i in plan.items} <= {"local", "remote"}
    assert not [i for i in plan.items if i.needs_identity], "unsealed: no key needed"
    done = await ck.rekey()
    assert not done.problems and done.snapshot and len(done.resealed) == len(plan.items)
    objs = await rows(config)
    assert all(o.sealed_to is not None and opens_with(config, o, first) for o in objs)
    assert not (await ck.rekey_plan()).items
    assert {o.key for o in objs} <= stored(config)
    assert not {o.path for o in objs} & stored(config), "the unsealed objects are gone"

    # Local copies dropped: only the remote holds them, sealed to the first key.
    await archiver_for(config, first, 0).ship()
    ck = archiver_for(config, second, 0)
    needs = await ck.rekey()
    assert needs.failed and needs.needs_identity and not needs.resealed
    key_file = tmp_path / "first.key"
    key_file.write_text(f"# the first key\n{first}\n")
    from coldkeep.core.remote.sealing import load_identities

    ck.sessions.identities = load_identities(key_file)
    done = await ck.rekey()
    assert not done.failed, done.problems
    objs = await rows(config)
    assert all(opens_with(config, o, second) for o in objs)
    before = {o.key for o in objs}
    # A wrong identity reseals nothing and says, once, which set it needed.
    wrong = tmp_path / "third.key"
    wrong.write_text(f"{third}\n")
    other = archiver_for(config, third, 0)
    other.sessions.identities = load_identities(wrong)
    refused = await other.rekey()
    [line] = refused.problems
    assert not refused.resealed and f"{len(objs)} objects" in line and "sealed to" in line
    assert {o.key for o in await rows(config)} == before


async def test_rekey_without_recipients_says_what_to_set(tmp_path: Path) -> None:
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02, now_ms=now_ms()).config
    with pytest.raises(NothingToSealTo, match="encrypt_to is not set"):
        await archiver_for(config, None, -1).rekey_plan()
