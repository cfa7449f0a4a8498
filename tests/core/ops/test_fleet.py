"""The fleet view's core: every site under a remote prefix from its manifest
snapshots, searched together, restored from without its host."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sealkit import new_identity, ship_sealed_site

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import RemoteError
from coldkeep.core.base.stream import EventStream
from coldkeep.core.files.catalog import close_all, parse_query
from coldkeep.core.ops.fleet import FILES_SPARE, SEALED, Fleet
from coldkeep.core.remote.sealing import load_identities

from remotecheck import ship_site
from s3kit import S3Site


def scratch_left(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.rglob(".remote-*"))


async def test_two_hosts_searched_together_and_restored_from_the_bucket(tmp_path: Path) -> None:
    remote = tmp_path / "bucket"
    await ship_site(tmp_path, remote, "web-1", seed=1)
    await ship_site(tmp_path, remote, "web-2", seed=2)
    (remote / "web-3").mkdir()  # a host that never shipped
    for name in ("web-1", "web-2"):
        shutil.rmtree(tmp_path / name)  # both hosts gone: only the bucket is left

    fleet = Fleet(RemoteSettings(remote.as_uri()), tmp_path / "cache")
    try:
        sites = {s.site: s for s in await fleet.load()}
        assert sorted(sites) == ["web-1", "web-2", "web-3"]
        assert sites["web-1"].usable and sites["web-2"].usable
        assert not sites["web-3"].usable and "no manifest snapshot" in str(sites["web-3"].problem)
        catalogs = await fleet.catalogs()
        for cat in catalogs.values():  # kept open: one file each, no -wal or -shm
            assert cat.keep_open and cat.manifest.read_bytes()[18:20] == b"\x01\x01"
        hits = {site: cat.filter(parse_query("unit-0001"))[0] for site, cat in catalogs.items()}
        assert hits["web-1"] > 0 and hits["web-2"] > 0
        cat = catalogs["web-2"]
        _, wanted, _ = cat.filter(parse_query("unit-0001"))
        out = tmp_path / "restored"
        report = await fleet.restore("web-2", [r.id for r in wanted], out, stream=EventStream())
        assert {f.result for f in report.files} == {"restored"}
        for f in report.files:
            row = next(r for r in wanted if r.id == f.entry_id)
            assert hashlib.sha256(Path(f.target).read_bytes()).hexdigest() == row.sha256
        cache = tmp_path / "cache"
        assert scratch_left(cache) == [], "nothing of a snapshot's check is left beside it"
        # A second open uses the cached snapshots: nothing is fetched again, and
        # what an earlier view left behind (killed mid-check) is removed.
        for name in ("wal", "shm", "journal"):
            (cache / "web-1" / f".remote-fleet-0badc0de.partial-{name}").write_bytes(b"")
        again = {s.site: s.snapshot for s in await fleet.load()}
        assert again["web-2"] == sites["web-2"].snapshot
        assert scratch_left(cache) == []
    finally:
        await fleet.close()


async def test_a_copy_that_is_not_the_archived_file_is_named_by_its_url(tmp_path: Path) -> None:
    """A remote copy written over by another gzip: the restore says the object
    it read (its URL), not the scratch file it was fetched into."""
    remote = tmp_path / "bucket"
    await ship_site(tmp_path, remote, "web-1", seed=1)
    fleet = Fleet(RemoteSettings(remote.as_uri()), tmp_path / "cache")
    try:
        await fleet.load()
        catalogs = await fleet.catalogs()
        _, rows, _ = catalogs["web-1"].filter(parse_query(""))
        close_all(catalogs.values())
        row = next(r for r in rows if r.member_offset is None)
        obj = remote / "web-1" / row.gz_path
        obj.write_bytes(gzip.compress(b"not the archived bytes"))
        report = await fleet.restore("web-1", [row.id], tmp_path / "out", stream=EventStream())
    finally:
        await fleet.close()
    [done] = report.files
    assert done.result == "mismatch" and done.detail.startswith(f"{obj.as_uri()} gave "), done
    assert ".partial" not in done.detail and not (tmp_path / "out" / row.relpath).exists()


async def test_a_bucket_that_is_not_there_is_said_for_the_fleet_view(
    tmp_path: Path, s3: S3Site
) -> None:
    remote = RemoteSettings(
        "s3://no-such-bucket/fleet", endpoint_url=s3.endpoint, region="us-east-1"
    )
    fleet = Fleet(remote, tmp_path / "cache")
    try:
        with pytest.raises(RemoteError) as err:
            await fleet.load()
    finally:
        await fleet.close()
    line = str(err.value)
    assert "the bucket no-such-bucket does not exist" in line, line
    assert "remote.url" not in line and "--remote" in line, line


async def test_a_sealed_site_asks_for_the_identity(tmp_path: Path) -> None:
    """Its snapshot sealed: listed with what to give, then opened with it, and
    its files restored from their sealed copies."""
    remote = tmp_path / "bucket"
    key, _ = new_identity(tmp_path)
    await ship_sealed_site(tmp_path, remote, "web-1", 7, key)
    shutil.rmtree(tmp_path / "web-1")
    blind = Fleet(RemoteSettings(remote.as_uri()), tmp_path / "cache")
    try:
        [site] = await blind.load()
    finally:
        await blind.close()
    assert not site.usable and site.problem == SEALED
    fleet = Fleet(RemoteSettings(remote.as_uri()), tmp_path / "cache", load_identities(key))
    try:
        await fleet.load()
        [site] = await fleet.counted()
        assert site.usable and site.sealed > 0, site
        cat = (await fleet.catalogs())["web-1"]
        _, wanted, _ = cat.filter(parse_query("unit-0001"))
        out = tmp_path / "restored"
        report = await fleet.restore("web-1", [r.id for r in wanted], out, stream=EventStream())
        assert {f.result for f in report.files} == {"restored"}
        assert scratch_left(tmp_path / "cache") == []
    finally:
        await fleet.close()


KEEPS = """
import asyncio, json, resource, sys
from pathlib import Path
from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.files.catalog import close_all
from coldkeep.core.ops.fleet import Fleet
from coldkeep.tui.console.screens.browse import search

async def main(remote, cache):
    fleet = Fleet(RemoteSettings(Path(remote).as_uri()), Path(cache))
    try:
        await fleet.load()
        catalogs = await fleet.catalogs()
    finally:
        await fleet.close()
    counts = [search(catalogs, "", 5)[0] for _ in range(2)]
    kept = sum(c.keep_open for c in catalogs.values())
    close_all(catalogs.values())
    return {"sites": len(catalogs), "kept": kept, "counts": counts,
            "limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}

print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
"""


LIMITS = """
import json, resource, sys
from coldkeep.core.ops.fleet import files_to_keep
soft, hard = (int(x) for x in sys.argv[1:3])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
kept = [files_to_keep(n) for n in (10, 1000)]
print(json.dumps([*kept, resource.getrlimit(resource.RLIMIT_NOFILE)[0]]))
"""


@pytest.mark.parametrize(
    ("soft", "hard", "kept"),
    [(300, 300, [10, 300 - 256, 300]), (300, 2000, [10, 1000, 1256]), (200, 200, [0, 0, 200])],
)
def test_kept_files_stay_within_the_open_files_limit_raised_as_far_as_it_goes(
    soft: int, hard: int, kept: list[int]
) -> None:
    """A thousand sites' catalogs kept open would pass the soft limit most
    systems set (1,024): it is raised toward the hard one, and what is kept
    stays within it, leaving the process its spare files."""
    run = subprocess.run(
        [sys.executable, "-c", LIMITS, str(soft), str(hard)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(run.stdout) == kept and FILES_SPARE == 256


async def test_a_fleet_past_the_open_files_limit_keeps_open_what_fits(tmp_path: Path) -> None:
    """With room for six kept connections, twelve sites' catalogs keep six,
    and every site is still filtered (the others open their file for each
    filter)."""
    remote = tmp_path / "bucket"
    await ship_site(tmp_path, remote, "s", seed=1)
    for i in range(11):  # the one site's snapshots and beats under 11 more names
        for part in ("manifest", "heartbeat"):
            (remote / f"h{i:02d}" / part).mkdir(parents=True)
            for f in (remote / "s" / part).iterdir():
                os.link(f, remote / f"h{i:02d}" / part / f.name)

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FILES_SPARE + 6, FILES_SPARE + 6))

    run = subprocess.run(
        [sys.executable, "-c", KEEPS, str(remote), str(tmp_path / "cache")],
        capture_output=True, text=True, check=False, preexec_fn=low_limit,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout)
    entries = got["counts"][0] // 12
    assert got["sites"] == 12 and got["counts"] == [12 * entries] * 2 and entries > 0
    assert got["kept"] == 6
