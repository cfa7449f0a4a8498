"""The fleet's index of beats: a warm look lists again only the sites that
beat since the last one, and the index is a hint, never an authority (a
forged, deleted or missing entry, a torn cache, an old one or a clock set
back: the site is listed again and judged by what it signed)."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.ops import fleet as fleet_module
from coldkeep.core.ops.fleet import Fleet, FleetSite
from coldkeep.core.remote.keptlisting import RELIST_AFTER_MS

from s3kit import S3Site
from sickfleet import ship

SITES = ("web-a", "web-b")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two demo hosts shipped to one folder remote (``bucket``), once a module."""
    base = tmp_path_factory.mktemp("shipped")
    for name in SITES:
        asyncio.run(ship(base / "hosts", base / "bucket", name))
    return base


@pytest.fixture
def base(shipped: Path, tmp_path: Path) -> Iterator[Path]:
    shutil.copytree(shipped, tmp_path, dirs_exist_ok=True, symlinks=True)
    yield tmp_path


async def look(
    base: Path, remote: RemoteSettings | None = None
) -> tuple[dict[str, FleetSite], list[str]]:
    """One look at the fleet (the folder remote under ``base`` unless another
    is given) through the cache under ``base``: each site, and the sites
    listed whole for it."""
    remote = remote or RemoteSettings((base / "bucket").as_uri())
    fleet = Fleet(remote, base / "cache")
    listed: list[str] = []
    list_under = fleet.store.list_under

    async def counted(prefixes: list[str]) -> dict[str, list[object]]:
        listed.append(prefixes[0].partition("/")[0])
        return await list_under(prefixes)  # type: ignore[return-value]

    fleet.store.list_under = counted  # type: ignore[assignment,method-assign]
    try:
        sites = {s.site: s for s in await fleet.load()}
    finally:
        await fleet.close()
    return sites, sorted(listed)


def beat_at(site: FleetSite) -> int:
    assert site.heard is not None and site.heard.beat is not None, site
    return site.heard.beat.at


async def test_a_warm_look_lists_only_the_sites_that_beat_since(base: Path) -> None:
    first, listed = await look(base)
    assert listed == list(SITES), "a first look lists every site"
    again, listed = await look(base)
    assert listed == [], "nothing beat since: no site listed"
    assert {n: beat_at(s) for n, s in again.items()} == {n: beat_at(s) for n, s in first.items()}
    assert all(s.usable and s.health.state == "ok" for s in again.values())

    await ship(base / "hosts", base / "bucket", "web-b")  # a new beat
    after, listed = await look(base)
    assert listed == ["web-b"]
    assert beat_at(after["web-b"]) > beat_at(first["web-b"])
    assert beat_at(after["web-a"]) == beat_at(first["web-a"])


async def test_the_index_is_a_hint_never_an_authority(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = await look(base)
    index = base / "bucket" / ".beats"
    real = beat_at(first["web-a"])

    # An entry planted by whoever can write the bucket: web-a listed again,
    # and judged by its own signed beat (no newer one is believed).
    (index / "web-a" / "h9999999999999-00000000.json").write_bytes(b"")
    sites, listed = await look(base)
    assert listed == ["web-a"] and beat_at(sites["web-a"]) == real

    # Its entries deleted (or a host not let write them): listed at every look.
    shutil.rmtree(index / "web-a")
    for _ in range(2):
        sites, listed = await look(base)
        assert listed == ["web-a"] and beat_at(sites["web-a"]) == real

    # A torn cache: listed again, no error.
    (base / "cache" / "web-b" / "listing.json").write_bytes(b'{"at": 1')
    sites, listed = await look(base)
    assert listed == ["web-a", "web-b"] and sites["web-b"].health.state == "ok"

    # A kept listing an hour old, or from a clock since set back: listed again.
    now = int(time.time() * 1000)
    for then in (now + RELIST_AFTER_MS, now - 60_000):
        monkeypatch.setattr(fleet_module, "now_ms", lambda then=then: then)
        _, listed = await look(base)
        assert listed == ["web-a", "web-b"], then
        _, listed = await look(base)
        assert listed == ["web-a"], "kept again from then on"


async def test_a_host_that_cannot_write_the_index_still_beats_and_says_why(base: Path) -> None:
    # The index's folder for web-a made a file: no entry can be put under it.
    index = base / "bucket" / ".beats"
    shutil.rmtree(index / "web-a")
    (index / "web-a").write_bytes(b"")
    settings = load_settings(base / "hosts" / "web-a" / "coldkeep.toml")
    remote = RemoteSettings((base / "bucket").as_uri(), site="web-a")
    archiver = Archiver(replace(settings, remote=remote), stream=EventStream(), serve_events=False)
    report = await archiver.ship()
    assert report.heartbeat is not None and not report.problems, report
    [notice] = [n for n in report.notices if "index of beats" in n]
    assert notice.startswith("heartbeat sent, not in the fleet's index of beats (.beats/web-a/)")
    sites, listed = await look(base)
    assert listed == ["web-a", "web-b"], "a first look lists every site"
    assert sites["web-a"].health.state == "ok"
    _, listed = await look(base)
    assert listed == ["web-a"], "the site the index does not name: at every look"


def test_a_warm_look_at_s3_is_a_listing_of_the_sites_and_one_of_the_index(
    base: Path, s3: S3Site
) -> None:
    bucket = base / "bucket"
    for path in bucket.rglob("*"):
        if path.is_file():
            s3.server.put_raw(s3.bucket, f"fleet/{path.relative_to(bucket)}", path.read_bytes())
    remote = RemoteSettings(url=f"s3://{s3.bucket}/fleet", endpoint_url=s3.endpoint)
    first, listed = asyncio.run(look(base, remote))
    assert listed == list(SITES) and all(s.health.state == "ok" for s in first.values())
    before = len(s3.proxy.exchanges)
    again, listed = asyncio.run(look(base, remote))
    asked = [f"{x.method} {x.path}?{x.query}" for x in s3.proxy.exchanges[before:]]
    assert listed == [] and {n: beat_at(s) for n, s in again.items()} == {
        n: beat_at(s) for n, s in first.items()
    }
    lists = [a for a in asked if a.startswith("GET") and "list-type=2" in a]
    assert len(lists) == 2 and "delimiter=%2F" in lists[0] and "beats" in lists[1], asked
    assert not [a for a in asked if a.startswith("GET") and a not in lists], "nothing read"
