"""Odd names in a real live tree, through the core API in-process: newlines,
control characters, bytes that are not UTF-8, 255-byte names, paths deeper than
an archive can hold, mtimes before 1970, the unit's own closed marker. Each file
is archived, held, excluded and restored exactly as its name says, or refused
alone with a reason; no pass fails for one."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import Settings, load_settings
from coldkeep.core.base.ratelimit import UNLIMITED
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.base.stream import EventStream
from coldkeep.core.files.rebuild import rebuild_manifest
from coldkeep.core.files.restore import Selection
from coldkeep.core.files.scan import scan_files
from coldkeep.core.ops.passes import PassSummary

from helpers import write_raw

DAY_NS = 86_400 * 1_000_000_000
PATH_MAX = os.pathconf("/", "PC_PATH_MAX")  # 4096 on Linux
OLD_NS = 1_600_000_000_123_456_789  # 2020-09-13, to the ns
BEFORE_1970_NS = -86_400 * 400 * 1_000_000_000 + 987_654_321  # 1968-11, to the ns


def make_site(base: Path, files: dict[bytes, tuple[bytes, int]], config: str = "") -> Path:
    """A site whose live tree holds ``files`` (raw relpath -> data, mtime ns)."""
    site = base / "site"
    live = site / "live"
    live.mkdir(parents=True)
    for raw, (data, mtime_ns) in files.items():
        write_raw(live, raw, data, mtime_ns)
    (site / "coldkeep.toml").write_text(
        'live_root = "live"\narchive_root = "archive"\nmode = "on"\n'
        + (config or '[files]\ninclude = ["**"]\nmin_age_days = 1\nbundle_below = 1024\n')
    )
    return site


def archiver(site: Path) -> Archiver:
    return Archiver(load_settings(site / "coldkeep.toml"), stream=EventStream())


def live_bytes(root: Path) -> dict[bytes, tuple[bytes, int]]:
    """Every regular file under ``root``: raw relpath -> (data, mtime ns)."""
    found: dict[bytes, tuple[bytes, int]] = {}
    top = os.fsencode(root)
    for dirpath, _, names in os.walk(top):
        for name in names:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            with open(path, "rb") as f:
                found[os.path.relpath(path, top)] = (f.read(), st.st_mtime_ns)
    return found


def entry_rows(db: Path) -> set[tuple[str, str, int]]:
    """(relpath, sha256, mtime_ns) of every entry, names back as the manifest keeps them."""
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT relpath, sha256, mtime_ns FROM entries").fetchall()
    return {(os.fsdecode(r) if isinstance(r, bytes) else r, s, m) for r, s, m in rows}


async def archive_all(site: Path) -> PassSummary:
    summary = await archiver(site).run_pass()
    assert summary.status == "ok", summary.to_dict()
    return summary


async def round_trip(site: Path, tmp_path: Path, files: dict[bytes, tuple[bytes, int]]) -> None:
    """Everything archived, verified, restored byte for byte (name, data, mtime)
    and rebuilt into the same entries."""
    summary = await archive_all(site)
    assert summary.files.archived == len(files), summary.to_dict()
    assert live_bytes(site / "live") == {}
    checked = await archiver(site).verify()
    assert not checked.problems and checked.ok == len(files), checked.problems
    out = tmp_path / "out"
    report = await archiver(site).restore(Selection(glob="**"), to=out)
    assert not report.failed, report.counts
    assert live_bytes(out) == files
    rebuilt = tmp_path / "rebuilt.db"
    done = await rebuild_manifest(archiver(site).layout, rebuilt, EventStream(), limiter=UNLIMITED)
    assert not done.refused and not done.unreadable, (done.refused, done.unreadable)
    assert entry_rows(rebuilt) == entry_rows(site / "archive" / "coldkeep.db")
    again = await archive_all(site)
    assert again.status == "ok" and again.files.archived == 0


@pytest.mark.parametrize("big", [False, True], ids=["bundled", "gzip"])
async def test_names_with_newlines_and_control_characters_come_back_whole(
    tmp_path: Path, big: bool
) -> None:
    data = b"x" * (4000 if big else 100)
    files = {
        name: (data + name, OLD_NS)
        for name in [
            b"u/mail\n2026.log",
            b"u/tab\there",
            b"u/cr\rx",
            b"u/esc\x1b[31mred\x1b[0m",
            b"u/del\x7f",
            b"u/c1\xc2\x85\xc2\x9b",
            b"u/[bold]rich[/bold]",
            b"u/plain.log",
        ]
    }
    await round_trip(make_site(tmp_path, files), tmp_path, files)


@pytest.mark.parametrize("big", [False, True], ids=["bundled", "gzip"])
async def test_names_that_are_not_utf8_come_back_as_the_same_bytes(
    tmp_path: Path, big: bool
) -> None:
    data = b"y" * (4000 if big else 100)
    files = {
        name: (data + name, OLD_NS)
        for name in [b"u/r\xe9sum\xe9.log", b"u/\xff\xfe", b"u/\xe9/deeper\x80.log", b"u/ok"]
    }
    await round_trip(make_site(tmp_path, files), tmp_path, files)


@pytest.mark.parametrize("big", [False, True], ids=["bundled", "gzip"])
async def test_mtimes_before_1970_are_kept_to_the_nanosecond(tmp_path: Path, big: bool) -> None:
    data = b"z" * (4000 if big else 100)
    files = {
        b"u/a.log": (data + b"a", BEFORE_1970_NS),
        b"u/b.log": (data + b"b", BEFORE_1970_NS + 5 * DAY_NS + 1),
        b"u/c.log": (data + b"c", -1),
    }
    await round_trip(make_site(tmp_path, files), tmp_path, files)


@pytest.mark.parametrize("big", [False, True], ids=["bundled", "gzip"])
async def test_names_of_251_to_255_bytes_are_archived_and_restored(
    tmp_path: Path, big: bool
) -> None:
    data = b"w" * (4000 if big else 100)
    files = {
        b"u/" + b"L" * 251: (data + b"1", OLD_NS),
        b"u/" + b"M" * 255: (data + b"2", OLD_NS),
        b"u/" + "é".encode() * 127 + b"x": (data + b"3", OLD_NS),
        b"u/" + b"\xe9" * 255: (data + b"4", OLD_NS),
        b"u/" + b"M" * 250 + b".log": (data + b"5", OLD_NS),  # shares its first bytes
    }
    site = make_site(tmp_path, files)
    await round_trip(site, tmp_path, files)
    # In place too: the restore's temporary beside a 255-byte name fits.
    report = await archiver(site).restore(Selection(glob="**"))
    assert not report.failed, report.counts
    assert live_bytes(site / "live") == files


async def test_globs_match_every_byte_of_a_name_hold_exclude_include_restore(
    tmp_path: Path,
) -> None:
    """A trailing ``**`` once stopped at a newline: the held file was expired,
    the excluded one archived, the included one skipped."""
    held, excluded, other = b"legal/mail\n2026.log", b"keep/a\nb.log", b"u/x\ny"
    files = {name: (b"data " + name, OLD_NS) for name in (held, excluded, other)}
    config = (
        '[files]\ninclude = ["**"]\nexclude = ["keep/**"]\nmin_age_days = 1\n'
        "[retention]\nfiles_days = 1\n"
    )
    site = make_site(tmp_path, files, config)
    summary = await archive_all(site)
    assert summary.files.archived == 2, summary.to_dict()
    assert set(live_bytes(site / "live")) == {excluded}, "exclude keeps it live"
    await archiver(site).place_hold("path", "legal/**", "litigation")
    expired = await archiver(site).expire()
    assert expired.held == 1 and expired.files == 1, expired
    out = tmp_path / "out"
    report = await archiver(site).restore(Selection(glob="**"), to=out)
    assert live_bytes(out) == {held: files[held]}, report.counts


async def test_the_units_closed_marker_is_never_archived(tmp_path: Path) -> None:
    files = {
        b"u/a.log": (b"a" * 100, OLD_NS),
        b"u/.closed": (b"", OLD_NS),
        b"v/.closed/not-the-marker": (b"b", OLD_NS),  # a folder of that name deeper
    }
    config = '[files]\ninclude = ["**"]\nmin_age_days = 1\nunit_closed = "marker:.closed"\n'
    site = make_site(tmp_path, files, config)
    summary = await archive_all(site)
    assert summary.files.archived == 2, summary.to_dict()
    assert set(live_bytes(site / "live")) == {b"u/.closed"}
    assert (await archive_all(site)).files.archived == 0, "the unit stays closed"


@contextmanager
def deep_folder(top: Path, depth_bytes: int) -> Iterator[bytes]:
    """Folders under ``top`` whose path is ``depth_bytes`` long or more, made a
    step at a time (past PATH_MAX a path cannot be given whole); yields the path
    relative to ``top``."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    rel = b""
    try:
        while (left := depth_bytes - len(os.fsencode(top)) - len(rel) - 1) > 0:
            name = b"d" * max(min(left, 200), 1)
            os.mkdir(name, dir_fd=fd)
            nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
            rel = rel + b"/" + name if rel else name
        yield rel
    finally:
        os.close(fd)


def write_at(top: Path, rel: bytes, name: bytes, data: bytes) -> None:
    """``top/rel/name``, written through descriptors (the path may be too long)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for seg in rel.split(b"/"):
        nxt = os.open(seg, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    out = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(out, data)
    os.utime(out, ns=(OLD_NS, OLD_NS))
    os.close(out)
    os.close(fd)


async def test_paths_too_long_for_the_archive_or_the_kernel_are_counted_and_refused_alone(
    tmp_path: Path,
) -> None:
    site = make_site(tmp_path, {b"u/plain.log": (b"p" * 100, OLD_NS)})
    # The live path fits PATH_MAX, its gzip's (under a longer archive root) does not.
    settings: Settings = load_settings(site / "coldkeep.toml")
    live = settings.live_root
    spare = len(os.fsencode(settings.archive_root)) + len("/files/") - len(os.fsencode(live))
    with deep_folder(live, PATH_MAX - spare - 40) as rel:
        write_at(live, rel, b"fits-live.log", b"f" * 100)
    assert len(os.fsencode(live)) + len(rel) + 20 < PATH_MAX
    # A live path over PATH_MAX: its folder cannot even be listed by path.
    with deep_folder(live / "u", PATH_MAX + 300) as too_deep:
        write_at(live / "u", too_deep, b"deep.log", b"d" * 100)
    first = await archive_all(site)
    assert first.files.archived == 1, first.to_dict()
    assert first.files.skipped == {"path_too_long": 2}, first.files.skipped
    again = await archive_all(site)
    assert again.files.skipped == {"path_too_long": 2} and again.files.archived == 0


async def test_recovery_walks_past_a_folder_under_files_deeper_than_path_max(
    tmp_path: Path,
) -> None:
    """An older coldkeep could make one; recovery then died on it every pass.
    Now it is one folder quarantined for a human, and the pass goes on."""
    site = make_site(tmp_path, {b"u/a.log": (b"a" * 100, OLD_NS)})
    await archive_all(site)
    files_dir = site / "archive" / "files"
    with deep_folder(files_dir, PATH_MAX + 300) as rel:
        write_at(files_dir, rel, b"lost.gz", b"not even a gzip")
    (site / "live" / "u" / "b.log").write_bytes(b"b" * 100)
    os.utime(site / "live" / "u" / "b.log", ns=(OLD_NS, OLD_NS))
    summary = await archiver(site).run_pass()
    assert (summary.status, summary.files.archived) == ("ok", 1), summary.to_dict()
    said = " ".join(p["reason"] for p in summary.new_problems)
    assert "deeper than PATH_MAX" in said and "move it to a shorter path" in said, said


@contextmanager
def as_nobody() -> Iterator[None]:
    """This process without root's right to read any folder, for the block (the
    saved uid stays root's, so it comes back)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


def test_a_folder_that_cannot_be_listed_is_counted_not_passed_over(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="coldkeep-unreadable-"))
    try:
        base.chmod(0o755)
        site = make_site(base, {b"u/a.log": (b"a", OLD_NS), b"u/locked/b.log": (b"b", OLD_NS)})
        for path in [site, *site.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (site / "live" / "u" / "locked").chmod(0)
        settings = load_settings(site / "coldkeep.toml")
        with as_nobody():
            scan = scan_files(settings, now_ns=OLD_NS + 10 * DAY_NS)
        assert [c.relpath for c in scan.eligible] == ["u/a.log"]
        assert scan.skipped == {"unreadable": 1}
    finally:
        (base / "site" / "live" / "u" / "locked").chmod(0o755)
        shutil.rmtree(base)


class Crash(Exception):
    """Stands in for the process dying at a protocol step."""


async def test_an_orphan_bundle_with_a_name_that_is_not_utf8_is_adopted(tmp_path: Path) -> None:
    """A bundle placed, its entries never written (a crash): recovery enters its
    members by their exact names, and every later pass runs."""
    files = {b"u/r\xe9sum\xe9.log": (b"r" * 100, OLD_NS), b"u/plain": (b"t" * 100, OLD_NS)}
    site = make_site(tmp_path, files)

    async def crash_after_placing(name: StepName, info: StepInfo) -> None:
        if name == "bundle_placed":
            raise Crash(name)

    crashing = Archiver(load_settings(site / "coldkeep.toml"), step=crash_after_placing)
    with pytest.raises(Crash):
        await crashing.run_pass()
    assert list((site / "archive" / "files" / "u").glob("*.tar")), "an orphan bundle"
    summary = await archive_all(site)
    assert summary.recovery["orphans_adopted"] == 2, summary.recovery
    assert entry_rows(site / "archive" / "coldkeep.db") == {
        (os.fsdecode(raw), hashlib.sha256(data).hexdigest(), mtime)
        for raw, (data, mtime) in files.items()
    }
    assert live_bytes(site / "live") == {}
    assert (await archive_all(site)).status == "ok"
