"""Bundles: small files packed into standard tars. What an operator relies on:
the system's tar and gunzip give every file back, a corrupt member costs only
itself, a damaged index costs nothing, a source changed mid-pass stays live, and
a bundle copied from elsewhere cannot write outside the live tree."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.files.bundle import INDEX_NAME, _tar_header, read_bundle

from helpers import JSONL_SITE, Roots, ck, ck_json, entries, gunzip_entry, jsonl, sha

CONFIG = JSONL_SITE


@pytest.fixture
def site(roots: Roots) -> Path:
    """Two units of small files (one of them in two months) and one large file."""
    for n in range(12):
        roots.write(f"a/f{n:02d}.jsonl", jsonl(40 + n, seed=n), age_days=20)
    for n in range(5):
        roots.write(f"b/deep/g{n}.jsonl", jsonl(30, seed=100 + n), age_days=20 + 40 * (n % 2))
    roots.write("b/big.jsonl", jsonl(12_000, seed=7), age_days=20)  # ~1.9 MB: its own gzip
    (roots.base / "coldkeep.toml").write_text(CONFIG)
    return roots.base


def bundles(site: Path) -> list[Path]:
    return sorted((site / "archive" / "files").rglob("*.tar"))


def originals(site: Path) -> dict[str, str]:
    live = site / "live"
    return {p.relative_to(live).as_posix(): sha(p.read_bytes()) for p in live.rglob("*.jsonl")}


def test_the_systems_tar_and_gunzip_give_every_file_back(site: Path, tmp_path: Path) -> None:
    before = originals(site)
    result = ck_json(site, "pass")["result"]
    assert result["files"]["archived"] == len(before)
    found = bundles(site)
    assert len(found) == 3, found  # a/ in one month, b/ in two
    assert (site / "archive" / "files" / "b" / "big.jsonl.gz").exists()
    out = tmp_path / "extracted"
    out.mkdir()
    for bundle in found:
        listing = subprocess.run(
            ["tar", "-tvf", str(bundle)], check=True, capture_output=True, text=True
        ).stdout
        assert INDEX_NAME in listing
        subprocess.run(["tar", "-xf", str(bundle), "-C", str(out)], check=True)
    gzs = sorted(out.rglob("*.gz"))
    subprocess.run(["gunzip", *map(str, gzs)], check=True)
    got = {p.relative_to(out).as_posix(): sha(p.read_bytes()) for p in out.rglob("*.jsonl")}
    assert got == {rel: digest for rel, digest in before.items() if rel != "b/big.jsonl"}
    assert not list((site / "live").rglob("*.jsonl")), "every source archived and removed"
    # --list names each file's bundle and where its gzip lies in it.
    listed = ck_json(site, "restore", "--path", "**", "--list")["result"]
    members = [e for e in listed if e["member_offset"] is not None]
    assert len(members) == len(before) - 1
    assert all(e["gz_path"].endswith(".tar") and e["member_length"] > 0 for e in members)


def test_a_corrupt_member_is_refused_alone_and_the_rest_restore(site: Path) -> None:
    before = originals(site)
    ck(site, "pass")
    rows = [r for r in entries(site) if r["member_offset"] is not None]
    hit = rows[3]
    bundle = site / "archive" / hit["gz_path"]
    data = bytearray(bundle.read_bytes())
    data[hit["member_offset"] + hit["member_length"] // 2] ^= 0x55
    bundle.write_bytes(bytes(data))

    verified = ck_json(site, "verify", check=1)["result"]
    assert [p["gz_path"] for p in verified["problems"]] == [
        f"{hit['gz_path']}@{hit['member_offset']}"
    ]
    restored = ck_json(site, "restore", "--path", "**", check=1)["result"]
    outcomes = {r["relpath"]: r["result"] for r in restored}
    assert outcomes.pop(hit["relpath"]) == "mismatch"
    assert set(outcomes.values()) == {"restored"}
    assert originals(site) == {k: v for k, v in before.items() if k != hit["relpath"]}


def damage_index(bundle: Path) -> None:
    with tarfile.open(bundle) as tar:
        info = tar.getmember(INDEX_NAME)
    data = bytearray(bundle.read_bytes())
    data[info.offset_data : info.offset_data + 20] = b"{not json at all!!!!"
    bundle.write_bytes(bytes(data))


def test_a_damaged_index_is_read_through_the_tar_headers(site: Path, tmp_path: Path) -> None:
    before = originals(site)
    ck(site, "pass")
    for bundle in bundles(site):
        damage_index(bundle)
        assert not read_bundle(bundle).index_used
    # The manifest lost: rebuilt from the tar headers and each member's gzip header.
    (site / "archive" / "coldkeep.db").rename(tmp_path / "lost.db")
    for suffix in ("-wal", "-shm"):
        (site / "archive" / f"coldkeep.db{suffix}").unlink(missing_ok=True)
    rebuilt = site / "archive" / "coldkeep.db"
    report = ck_json(site, "rebuild-manifest", "--out", str(rebuilt))["result"]
    assert report["entries"] == len(before) and report["refused"] == []
    ck(site, "restore", "--path", "**", "--to", str(tmp_path / "back"))
    back = tmp_path / "back"
    got = {p.relative_to(back).as_posix(): sha(p.read_bytes()) for p in back.rglob("*.jsonl")}
    assert got == before


@pytest.mark.parametrize("processes", [1, 2], ids=["in process", "in workers"])
def test_a_source_changed_mid_bundle_stays_live_and_its_member_is_stale(
    site: Path, processes: int
) -> None:
    with (site / "coldkeep.toml").open("a") as config:  # [io] processes: bundleprocs.py
        config.write(f"\n[io]\nprocesses = {processes}\n")
    victim = site / "live" / "a" / "f03.jsonl"

    async def append_once(name: StepName, info: StepInfo) -> None:
        if name == "bundle_verified" and "a/" in str(info.get("label")):
            old = victim.stat().st_mtime_ns
            with victim.open("ab") as f:
                f.write(b'{"late": true}\n')
            os.utime(victim, ns=(old, old))  # still old enough: only its size says

    archiver = Archiver(load_settings(site / "coldkeep.toml"), step=append_once)
    summary = asyncio.run(archiver.run_pass())
    assert summary.files.changed == 1 and victim.exists()
    rows = {r["relpath"]: r for r in entries(site)}
    assert rows["a/f03.jsonl"]["status"] == "stale"
    assert len(gunzip_entry(site / "archive", rows["a/f03.jsonl"])) < victim.stat().st_size
    # The next pass archives the bytes as they are now.
    again = ck_json(site, "pass")["result"]
    assert again["files"]["archived"] == 1 and not victim.exists()


def hostile_bundle(path: Path, members: dict[str, bytes]) -> None:
    """A tar made elsewhere, with an index that lists what it names."""
    path.parent.mkdir(parents=True, exist_ok=True)
    index: list[dict[str, Any]] = []
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members.items():
            gz = subprocess.run(["gzip", "-c"], input=data, capture_output=True, check=True).stdout
            info = tarfile.TarInfo(name)
            info.size = len(gz)
            tar.addfile(info, io.BytesIO(gz))
        offsets = {m.name: (m.offset_data, m.size) for m in tar.getmembers()}
        for name, data in members.items():
            offset, length = offsets[name]
            rel = name.removesuffix(".gz")
            index.append(
                {"relpath": rel, "offset": offset, "length": length, "bytes": len(data),
                 "sha256": sha(data), "mtime_ns": 0, "mode": 0o100644}
            )  # fmt: skip
        raw = json.dumps({"coldkeep_bundle": 1, "members": index}).encode()
        info = tarfile.TarInfo(INDEX_NAME)
        info.size = len(raw)
        tar.addfile(info, io.BytesIO(raw))


def test_a_copied_bundle_naming_paths_outside_is_refused_member_by_member(
    site: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    bundle = site / "archive" / "files" / "a" / "2020-01.000000000000.tar"
    hostile_bundle(
        bundle,
        {
            "../../../outside/evil.jsonl.gz": b"escape\n",
            "a/\x1b]0;owned\x07.jsonl.gz": b"terminal escape\n",
            "a/fine.jsonl.gz": b"kept\n",
        },
    )
    # Recovery takes it for an orphan bundle: the members inside the live tree
    # are kept (stale: no source), a name with an ESC in it too (a file system
    # takes it: it is escaped where shown); the one outside is refused by name
    # and nothing is written outside.
    escaped = "a/\x1b]0;owned\x07.jsonl"
    result = ck_json(site, "recover", check=None)["result"]
    assert (result["orphans_stale"], result["orphans_refused"]) == (2, 1), result
    rows = {r["relpath"]: r for r in entries(site)}
    assert set(rows) == {"a/fine.jsonl", escaped}
    assert rows["a/fine.jsonl"]["status"] == "stale"
    ck(site, "restore", "--path", "**", "--to", str(tmp_path / "back"))
    assert (tmp_path / "back" / "a" / "fine.jsonl").read_bytes() == b"kept\n"
    assert (tmp_path / "back" / escaped).read_bytes() == b"terminal escape\n"
    assert list(outside.iterdir()) == []
    # rebuild-manifest refuses the same member, by name.
    report = ck_json(site, "rebuild-manifest", "--out", str(tmp_path / "r.db"), check=1)["result"]
    assert report["entries"] == 2
    assert "outside" in " ".join(report["refused"])


def test_bundles_off_archives_one_gzip_per_file(site: Path) -> None:
    config = site / "coldkeep.toml"
    config.write_text(config.read_text().replace("[files]\n", "[files]\nbundle_below = 0\n"))
    ck(site, "pass")
    assert bundles(site) == []
    assert all(r["member_offset"] is None for r in entries(site))


def test_bundle_settings_are_checked(site: Path) -> None:
    config = site / "coldkeep.toml"
    config.write_text(config.read_text() + "bundle_below = 999999999\n")
    run = ck(site, "status", check=2)
    assert "files.bundle_below" in run.stderr and "Traceback" not in run.stderr


def test_a_tar_not_named_as_a_bundle_is_not_taken_for_one(site: Path) -> None:
    """A plain file an older, copy-based scheme left at an archive path may be a
    tar of gzips: it is nobody's bundle, and recovery leaves it be."""
    legacy = site / "archive" / "files" / "a" / "exports.tar"
    hostile_bundle(legacy, {"a/x.jsonl.gz": b"not coldkeep's\n"})
    result = ck_json(site, "recover")["result"]
    assert result["orphans_stale"] == 0 and legacy.exists()
    assert entries(site) == []


# Names as relpaths come: any text, and the bytes of a name that is not UTF-8
# as lone surrogates (surrogateescape).
NAMES = st.text(
    st.one_of(st.characters(exclude_categories=["Cs"]), st.sampled_from("\udc80\udcff/é")),
    min_size=1,
    max_size=130,
)


@given(
    name=NAMES,
    size=st.one_of(st.integers(0, 8**11), st.integers(0, 1 << 40)),
    mtime_ns=st.one_of(st.integers(0, 8**11 * 10**9), st.integers(-(10**18), 10**19)),
    mode=st.integers(0, 0o177777),
)
def test_a_members_header_is_what_tarfile_writes(
    name: str, size: int, mtime_ns: int, mode: int
) -> None:
    """The plain ustar header is built without tarfile when everything fits it:
    byte for byte what tarfile writes (pax where it does not fit), so every tar
    reads a bundle as it always did."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime_ns // 10**9
    info.mode = mode & 0o777
    info.type = tarfile.REGTYPE
    assert _tar_header(name, size, mtime_ns, mode) == info.tobuf(
        tarfile.PAX_FORMAT, "utf-8", "surrogateescape"
    )
