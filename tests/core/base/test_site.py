"""Which live tree an archive belongs to: a second config on the same archive_root
is refused before it touches anything, and a lost manifest is never replaced by a
fresh empty one without the operator saying so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import Settings, parse_settings
from coldkeep.core.base.site import SiteError, check_site, read_site
from coldkeep.core.files.restore import Selection

from helpers import Roots, jsonl


def settings_for(roots: Roots, live: Path, name: str = "coldkeep.toml") -> Settings:
    return parse_settings(
        {
            "live_root": str(live),
            "archive_root": str(roots.archive),
            "mode": "on",
            "files": {"include": ["**/*.jsonl"], "min_age_days": 1},
        },
        roots.base / name,
    )


async def test_a_second_live_tree_on_the_same_archive_is_refused_and_writes_nothing(
    roots: Roots,
) -> None:
    roots.write("app/a.jsonl", jsonl(30, seed=1))
    summary = await Archiver(settings_for(roots, roots.live)).run_pass()
    assert summary.files.archived == 1
    other = roots.base / "other-live"
    (other / "app").mkdir(parents=True)
    b = Archiver(settings_for(roots, other, "b.toml"))
    with pytest.raises(SiteError) as err:
        await b.restore(Selection(unit="app"))
    message = str(err.value)
    assert "\n" not in message
    assert f"belongs to the live tree {roots.live}" in message and str(other) in message
    assert not (other / "app" / "a.jsonl").exists()
    with pytest.raises(SiteError):
        await b.run_pass()
    # The first tree still restores its own file.
    report = await Archiver(settings_for(roots, roots.live)).restore(Selection(unit="app"))
    assert not report.failed
    assert (roots.live / "app" / "a.jsonl").read_bytes() == jsonl(30, seed=1)


async def test_the_same_tree_reached_by_another_path_is_the_same_site(roots: Roots) -> None:
    roots.write("app/a.jsonl", jsonl(30, seed=2))
    await Archiver(settings_for(roots, roots.live)).run_pass()
    alias = roots.base / "alias"
    alias.symlink_to(roots.live)
    summary = await Archiver(settings_for(roots, alias)).run_pass()
    assert summary.status == "ok"
    # A live tree renamed keeps its directory: still the same site.
    moved = roots.base / "moved-live"
    roots.live.rename(moved)
    alias.unlink()
    assert (await Archiver(settings_for(roots, moved)).run_pass()).status == "ok"


async def test_a_lost_manifest_stops_the_pass_until_it_is_rebuilt(roots: Roots) -> None:
    roots.write("app/a.jsonl", jsonl(30, seed=3))
    archiver = Archiver(settings_for(roots, roots.live))
    await archiver.run_pass()
    roots.layout.manifest.unlink()
    with pytest.raises(SiteError) as err:
        await archiver.run_pass()
    message = str(err.value)
    assert "\n" not in message and "rebuild-manifest" in message and "--from-remote" in message
    assert str(roots.layout.manifest) in message
    assert not roots.layout.manifest.exists(), "no empty manifest left behind"
    report = await archiver.rebuild_manifest()
    assert report.entries == 1
    assert (await archiver.run_pass()).status == "ok"


def test_a_site_record_alone_says_a_manifest_existed(roots: Roots) -> None:
    """Every local copy shipped and dropped, the manifest deleted: only the
    record is left to say this is not a new archive."""
    roots.layout.site.write_text(
        json.dumps({"live_root": str(roots.live), "dev": 0, "ino": 0}) + "\n"
    )
    with pytest.raises(SiteError, match="records that a manifest was made here"):
        check_site(roots.layout, roots.live)


def test_a_new_archive_passes_the_check_and_the_first_pass_records_its_tree(
    roots: Roots,
) -> None:
    check_site(roots.layout, roots.live)  # an empty archive_root: a new site
    check_site(roots.layout.__class__(roots.base / "not-yet"), roots.live)  # none at all
    assert read_site(roots.layout) is None


async def test_the_first_pass_writes_the_record(roots: Roots) -> None:
    await Archiver(settings_for(roots, roots.live)).run_pass()
    record = read_site(roots.layout)
    assert record is not None and record.live_root == str(roots.live.resolve())
    roots.layout.site.write_text("{not json")
    with pytest.raises(SiteError, match="cannot be read"):
        check_site(roots.layout, roots.live)


async def test_a_record_left_half_written_by_a_killed_pass_is_swept(roots: Roots) -> None:
    # A pass killed between writing its record and renaming it into place left
    # one under a name of its own; the next one writes the record, leaves none.
    settings = settings_for(roots, roots.live)
    await Archiver(settings).run_pass()
    record = roots.layout.site.read_bytes()
    roots.layout.site.rename(roots.archive / "coldkeep.site.0badc0de.partial")
    await Archiver(settings).run_pass()
    assert roots.layout.site.read_bytes() == record
    assert sorted(p.name for p in roots.archive.glob("*.partial")) == []
    # One left beside a record already in place goes too.
    (roots.archive / "coldkeep.site.1badc0de.partial").write_bytes(record[:5])
    await Archiver(settings).run_pass()
    assert sorted(p.name for p in roots.archive.glob("*.partial")) == []


async def test_a_site_copied_whole_keeps_working_where_it_lands(roots: Roots) -> None:
    """The live tree and its archive moved together (a restore of the host from
    a backup, to another path): still one site."""
    roots.write("app/a.jsonl", jsonl(30, seed=4))
    await Archiver(settings_for(roots, roots.live)).run_pass()
    copy = roots.base.with_name(roots.base.name + "-copy")
    shutil.copytree(roots.base, copy / "site", symlinks=True)
    moved = Roots(copy / "site", copy / "site" / "live", copy / "site" / "archive")
    report = await Archiver(settings_for(moved, moved.live)).restore(Selection(unit="app"))
    assert not report.failed and (moved.live / "app" / "a.jsonl").exists()


async def test_a_restore_from_a_lost_manifest_says_so_instead_of_nothing_archived(
    roots: Roots,
) -> None:
    roots.write("app/a.jsonl", jsonl(30, seed=5))
    archiver = Archiver(settings_for(roots, roots.live))
    await archiver.run_pass()
    roots.layout.manifest.unlink()
    for attempt in (archiver.restore(Selection(unit="app")), archiver.verify()):
        with pytest.raises(SiteError, match="rebuild-manifest"):
            await attempt
