"""A full filesystem, on a real small filesystem (tmpfs mounted over the archive or
the live tree, then filled up): the operation stops at the first ENOSPC with one
line naming the filesystem, exits 1, records the failure and raises an alert,
loses nothing, leaves no partial; the next run, with room, completes."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults.sites import on_faultfs, on_small_fs, unmount_site, write_site

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.files.catalog import load_catalog, parse_query
from coldkeep.core.sched.alerts import conditions
from coldkeep.core.store.manifest import Manifest

from helpers import ck, ck_json, live_files
from sitecheck import Originals, check_site


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    """A demo site; the test mounts small filesystems inside it, unmounted after."""
    site = write_site(tmp_path / "site")
    yield site
    unmount_site(site)


def fill(fs: Path, leave: int) -> Path:
    """Take all but ``leave`` bytes of ``fs``'s free space."""
    st = os.statvfs(fs)
    free = st.f_bavail * st.f_frsize
    filler = fs / "filler"
    with filler.open("wb") as f:
        os.posix_fallocate(f.fileno(), 0, max(free - leave, 1))
    return filler


def alert_kinds(site: Path) -> list[str]:
    async def read() -> list[str]:
        async with await Manifest.open(site / "archive" / "coldkeep.db", readonly=True) as m:
            return [c.kind for c in await conditions(m)]

    return asyncio.run(read())


def assert_out_of_space(run: subprocess.CompletedProcess[str], fs: Path) -> dict[str, object]:
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    doc: dict[str, object] = json.loads(run.stdout)
    text = json.dumps(doc)
    assert f"out of space: the filesystem at {fs} is full" in text, text
    return doc


def test_archive_full_mid_files_stops_at_once_and_the_next_pass_completes(site: Path) -> None:
    archive = on_small_fs(site, "archive")
    originals = Originals.of(site)
    ck(site, "recover")  # a working archive: the manifest and its reserve exist
    filler = fill(archive, leave=400_000)  # the gzips need ~1.6 MiB

    run = ck(site, "pass", "--json", check=None)
    result = assert_out_of_space(run, archive)["result"]
    assert isinstance(result, dict)
    assert result["status"] == "failed" and result["out_of_space"]["filesystem"] == str(archive)
    assert str(result["problems"][0]).startswith("out of space:")
    assert result["files"]["archived"] < result["files"]["eligible"], "stopped midway"
    assert result["files"]["errors"] == 0, "no file after the first was tried and failed"
    # The run went into the pass log and the audit, and the alerts pick it up.
    assert ck_json(site, "status")["result"]["last_passes"][0]["status"] == "failed"
    history = ck_json(site, "history")["result"]
    assert history[0]["action"] == "pass" and history[0]["outcome"] == "failed"
    assert "out_of_space" in alert_kinds(site)
    check_site(site, originals)

    filler.unlink()
    again = ck_json(site, "pass")["result"]
    assert again["status"] == "ok" and again["files"]["archived"] > 0
    assert ck_json(site, "plan")["result"]["files"]["eligible"] == 0
    ck(site, "verify")
    check_site(site, originals)


def test_archive_full_mid_events_stops_the_event_phase(site: Path) -> None:
    archive = on_small_fs(site, "archive")
    originals = Originals.of(site)
    config = site / "coldkeep.toml"
    text = config.read_text()
    config.write_text(text.replace('state_db = "state.db"\n', ""))
    ck(site, "pass")  # the files first, while there is room
    config.write_text(text)
    filler = fill(archive, leave=300_000)  # the month DBs need ~1.3 MiB

    run = ck(site, "pass", "--json", check=None)
    result = assert_out_of_space(run, archive)["result"]
    assert isinstance(result, dict)
    assert ".db" in result["out_of_space"]["path"], result["out_of_space"]
    check_site(site, originals, settled=False)

    filler.unlink()
    again = ck_json(site, "pass")["result"]
    assert again["status"] == "ok"
    assert ck_json(site, "plan")["result"]["events"]["rows"] == 0
    check_site(site, originals)


def test_live_full_mid_restore_stops_and_the_next_restore_completes(site: Path) -> None:
    live = on_small_fs(site, "live")
    originals = Originals.of(site)
    ck(site, "pass")
    archived = {rel for rel in originals.files if rel not in live_files(site)}
    filler = fill(live, leave=300_000)

    run = ck(site, "restore", "--path", "**", "--json", check=None)
    assert_out_of_space(run, live)
    assert "no space" not in run.stderr.lower() or "out of space" in run.stderr
    check_site(site, originals)
    ck(site, "verify")  # the archive is untouched

    filler.unlink()
    ck(site, "restore", "--path", "**")
    now = live_files(site)
    assert all(now[rel] == originals.files[rel] for rel in archived)
    check_site(site, originals)


def test_manifest_full_stops_the_pass_and_leaves_no_unrecorded_gzip(
    site: Path, tmp_path: Path
) -> None:
    """SQLITE_FULL on the manifest's WAL at an entry's commit (the third file's,
    its gzip just placed): the pass stops, that gzip is gone again (its source is
    live), and the manifest still works to record the failure."""
    config = site / "coldkeep.toml"
    config.write_text(config.read_text() + "\n[io]\nworkers = 1\n")
    fs = on_faultfs(site, "archive", tmp_path)
    try:
        originals = Originals.of(site)
        ck(site, "recover")
        placed: list[Path] = []

        async def full_at_the_third_commit(name: StepName, info: StepInfo) -> None:
            if name == "renamed":
                placed.append(Path(str(info["dest"])))
                if len(placed) == 3:  # the next manifest write is this entry's
                    fs.fail("write", "coldkeep.db-wal", errno.ENOSPC, times=1)

        archiver = Archiver(load_settings(config), step=full_at_the_third_commit)
        summary = asyncio.run(archiver.run_pass())
        assert summary.status == "failed" and summary.files.archived == 2
        assert summary.problems[0].startswith("out of space:"), summary.problems
        assert "coldkeep.db" in summary.problems[0]
        assert not placed[2].exists(), "the unrecorded gzip is gone; its source is live"
        assert ck_json(site, "status")["result"]["last_passes"][0]["status"] == "failed"
        check_site(site, originals, settled=False)

        fs.clear()
        assert ck_json(site, "pass")["result"]["status"] == "ok"
        check_site(site, originals)
    finally:
        fs.stop()


def test_the_index_of_paths_is_not_built_where_the_archive_needs_the_room(site: Path) -> None:
    """The restore browser's index of paths is a cache: on an archive's
    filesystem without room to spare it is not built (the filter reads the
    manifest), and the console is told why in one line."""
    ck(site, "pass")
    archive = on_small_fs(site, "archive", size="64m")
    catalog = load_catalog(archive / "coldkeep.db")
    why = catalog.prepare()
    assert why is not None and why.endswith(f"{archive} keeps too little room for it"), why
    assert sorted(p.name for p in archive.iterdir() if p.name.startswith("coldkeep.paths")) == []
    total, rows, _ = catalog.filter(parse_query(".jsonl"))
    assert total == len(rows) > 0
