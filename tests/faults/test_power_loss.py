"""The power-loss matrix: a whole demo site (live tree, state.db, archive) on one
volatile faultfs mount, and the power cut (the coldkeep process SIGKILLed, then
``fs.cut()``: the backing rolled back to what a strict POSIX filesystem keeps)
at every announced step and at 50 random moments of a pass with files, a pass
with events and a restore, at every step of a ship to a folder remote on the
same disk (every local copy dropped at once) and of an expiry of what is past
its retention on both tiers, and once each has finished.
After each cut: the site remounted under another device number (as a reboot
may renumber a disk), ``coldkeep recover``, ``coldkeep pass`` (or the restore,
the ship, the expiry again), then nothing lost: every original byte and row
live or archived exactly once (after a ship: every entry's bytes whole in its
local copy or its recorded remote copy; after an expiry: nothing expired left
on either tier), every database passes ``integrity_check``,
every gzip ``gzip -t``, and the live tree as a run without a cut leaves it.
Each fsync coldkeep makes is needed by some case here, or docs/architecture.md
says why not ("Every fsync is tested"; ``make fsync-mutants``).

A SIGKILL alone (tests/crash) loses nothing the kernel has accepted; a power cut
loses every write and every new or removed name not yet fsynced. What this
matrix proves on top of the crash matrix is that each step fsyncs what the next
one relies on: the file, its directory, every directory created on the way, the
databases; and that recovery does too: after a cut at a step, the power goes
again the moment ``coldkeep recover`` has finished.

Speed (~0.9 s a cut, ~1.5 min for the file on 2 cores): a tiny site (scale
0.01, event rows trimmed to four months), a pristine backing directory copied
per cut, one mount per cut (``attr_timeout=1``: the kernel caches attributes,
fewer calls; nothing changes the backing beside the mount), and every coldkeep
command forked from one process that has imported coldkeep already
(``clirun.Forker``: the real CLI, without ~0.3 s of interpreter start-up and
imports per command, so random moments fall in coldkeep's own work).
``COLDKEEP_POWER_CUTS=N`` sets the number of random moments (default 40).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from faultfs import FaultFS
from faultfs.fixture import start_or_skip
from faults.clirun import Forker

from coldkeep.core.base.durable import MUTANT_ACK, MUTANT_ENV, SKIP_ENV
from coldkeep.core.base.steps import BUNDLE_STEPS, EXPIRE_STEPS, SHIP_STEPS

from helpers import ck, cli_ok, entries, live_files, per_file, report_line
from remotecheck import check_remote_site, folder_fetch, remote_rows, set_remote
from sitecheck import Originals, Tally, check_site

pytestmark = pytest.mark.crash

KILL = "COLDKEEP_TEST_KILL_AT"
# The crash matrix's steps (tests/crash/test_crash_cli.py), each cut where its
# kind of pass announces it; the second batch's delete too.
FILE_STEPS = [
    "partial_written",
    "verified",
    "renamed",
    "entry_committed",
    "source_set_aside",
    "source_unlinked",
    "partial_written:3",
    "renamed:3",
]
# The first file on an archive that does not exist yet: archive_root, files/,
# files/<unit>/ and coldkeep.db all made by this pass, and durable by the time
# the source goes.
FRESH_STEPS = ["entry_committed", "source_unlinked"]
# The same pass with small files packed into bundles (the default): each bundle
# step, and the second bundle's placing.
BUNDLE_CUTS = [*BUNDLE_STEPS, "bundle_placed:2"]
EVENT_STEPS = ["batch_archived", "batch_deleted", "batch_archived:2", "batch_deleted:2"]
RESTORE_STEPS = ["intent_recorded", "restore_partial_written", "restored", "intent_cleared"]
# A ship (every local copy dropped at once): each ship step, and a later object's.
SHIP_CUTS = [*SHIP_STEPS, "object_recorded:4", "local_dropped:4"]
SHIP_SITE = "demo"
# An expiry of files and months past retention, local and remote: each step,
# and a later file's.
EXPIRE_CUTS = [*EXPIRE_STEPS, "expire_remote_deleted:3", "expire_local_deleted:4"]
# Random moments, spread over the four commands in these shares.
RANDOM_CUTS = int(os.environ.get("COLDKEEP_POWER_CUTS", "40"))
SHARES = {"files": 0.2, "bundles": 0.2, "events": 0.3, "restore": 0.3}
SEEDS = {"files": 20261201, "events": 20261202, "restore": 20261203, "bundles": 20261204}
# Event rows younger than this are dropped from the demo's state.db: four months
# of rows, three of them old enough to move, in a few batches of BATCH_ROWS.
KEEP_DAYS = 120
BATCH_ROWS = 300
DAY_MS = 86_400_000


@dataclass
class Case:
    """One command the power is cut in, on a copy of ``template``."""

    name: str
    template: Path
    command: str
    after: list[str]  # the commands run after the cut, one after the other
    expect_live: dict[str, str]  # the live tree once ``after`` has run
    # Steps once announced, the command has durably changed the live tree (a
    # source unlinked, a file restored): a cut there must not undo it.
    changed_at: tuple[str, ...] = ()
    # Local copies may be dropped: the checks read the remote copies too.
    remote: bool = False
    # Files and months expire: the checks want them gone from both tiers.
    expires: bool = False
    seconds: float = 0.0  # the command's run time on the mount (random delays)


@dataclass
class Matrix:
    originals: Originals
    cases: dict[str, Case]
    tally: Tally
    forker: Forker
    cut_seconds: list[float] = field(default_factory=list)


@pytest.fixture(scope="module")
def matrix(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Matrix]:
    base = tmp_path_factory.mktemp("power")
    pristine = base / "pristine"
    cli_ok("demo", str(pristine), "--scale", "0.01", "--seed", "3", "--no-console")
    trim_events(pristine / "state.db")
    config = pristine / "coldkeep.toml"
    per_file(config)
    text = config.read_text().replace("batch_rows = 2600", f"batch_rows = {BATCH_ROWS}")
    assert f"batch_rows = {BATCH_ROWS}" in text
    config.write_text(text)
    originals = Originals.of(pristine)

    # A pass with files only: the same site, its config naming no state_db.
    files = base / "files"
    shutil.copytree(pristine, files, symlinks=True)
    no_events = text.replace('state_db = "state.db"\n', "")
    (files / "coldkeep.toml").write_text(no_events)
    # The same with bundles on (the default).
    bundles = base / "bundles"
    shutil.copytree(files, bundles, symlinks=True)
    (bundles / "coldkeep.toml").write_text(no_events.replace("bundle_below = 0\n", ""))
    # The same on a site whose archive_root is still to be made.
    fresh = base / "fresh"
    shutil.copytree(files, fresh, symlinks=True)
    shutil.rmtree(fresh / "archive")
    # A pass with events only: the files archived first (on a plain disk).
    events = base / "events"
    shutil.copytree(files, events, symlinks=True)
    ck(events, "pass")
    (events / "coldkeep.toml").write_text(text)
    # A restore of everything: an archived site whose emptied live directories
    # were removed, so that the restore makes them again.
    archived = base / "archived"
    shutil.copytree(events, archived, symlinks=True)
    ck(archived, "pass")
    remove_empty_dirs(archived / "live")
    files_after = live_files(events)
    restored = dict(live_files(archived))
    restored.update((rel, originals.files[rel]) for rel in originals.files if rel not in restored)
    # A ship of that archive to a folder remote on the same disk, every local
    # copy dropped as soon as its remote copy is recorded.
    shipping = base / "shipping"
    shutil.copytree(archived, shipping, symlinks=True)
    set_remote(shipping, f'url = "file:remote"\nsite = "{SHIP_SITE}"\nkeep_local_days = 0\n')
    # An expiry of what is past its retention, local and remote copies alike.
    expiring = base / "expiring"
    shutil.copytree(archived, expiring, symlinks=True)
    set_remote(expiring, f'url = "file:remote"\nsite = "{SHIP_SITE}"\nkeep_local_days = -1\n')
    ck(expiring, "ship")
    with (expiring / "coldkeep.toml").open("a") as f:
        f.write("\n[retention]\nfiles_days = 30\nevents_days = 60\n")

    tally = Tally()
    m = Matrix(
        originals,
        {
            "files": Case(
                "files", files, "pass", ["recover", "pass"], files_after, ("source_unlinked",)
            ),
            "fresh": Case(
                "fresh", fresh, "pass", ["recover", "pass"], files_after, ("source_unlinked",)
            ),
            "bundles": Case(
                "bundles",
                bundles,
                "pass",
                ["recover", "pass"],
                files_after,
                ("source_unlinked", "bundle_sources_unlinked"),
            ),
            "events": Case("events", events, "pass", ["recover", "pass"], files_after),
            "restore": Case(
                "restore",
                archived,
                "restore --path '**'",
                ["recover", "pass", "restore --path '**'"],
                restored,
                ("restored", "intent_cleared"),
            ),
            "ship": Case(
                "ship", shipping, "ship", ["recover", "ship"], live_files(shipping), remote=True
            ),
            "expire": Case(
                "expire",
                expiring,
                "expire --yes",
                ["recover", "expire --yes"],
                live_files(expiring),
                remote=True,
                expires=True,
            ),
        },
        tally,
        Forker(),
    )
    yield m
    m.forker.close()
    per_cut = sum(m.cut_seconds) / max(len(m.cut_seconds), 1)
    line = tally.line("power-loss matrix", "cuts")
    report_line(request.config, f"{line}; {per_cut:.2f} s per cut")


def trim_events(db_path: Path) -> None:
    """Only the last KEEP_DAYS days of event rows: fewer month DBs to make per pass."""
    with sqlite3.connect(db_path) as db:
        newest = db.execute("SELECT max(ts) FROM events").fetchone()[0]
        db.execute("DELETE FROM events WHERE ts < ?", (newest - KEEP_DAYS * DAY_MS,))
    with sqlite3.connect(db_path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("VACUUM")


def remove_empty_dirs(root: Path) -> None:
    """Every directory under ``root`` left empty (children first)."""
    for dirpath, _dirs, _names in os.walk(root, topdown=False):
        if Path(dirpath) != root and not any(os.scandir(dirpath)):
            os.rmdir(dirpath)


def command_seconds(m: Matrix, case: Case, tmp: Path) -> float:
    """How long ``case.command`` takes on a fresh mount of its site."""
    fs = mount_copy(case.template, tmp)
    try:
        t0 = time.monotonic()
        run(m, fs, [case.command], tmp)
        return time.monotonic() - t0
    finally:
        fs.stop()


def run(m: Matrix, fs: FaultFS, commands: list[str], tmp: Path) -> None:
    """``commands`` on the site at ``fs``, each exiting 0."""
    out = tmp / "commands.out"
    code = m.forker.run(fs.mount / "coldkeep.toml", commands, out, {})
    assert code == 0, f"{commands}: exit {code}\n{out.read_text()}"


def mount_copy(template: Path, tmp: Path) -> FaultFS:
    """A copy of ``template`` on a volatile faultfs mount, all of it durable."""
    backing, mnt = tmp / "backing", tmp / "mnt"
    shutil.rmtree(backing, ignore_errors=True)
    shutil.copytree(template, backing, symlinks=True)
    fs = start_or_skip(FaultFS(backing, mnt, volatile=True, attr_timeout=1))
    # What the server finds at start is durable already; say so explicitly.
    fs.sync()
    return fs


def hold_a_device_number(held: ExitStack, where: Path) -> int:
    """Mount something small at ``where`` until ``held`` closes; its device
    number. A tmpfs takes one in milliseconds (root); elsewhere a faultfs does."""
    where.mkdir(exist_ok=True)
    tmpfs = ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)]
    if subprocess.run(tmpfs, capture_output=True, check=False).returncode == 0:
        held.callback(subprocess.run, ["umount", str(where)], check=True)
    else:
        held.enter_context(FaultFS(where.with_name(where.name + "-backing"), where))
    return where.stat().st_dev


def cut_and_remount(fs: FaultFS, tmp: Path) -> None:
    """The power cut, then the site mounted again under another device number.

    The kernel hands a new mount the lowest free number, so a plain remount gets
    its old one back; a real host may renumber a filesystem at boot
    (device-mapper, NVMe), and every identity recorded before then names another
    device. So the free numbers up to the old one are held while the site is
    mounted again (and if another process freed the old one meanwhile, once
    more)."""
    dev = fs.mount.stat().st_dev
    fs.cut()
    with ExitStack() as held:
        taken = 0
        for _attempt in range(3):
            while taken < 16 and hold_a_device_number(held, tmp / f"taken-{taken}") < dev:
                taken += 1
            taken += 1
            fs.start()
            if fs.mount.stat().st_dev != dev:
                return
            fs.stop()
    pytest.fail(f"the site came back under its old device number {dev} each time")


def power_cut(
    m: Matrix,
    case: Case,
    tmp: Path,
    *,
    kill_at: str = "",
    delay: float = 0.0,
    recut: bool = False,
    env: dict[str, str] | None = None,
) -> bool:
    """Run ``case.command`` on a fresh mount, cut the power at step ``kill_at``
    (the process kills itself once it is announced) or ``delay`` seconds in, then
    remount, run ``case.after`` and check the site. True if the cut fell inside
    the command (a delay may outlast it: the cut then follows a finished one)."""
    t0 = time.monotonic()
    fs = mount_copy(case.template, tmp)
    try:
        mid = cut_in(m, fs, case, tmp, kill_at=kill_at, delay=delay, env=env or {})
        if not mid:
            live = live_files(fs.mount)
            assert live == case.expect_live, "a command that finished keeps all it did"
        elif kill_at.partition(":")[0] in case.changed_at:
            live = live_files(fs.mount)
            assert live != live_files(case.template), f"what {kill_at} announced survives"
        if recut:
            # Recovery's own work must be durable before it records it settled:
            # the power goes again the moment it has finished.
            run(m, fs, ["recover"], tmp)
            cut_and_remount(fs, tmp)
        settle_and_check(m, case, fs, tmp)
    finally:
        if m.forker.pid is not None:  # a failure mid-command: the next test's turn
            m.forker.kill()
        fs.stop()
    m.cut_seconds.append(time.monotonic() - t0)
    return mid


def cut_in(
    m: Matrix,
    fs: FaultFS,
    case: Case,
    tmp: Path,
    *,
    kill_at: str,
    delay: float,
    env: dict[str, str],
) -> bool:
    """``case.command`` on ``fs`` (with ``env`` set), killed at step ``kill_at`` or
    after ``delay`` seconds, then the power cut and the site remounted. True if
    the kill fell inside the command."""
    out = tmp / "command.out"
    config = fs.mount / "coldkeep.toml"
    m.forker.start(config, [case.command], out, {**env, KILL: kill_at} if kill_at else env)
    code = m.forker.wait(delay if not kill_at else 120)
    if code is None:
        code = m.forker.kill()  # SIGKILL first: the process sees nothing of the cut
        assert not kill_at, f"never reached {kill_at}: {out.read_text()}"
    if code == -signal.SIGKILL and not kill_at:
        mid = True  # (a command that ended just as the delay ran out is not)
    else:
        expected = -signal.SIGKILL if kill_at else 0
        assert code == expected, f"exit {code}, not {expected}: {out.read_text()}"
        mid = bool(kill_at)
    cut_and_remount(fs, tmp)
    return mid


def settle_and_check(m: Matrix, case: Case, fs: FaultFS, tmp: Path) -> None:
    """``case.after`` on the remounted site, then (unmounted cleanly: what is
    there is what the checks read) nothing lost, and the end state a run without
    a cut leaves."""
    try:
        run(m, fs, case.after, tmp)
    finally:
        fs.stop()
    site = tmp / "backing"
    if case.expires:
        check_expired(site)
    if case.remote:
        m.tally.checks += check_remote_site(site, folder_fetch(site / "remote"), SHIP_SITE)
    else:
        check_site(site, m.originals, m.tally)
    assert live_files(site) == case.expect_live, "the same end state as without a cut"
    shutil.rmtree(site)


def check_expired(site: Path) -> None:
    """Every expired entry's file gone from both tiers and from the remote rows,
    every expired month's database too (retention kept, whatever the cut undid)."""
    archive, bucket = site / "archive", site / "remote" / SHIP_SITE
    remote = remote_rows(site)
    gone = [e["gz_path"] for e in entries(site) if e["status"] == "expired"]
    assert gone, "the expiry expired nothing"
    for gz in gone:
        assert not (archive / gz).exists() and not (bucket / gz).exists(), f"{gz} outlived expiry"
        assert gz not in remote, f"{gz}: expired, still recorded remote"
    with sqlite3.connect(archive / "coldkeep.db") as db:
        months = [m for (m,) in db.execute("SELECT month FROM expired_months")]
    for month in months:
        assert not (archive / "events" / f"{month}.db").exists(), f"month {month} outlived expiry"
        assert not list(bucket.glob(f"events/{month}.*")), f"month {month} outlived expiry"


def cut_at_step(m: Matrix, case: str, step: str, tmp: Path) -> None:
    power_cut(m, m.cases[case], tmp, kill_at=step, recut=True)
    m.tally.faults += 1
    m.tally.by_kind[f"{case}@{step.split(':', maxsplit=1)[0]}"] += 1


@pytest.mark.parametrize("step", FILE_STEPS)
def test_files_pass_cut_at_each_step(matrix: Matrix, tmp_path: Path, step: str) -> None:
    cut_at_step(matrix, "files", step, tmp_path)


@pytest.mark.parametrize("step", FRESH_STEPS)
def test_first_pass_on_a_new_archive_cut_at_each_step(
    matrix: Matrix, tmp_path: Path, step: str
) -> None:
    cut_at_step(matrix, "fresh", step, tmp_path)


@pytest.mark.parametrize("step", BUNDLE_CUTS)
def test_bundles_pass_cut_at_each_step(matrix: Matrix, tmp_path: Path, step: str) -> None:
    cut_at_step(matrix, "bundles", step, tmp_path)


@pytest.mark.parametrize("step", EVENT_STEPS)
def test_events_pass_cut_at_each_step(matrix: Matrix, tmp_path: Path, step: str) -> None:
    cut_at_step(matrix, "events", step, tmp_path)


@pytest.mark.parametrize("step", RESTORE_STEPS)
def test_restore_cut_at_each_step(matrix: Matrix, tmp_path: Path, step: str) -> None:
    cut_at_step(matrix, "restore", step, tmp_path)


@pytest.mark.parametrize("step", SHIP_CUTS)
def test_ship_cut_at_each_step(matrix: Matrix, tmp_path: Path, step: str) -> None:
    cut_at_step(matrix, "ship", step, tmp_path)


@pytest.mark.parametrize("step", EXPIRE_CUTS)
def test_expire_cut_at_each_step(matrix: Matrix, tmp_path: Path, step: str) -> None:
    cut_at_step(matrix, "expire", step, tmp_path)


@pytest.mark.parametrize(
    "name", ["files", "fresh", "bundles", "events", "restore", "ship", "expire"]
)
def test_cut_once_the_command_has_finished(matrix: Matrix, tmp_path: Path, name: str) -> None:
    """Everything a command did is durable when it exits 0: month DBs committed,
    sources gone, files restored, all of it still there after the cut."""
    assert not power_cut(matrix, matrix.cases[name], tmp_path, delay=300.0)
    matrix.tally.faults += 1
    matrix.tally.by_kind[f"{name}@finished"] += 1


@pytest.mark.parametrize("name", list(SHARES))
def test_cut_at_random_moments(matrix: Matrix, tmp_path: Path, name: str) -> None:
    case = matrix.cases[name]
    runs = round(RANDOM_CUTS * SHARES[name])
    case.seconds = command_seconds(matrix, case, tmp_path)
    rnd = random.Random(SEEDS[name])
    mid = 0
    for _ in range(runs):
        delay = rnd.uniform(0.0, 1.0) * case.seconds
        if power_cut(matrix, case, tmp_path, delay=delay):
            mid += 1
        else:  # it ended before the cut: it takes less than the measure says
            case.seconds = min(case.seconds, delay)
        matrix.tally.faults += 1
        matrix.tally.by_kind[f"{name}@random"] += 1
    # A moment after the command ended cuts a finished one (still worth
    # checking, and the next moments are drawn inside the shorter time); if
    # most do, the delays no longer fall inside the command.
    assert mid >= runs // 2, f"only {mid} of {runs} cuts fell inside {name}"


def test_a_restore_partial_recovery_removed_stays_removed(matrix: Matrix, tmp_path: Path) -> None:
    """A restore killed with a partial written (a SIGKILL: the partial's name is
    still there; other files in flight may have theirs too), the application
    fsyncs those live directories of its own accord, recovery removes the
    partials and clears the intents naming them, and the power goes. Unless a
    removal was durable before its intent went, the partial comes back with
    nothing to name it, and recovery never walks live directories: it would
    stay in the live tree for good."""
    case = matrix.cases["restore"]
    fs = mount_copy(case.template, tmp_path)
    try:
        out = tmp_path / "command.out"
        env = {KILL: "restore_partial_written"}
        code = matrix.forker.run(fs.mount / "coldkeep.toml", [case.command], out, env)
        assert code == -signal.SIGKILL, out.read_text()
        # The file killed at, and any other the restore's workers had written.
        partials = list((fs.mount / "live").rglob("*.restore-partial"))
        assert partials
        for folder in {p.parent for p in partials}:
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        run(matrix, fs, ["recover"], tmp_path)
        cut_and_remount(fs, tmp_path)
        back = [p for p in partials if p.exists()]
        assert not back, f"partials recovery removed came back: {back}"
        settle_and_check(matrix, case, fs, tmp_path)
    finally:
        fs.stop()
    matrix.tally.faults += 1
    matrix.tally.by_kind["restore@restore_partial_written+recover"] += 1


def test_an_orphan_recovery_adopted_survives_the_next_cut(matrix: Matrix, tmp_path: Path) -> None:
    """Every fsync of a gzip's directory fails during a pass (EIO): each gzip
    placed there stays an orphan, its source kept, the file a problem. Recovery adopts them: entry
    committed, source unlinked. Unless recovery made each orphan's name durable
    first, the power going right after takes the gzips and leaves the entries
    and the emptied live directory: the files are gone."""
    case = matrix.cases["files"]
    folder = "archive/files/unit-0001/logs"
    fs = mount_copy(case.template, tmp_path)
    try:
        out = tmp_path / "command.out"
        rule = fs.fail("fsyncdir", folder, errno.EIO)
        code = matrix.forker.run(fs.mount / "coldkeep.toml", ["pass"], out, {})
        # One file's trouble: quarantined, the pass itself ends ok.
        assert code == 0, f"exit {code}: {out.read_text()}"
        assert "problem: unit-0001/logs/" in out.read_text(), out.read_text()
        assert fs.hits(rule) >= 1, "no gzip was placed there"
        orphans = sorted((fs.mount / folder).glob("*.gz"))
        files = fs.mount / "archive" / "files"
        sources = [fs.mount / "live" / o.relative_to(files).with_suffix("") for o in orphans]
        assert orphans, "the gzips whose directory fsync failed stay, for recovery"
        assert all(s.exists() for s in sources), "their sources are kept"
        fs.clear()
        run(matrix, fs, ["recover"], tmp_path)
        assert not any(s.exists() for s in sources), "recovery adopted them"
        cut_and_remount(fs, tmp_path)
        assert all(o.exists() for o in orphans), "an adopted gzip is gone after the cut"
        settle_and_check(matrix, case, fs, tmp_path)
    finally:
        fs.stop()
    matrix.tally.faults += 1
    matrix.tally.by_kind["files@gzip-dir-fsync-failed+recover"] += 1


def test_a_gzip_copied_in_by_hand_is_adopted_only_once_its_bytes_are_durable(
    matrix: Matrix, tmp_path: Path
) -> None:
    """An orphan recovery adopts need not be one coldkeep wrote: a gzip put back
    by hand (from a backup, another disk) has bytes nobody fsynced, though its
    name may be durable (the directory fsynced by whoever came next). Recovery
    unlinks the source on the strength of it, so it fsyncs the gzip's bytes
    first; without that, the power going after recovery leaves an empty gzip,
    an entry naming it and no source."""
    case = matrix.cases["files"]
    # A gzip a pass wrote from the same source, on a plain disk.
    files = matrix.cases["events"].template / "archive" / "files"
    archived = min(files.rglob("*.gz"))
    rel = archived.relative_to(files).with_suffix("").as_posix()
    fs = mount_copy(case.template, tmp_path)
    try:
        gz = fs.mount / "archive" / "files" / f"{rel}.gz"
        gz.parent.mkdir(parents=True)
        fs.sync()
        gz.write_bytes(archived.read_bytes())  # no fsync: a plain copy
        fd = os.open(gz.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)  # the name is durable, the bytes are not
        finally:
            os.close(fd)
        run(matrix, fs, ["recover"], tmp_path)
        assert not (fs.mount / "live" / rel).exists(), "recovery adopted the copy"
        cut_and_remount(fs, tmp_path)
        assert gz.read_bytes() == archived.read_bytes(), "the adopted gzip lost its bytes"
        settle_and_check(matrix, case, fs, tmp_path)
    finally:
        fs.stop()
    matrix.tally.faults += 1
    matrix.tally.by_kind["files@copied-orphan+recover"] += 1


def test_the_matrix_fails_when_one_fsync_is_skipped(matrix: Matrix, tmp_path: Path) -> None:
    """The fsync mutants in small (``make fsync-mutants`` runs them all): a files
    pass with the fsync of each source's directory after its unlink skipped
    (the test-only switch of core/base/durable.py), the power cut once it has
    finished. The unlinks were never durable: the sources come back beside
    entries that say they are gone, the next pass archives them again, and
    the checks must say so."""
    skip = {SKIP_ENV: "source.unlinked", MUTANT_ENV: MUTANT_ACK}
    with pytest.raises(AssertionError, match="keeps all it did"):
        power_cut(matrix, matrix.cases["files"], tmp_path, delay=300.0, env=skip)
