"""The EIO matrix: an I/O error proves nothing about the data, so it must never
cost any. Each case serves a demo site (live tree, state DB, archive: all of it)
through faultfs, makes one operation on one file fail with EIO, and checks

- what an operator sees: exit 1 (or a failed pass), a line naming the path, no
  traceback, never "ok";
- that nothing was lost or deleted because of it (``check_site``, and the files
  the fault was aimed at, byte for byte);
- that the next run, the fault cleared, completes.

The CLI runs the cases a path glob can aim (faultfs rules match by path); the
ones that must hit an exact moment run an ``Archiver`` whose step hook sets the
rule at that step (deterministic: no timing, no sleeps), in a forked child, so
that a SIGBUS (a read error on a memory-mapped page) fails the case, not the run.
The cases about files run without the event phase (half the time on faultfs).

    source read        a live file cannot be read: counted, kept, named; others go on
    verify read        a gzip cannot be read: "could not be read", nothing marked
    orphan read        recovery/adopt cannot read an orphan: left as found, never
                       deleted as corrupt
    restore            the gzip cannot be read, or the restore partial cannot be
                       written or fsynced: that file fails, no partial, nothing placed
    manifest read      coldkeep.db cannot be read: one line, exit 1, nothing written
    manifest write     an entry's commit fails: the pass stops, the gzip and the
                       source are both kept (recovery adopts it)
    partial write      a .partial cannot be written: removed, source kept
    partial fsync      its fsync fails: discarded, never retried nor renamed
    gzip dir fsync     step 5's directory fsync fails: no entry, source kept; the
                       gzip is an orphan the next recovery makes durable and adopts
    live dir fsync     step 7's directory fsync fails: archived, the source's removal
                       settled by the next recovery
    month/live DB      reads and writes of the event phase's databases: the phase
                       stops (or that month is refused) naming the DB, rolled back;
                       a read mid-phase is an error, not a SIGBUS
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import json
import multiprocessing
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest
from faultfs import FaultFS
from faultfs.fixture import start_or_skip
from faults.sites import copy_site, write_site

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.base.times import now_ms
from coldkeep.tui.operations.registry import report

from helpers import ck, ck_json, entries, live_files, report_line
from sitecheck import Originals, Tally, check_site

EIO = errno.EIO
DAY_MS = 86_400_000
# Small: 31 eligible files (5.4 MiB), 6,879 eligible event rows.
SCALE = "0.02"


# templates and mounts ---------------------------------------------------------


@dataclass(frozen=True)
class Template:
    site: Path
    originals: Originals


@dataclass(frozen=True)
class Templates:
    """One demo site in the states the cases start from, each written once."""

    pristine: Template  # as the demo wrote it: planted partial and orphans
    recovered: Template  # the demo's leftovers settled: the whole backlog to do
    passed: Template  # after a full pass: everything eligible archived
    half: Template  # after a pass 45 days ago: month DBs exist, rows left to move


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    base = tmp_path_factory.mktemp("eio-templates")
    pristine = write_site(base / "pristine", scale=SCALE)
    originals = Originals.of(pristine)
    recovered = copy_site(pristine, base / "recovered")
    ck(recovered, "recover")
    passed = copy_site(pristine, base / "passed")
    ck(passed, "pass")
    half = copy_site(pristine, base / "half")
    earlier = now_ms() - 45 * DAY_MS
    archiver = Archiver(load_settings(half / "coldkeep.toml"), clock=lambda: earlier)
    summary = asyncio.run(archiver.run_pass())
    assert summary.status == "ok", summary.problems
    return Templates(
        Template(pristine, originals),
        Template(recovered, originals),
        Template(passed, originals),
        Template(half, originals),
    )


class Mount(Protocol):
    def __call__(self, template: Template, *, events: bool = True) -> tuple[Path, FaultFS]: ...


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Mount]:
    """A copy of a template served through faultfs at ``tmp_path/site`` (stopped
    at teardown, whatever the test did). ``events=False``: its passes have no
    event phase (the cases about files; it halves a pass on faultfs)."""
    started: list[FaultFS] = []

    def make(template: Template, *, events: bool = True) -> tuple[Path, FaultFS]:
        site = tmp_path / "site"
        backing = copy_site(template.site, tmp_path / "backing")
        if not events:
            config = backing / "coldkeep.toml"
            config.write_text(config.read_text().replace('state_db = "state.db"\n', ""))
        fs = start_or_skip(FaultFS(backing, site))
        started.append(fs)
        return site, fs

    yield make
    for fs in started:
        fs.stop()


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    t = Tally()
    yield t
    report_line(request.config, t.line("EIO matrix", "faults injected"))


# what the operator sees ----------------------------------------------------------


def injected(tally: Tally, fs: FaultFS, rule: int, kind: str) -> int:
    """The faults ``rule`` injected, counted in the tally (at least one)."""
    hits = fs.hits(rule)
    assert hits >= 1, f"{kind}: the fault was never hit"
    tally.faults += hits
    tally.by_kind[kind] += hits
    return hits


def failed_cli(tally: Tally, site: Path, *args: str, names: str) -> dict[str, Any]:
    """``coldkeep ARGS --json`` failed as it should: exit 1, ok false, no traceback,
    and a line of its result (or stderr) naming ``names``."""
    run = ck(site, *args, "--json", check=None)
    assert run.returncode == 1, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
    assert "Traceback" not in run.stderr, run.stderr
    doc: dict[str, Any] = json.loads(run.stdout)
    assert doc["ok"] is False, doc
    lines = [*_lines(doc["result"]), *run.stderr.splitlines()]
    assert any(names in line for line in lines), f"no line names {names}:\n" + "\n".join(lines)
    tally.checks += 4
    return doc


def quarantined_pass(tally: Tally, site: Path, *, names: str) -> dict[str, Any]:
    """``coldkeep pass --json`` ended ok (exit 0: one file's failure is never the
    pass's), with ``names`` among the files it left as they were; ``status``
    lists it with its reason and remedy."""
    run = ck(site, "pass", "--json", check=None)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
    assert "Traceback" not in run.stderr, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)["result"]
    assert result["status"] == "ok" and result["problems"] == [], result
    assert names in [p["relpath"] for p in result["new_problems"]], result["new_problems"]
    listed = ck_json(site, "status")["result"]["file_problems"]
    assert any(p["relpath"] == names and p["remedy"] for p in listed), listed
    tally.checks += 4
    return result


def reason_for(result: dict[str, Any], rel: str) -> str:
    """The reason the pass gives for leaving ``rel`` as it was."""
    (reason,) = [p["reason"] for p in result["new_problems"] if p["relpath"] == rel]
    return str(reason)


def _lines(result: Any) -> list[str]:
    """Every string in a result document: the lines an operator reads."""
    if isinstance(result, str):
        return [result]
    if isinstance(result, dict):
        return [line for v in result.values() for line in _lines(v)]
    if isinstance(result, list):
        return [line for v in result for line in _lines(v)]
    return []


def failed_pass(tally: Tally, done: ChildPass, *, names: str) -> list[str]:
    """A pass run by ``pass_failing_at`` failed as it should: its text (what
    ``coldkeep pass`` prints) says so and names ``names`` on an ATTENTION line."""
    assert done.status == "failed" and " failed in " in done.text[0], done.text
    attention = [line for line in done.text if line.lstrip().startswith("ATTENTION:")]
    assert any(names in line for line in attention), done.text
    tally.checks += 2
    return attention


def sha_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """relpath -> sha256 of every file under ``root`` (``skip``: names left out)."""
    return {
        p.relative_to(root).as_posix(): sha_of(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in skip
    }


def entry_of(site: Path, relpath: str) -> dict[str, Any]:
    (found,) = [e for e in entries(site) if e["relpath"] == relpath]
    return found


def restore_intents(site: Path) -> int:
    with sqlite3.connect(site / "archive" / "coldkeep.db") as db:
        return int(db.execute("SELECT count(*) FROM restore_intents").fetchone()[0])


def checked(
    tally: Tally,
    fs: FaultFS,
    originals: Originals,
    *,
    settled: bool = True,
    remount: bool = True,
) -> None:
    """``check_site`` on the backing directory, the mount stopped first: the bytes
    on "disk", read without faultfs, and never behind a live mount's back (when
    check_site's connection closes, SQLite checkpoints and removes the WAL; done
    beside a mount, that mount's kernel caches would be stale). ``remount``: the
    mount is started again, for what the test does next."""
    fs.clear()
    fs.stop()
    check_site(fs.backing, originals, tally, settled=settled)
    if remount:
        fs.start()


def next_run(site: Path, fs: FaultFS, *args: str) -> dict[str, Any]:
    """The next run, the fault cleared: it completes (``ok``)."""
    fs.clear()
    doc = ck_json(site, *args)
    assert doc["ok"] is True, doc
    return doc


# files: reading, writing and fsyncing ---------------------------------------------


@pytest.mark.parametrize("bundled", [False, True], ids=["own gzip", "in a bundle"])
def test_a_source_that_cannot_be_read_is_counted_kept_and_named(
    mount: Mount, templates: Templates, tally: Tally, bundled: bool
) -> None:
    site, fs = mount(templates.recovered, events=False)
    if bundled:  # the other files of its unit and month go into the bundle
        config = site / "coldkeep.toml"
        config.write_text(config.read_text().replace("bundle_below = 0\n", ""))
    rel = "unit-0001/part-01.jsonl"
    rule = fs.fail("read", f"live/{rel}", EIO)

    result = quarantined_pass(tally, site, names=rel)
    injected(tally, fs, rule, "source read")
    files = result["files"]
    assert files["errors"] == 1 and files["archived"] == files["eligible"] - 1, files
    line = reason_for(result, rel)
    assert str(site / "live" / rel) in line, line  # the file, by its path
    fs.clear()  # the checks read the site through the mount
    assert live_files(site)[rel] == templates.recovered.originals.files[rel]
    checked(tally, fs, templates.recovered.originals)

    again = next_run(site, fs, "pass")["result"]
    assert again["files"]["archived"] == 1 and rel not in live_files(site)
    assert again["file_problems"] == 0, "archived now: no longer a problem"
    checked(tally, fs, templates.recovered.originals, remount=False)
    if bundled:
        unit = [e for e in entries(fs.backing) if e["unit"] == "unit-0001" and e["relpath"] != rel]
        assert unit and all(e["member_offset"] is not None for e in unit), "bundled"


@pytest.mark.parametrize(
    ("op", "glob", "extra"),
    [
        ("write", "archive/files/bulk-1/firehose.jsonl.gz.partial", {"after_bytes": 65536}),
        ("fsync", "archive/files/unit-0001/part-01.jsonl.gz.partial", {}),
        ("read", "archive/files/unit-0002/part-01.log.gz.partial", {}),
    ],
    ids=["partial write", "partial fsync", "partial read back"],
)
def test_a_partial_that_cannot_be_written_fsynced_or_read_back_is_discarded(
    mount: Mount,
    templates: Templates,
    tally: Tally,
    op: str,
    glob: str,
    extra: dict[str, int],
) -> None:
    """The partial goes and the source stays. A failed fsync is never retried and
    then trusted (after one, the kernel may have dropped the pages it could not
    write, and a second fsync can succeed on bytes that never reached the disk):
    the partial is fsynced once and never renamed into place. A partial that
    cannot be read back (step 3) is an error, not a failed verify."""
    site, fs = mount(templates.recovered, events=False)
    partial = glob.removeprefix("archive/files/")
    rel = partial.removesuffix(".gz.partial")
    rule = fs.fail(op, glob, EIO, **extra)

    result = quarantined_pass(tally, site, names=rel)
    injected(tally, fs, rule, f"partial {op}")
    assert result["files"]["errors"] == 1 and result["files"]["verify_failed"] == 0
    line = reason_for(result, rel)
    assert str(site / glob) in line, line  # the partial, by its path
    assert fs.calls("rename", glob) == 0, "the partial was never placed"
    # Written and fsynced once (the write failed before), never again.
    assert fs.calls("fsync", glob) == (op != "write"), "a failed fsync is never retried"
    assert not (site / glob).exists()
    fs.clear()
    assert live_files(site)[rel] == templates.recovered.originals.files[rel]
    checked(tally, fs, templates.recovered.originals)

    again = next_run(site, fs, "pass")["result"]
    assert again["files"]["archived"] == 1 and rel not in live_files(site)
    checked(tally, fs, templates.recovered.originals, remount=False)


def test_a_failed_fsync_of_the_gzip_directory_commits_nothing_and_keeps_the_source(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    """Step 5 placed the gzip, then the fsync of its directory failed: its name
    may not survive a power loss, so no entry is written and the source is not
    unlinked on the strength of it. The gzip is an orphan; the next recovery
    re-verifies it against the source, fsyncs it and its directory, and adopts it."""
    site, fs = mount(templates.recovered, events=False)
    rel = "unit-0001/logs/part-02.jsonl"  # alone in its directory: the first fsync
    folder = "archive/files/unit-0001/logs"  # of it is this file's step 5
    rule = fs.fail("fsyncdir", folder, EIO, times=1)

    result = quarantined_pass(tally, site, names=rel)
    injected(tally, fs, rule, "gzip dir fsync")
    assert result["files"]["errors"] == 1, result["files"]
    line = reason_for(result, rel)
    assert f"the fsync of {site / folder} failed" in line, line
    assert (site / "archive" / "files" / f"{rel}.gz").exists(), "the verified gzip stays"
    assert all(e["relpath"] != rel for e in entries(site)), "no entry rests on it"
    assert live_files(site)[rel] == templates.recovered.originals.files[rel]
    tally.checks += 3

    fs.clear()
    fs.reset_calls()
    again = next_run(site, fs, "pass")["result"]
    assert again["recovery"]["orphans_adopted"] == 1 and rel not in live_files(site)
    assert fs.calls("fsyncdir", folder) >= 1, "adopted only once its name is durable"
    checked(tally, fs, templates.recovered.originals, remount=False)


def test_a_failed_fsync_of_the_live_directory_after_the_unlink_is_settled_next_pass(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    """Step 7 unlinked the source, then the fsync of its directory failed: the
    file is archived (its entry is durable), the unlink may not be. Nothing to
    undo: the entry keeps ``source_present``, and the next recovery settles it
    with the same identity check as after a crash there."""
    site, fs = mount(templates.recovered, events=False)
    rel = "unit-0001/logs/part-02.jsonl"
    rule = fs.fail("fsyncdir", "live/unit-0001/logs", EIO, times=1)

    result = quarantined_pass(tally, site, names=rel)
    injected(tally, fs, rule, "live dir fsync")
    files = result["files"]
    assert files["errors"] == 0 and files["archived"] == files["eligible"], files
    line = reason_for(result, rel)
    assert (
        "removing its source failed" in line and str(site / "live" / "unit-0001" / "logs") in line
    ), line
    assert entry_of(site, rel)["source_present"] == 1
    fs.clear()
    checked(tally, fs, templates.recovered.originals)

    next_run(site, fs, "pass")
    assert entry_of(site, rel)["source_present"] == 0

    # reading gzips: verify, recovery, restore --------------------------------------------
    checked(tally, fs, templates.recovered.originals, remount=False)


def test_verify_reports_a_gzip_it_cannot_read_and_marks_nothing(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    site, fs = mount(templates.passed)
    gz = "files/unit-0001/part-01.jsonl.gz"
    before = entries(site)
    rule = fs.fail("read", f"archive/{gz}", EIO)

    run = ck(site, "verify", check=1)
    injected(tally, fs, rule, "verify read")
    assert "Traceback" not in run.stderr
    fs.clear()
    (problem,) = [line for line in run.stdout.splitlines() if gz in line]
    assert problem.startswith("error") and "could not be read" in problem, problem
    headline = run.stdout.splitlines()[-1]
    assert "1 could not be read" in headline and "FAILED" not in headline, headline
    after = entries(site)
    assert [(e["status"], e["verify_error"]) for e in after] == [
        (e["status"], e["verify_error"]) for e in before
    ], "nothing marked: no verify failure, nothing missing"
    tally.checks += 4

    doc = next_run(site, fs, "verify")
    assert doc["result"]["ok"] == doc["result"]["checked"] == len(after)
    checked(tally, fs, templates.passed.originals, remount=False)


def test_recovery_and_adopt_leave_an_orphan_they_cannot_read_as_found(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    """The demo's three orphans (one adoptable, one stale, one that the codec
    would refuse), none readable: none is adopted, kept or deleted as corrupt."""
    site, fs = mount(templates.pristine)
    orphans = {p.relative_to(site).as_posix(): sha_of(p) for p in site.rglob("*.gz")}
    assert len(orphans) == 3
    rule = fs.fail("read", "archive/files/**/*.gz", EIO)

    failed_cli(tally, site, "recover", names="could not be read")
    adopt = "files/unit-0005/part-01.jsonl.gz"
    done = failed_cli(tally, site, "adopt", adopt, names=adopt)["result"]
    assert [o["outcome"] for o in done] == ["error"], done
    plan = ck_json(site, "plan")["result"]  # a listing still lists them
    assert len(plan["recovery"]["orphans"]) == 3, plan["recovery"]
    injected(tally, fs, rule, "orphan read")
    fs.clear()
    still = {p.relative_to(site).as_posix(): sha_of(p) for p in site.rglob("*.gz")}
    assert still == orphans, "every orphan left as found"
    assert entries(site) == []
    tally.checks += 3

    doc = next_run(site, fs, "recover")["result"]
    assert (doc["orphans_adopted"], doc["orphans_stale"], doc["orphans_corrupt"]) == (1, 1, 1)
    checked(tally, fs, templates.pristine.originals, remount=False)


@pytest.mark.parametrize(
    ("op", "where"),
    [
        ("read", "archive/files/unit-0001/part-01.jsonl.gz"),
        ("write", "live/unit-0001/part-01.jsonl.restore-partial"),
        ("fsync", "live/unit-0001/part-01.jsonl.restore-partial"),
    ],
    ids=["gzip read", "partial write", "partial fsync"],
)
def test_a_restore_that_meets_an_io_error_places_nothing_and_changes_nothing(
    mount: Mount, templates: Templates, tally: Tally, op: str, where: str
) -> None:
    site, fs = mount(templates.passed)
    rel = "unit-0001/part-01.jsonl"
    target = site / "live" / rel
    gzips_before = tree(site / "archive" / "files")
    entry_before = entry_of(site, rel)
    rule = fs.fail(op, where, EIO)

    done = failed_cli(tally, site, "restore", "--unit", "unit-0001", names=str(site / where))
    injected(tally, fs, rule, f"restore {op}")
    outcomes = {f["relpath"]: f["result"] for f in done["result"]}
    assert outcomes.pop(rel) == "error" and set(outcomes.values()) == {"restored"}, outcomes
    assert not target.exists() and not target.with_name(f"{target.name}.restore-partial").exists()
    assert fs.calls("rename", "live/**/*.restore-partial") == len(outcomes), "only the others"
    if op == "fsync":
        assert fs.calls("fsync", where) == 1, "a failed fsync is never retried"
    fs.clear()
    assert entry_of(site, rel) == entry_before, "its entry untouched: no status, no hold"
    assert restore_intents(site) == 0, "the intent named nothing left: cleared"
    assert tree(site / "archive" / "files") == gzips_before, "the archive's gzips untouched"
    tally.checks += 5
    checked(tally, fs, templates.passed.originals)

    again = next_run(site, fs, "restore", "--unit", "unit-0001")
    assert {f["relpath"]: f["result"] for f in again["result"]}[rel] == "restored"
    assert sha_of(target) == templates.passed.originals.files[rel]

    # the manifest -------------------------------------------------------------------------
    checked(tally, fs, templates.passed.originals, remount=False)


def test_a_restore_whose_directory_fsync_fails_leaves_those_intents_to_recovery(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    """The files a restore placed in one directory share one fsync of it, before
    their intents are cleared. When it fails their names may not be durable:
    each is ``error`` and keeps its intent (a partial a power cut brought back
    would be removed by that name); recovery clears them, and the next restore
    finds the files in place."""
    site, fs = mount(templates.passed)
    folder = "live/unit-0001"
    rule = fs.fail("fsyncdir", folder, EIO, times=1)

    done = failed_cli(tally, site, "restore", "--unit", "unit-0001", names=str(site / folder))
    injected(tally, fs, rule, "restore dir fsync")
    outcomes = {f["relpath"]: f["result"] for f in done["result"]}
    failed = sorted(rel for rel, result in outcomes.items() if result == "error")
    assert failed and set(outcomes.values()) <= {"error", "restored"}, outcomes
    fs.clear()
    assert restore_intents(site) == len(failed), "kept for recovery"
    assert not list((site / "live").rglob("*.restore-partial"))
    tally.checks += 3

    assert next_run(site, fs, "recover")["result"]["intents_cleared"] == len(failed)
    assert restore_intents(site) == 0
    again = next_run(site, fs, "restore", "--unit", "unit-0001")
    assert {f["relpath"]: f["result"] for f in again["result"]} == dict.fromkeys(outcomes, "exists")
    originals = templates.passed.originals.files
    assert all(sha_of(site / "live" / rel) == originals[rel] for rel in outcomes)
    tally.checks += 4


def test_a_manifest_that_cannot_be_read_stops_every_command_with_one_line(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    site, fs = mount(templates.recovered, events=False)
    manifest = site / "archive" / "coldkeep.db"
    archive_before = tree(fs.backing / "archive", skip=(".lock",))
    live_before = live_files(site)
    rule = fs.fail("read", "archive/coldkeep.db", EIO)

    for command in ("pass", "status", "verify"):  # mutating, read-only, reading gzips
        run = ck(site, command, check=1)
        assert "Traceback" not in run.stderr, run.stderr
        (line,) = run.stderr.splitlines()
        assert line.startswith(f"coldkeep: {manifest}: disk I/O error"), line
        tally.checks += 2
    injected(tally, fs, rule, "manifest read")
    fs.clear()
    assert tree(fs.backing / "archive", skip=(".lock",)) == archive_before, "nothing written"
    assert live_files(site) == live_before
    tally.checks += 2

    next_run(site, fs, "pass")
    checked(tally, fs, templates.recovered.originals, remount=False)


def test_a_manifest_write_error_at_an_entry_keeps_the_gzip_and_the_source(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    """EIO on the manifest's WAL at the third entry's commit (its gzip just
    placed): whether that commit is durable is not known, so neither the gzip nor
    the source goes (unlike a full disk, whose failed commit is known to be
    rolled back). The pass stops naming coldkeep.db; the next one adopts the gzip."""
    site, fs = mount(templates.recovered, events=False)
    config = site / "coldkeep.toml"
    config.write_text(config.read_text() + "\n[io]\nworkers = 1\n")
    # The third gzip just placed: the next manifest write is its entry's.
    done = pass_failing_at(site, fs, "renamed", 3, "write", "archive/coldkeep.db-wal", times=1)
    failed_pass(tally, done, names=str(site / "archive" / "coldkeep.db"))
    injected(tally, fs, done.rule, "manifest write")
    assert done.files["archived"] == 2, done.files
    fs.clear()
    src, gz = Path(done.info["src"]), Path(done.info["dest"])
    assert gz.exists() and src.exists(), "the gzip and its source both kept"
    tally.checks += 1

    next_run(site, fs, "pass")
    assert not src.exists()
    checked(tally, fs, templates.recovered.originals, remount=False)


# the event phase: the live DB and the month DBs ----------------------------------------


@dataclass(frozen=True)
class ChildPass:
    """What a pass run in a child said: its status, its text (what ``coldkeep
    pass`` prints), its file totals, the rule its hook set, and the info of the
    step that set it."""

    status: str
    text: list[str]
    files: dict[str, Any]
    rule: int
    info: dict[str, str]


DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def pass_failing_at(
    site: Path, fs: FaultFS, step: StepName, nth: int, op: str, glob: str, **extra: int
) -> ChildPass:
    """A pass whose ``nth`` announcement of ``step`` sets the rule (EIO on ``op`` of
    ``glob``). It runs in a forked child: a read error that reaches a
    memory-mapped page is a SIGBUS, and should one come back it kills the child,
    not the test run."""
    if op == "read" and not os.access(DROP_CACHES, os.W_OK):
        pytest.skip(f"{DROP_CACHES} is not writable here: a read fault could be served from cache")
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)

    def child() -> None:
        seen, rule, at = 0, -1, {}

        async def hook(name: StepName, info: StepInfo) -> None:
            nonlocal seen, rule, at
            if name == step:
                seen += 1
                if seen == nth:
                    rule = fs.fail(op, glob, EIO, **extra)
                    at = {k: str(v) for k, v in info.items()}
                    if op == "read":
                        # Pages another connection read before (the event phase
                        # counts live's unparsable rows on a thread of its own)
                        # are in the kernel's cache, and a read of them never
                        # reaches the disk: dropped, as a failing disk's would be.
                        DROP_CACHES.write_text("1\n")

        summary = asyncio.run(Archiver(load_settings(site / "coldkeep.toml"), step=hook).run_pass())
        text = report("pass", summary).splitlines()
        send.send(ChildPass(summary.status, text, asdict(summary.files), rule, at))

    proc = ctx.Process(target=child)
    proc.start()
    proc.join(120)
    assert proc.exitcode == 0, f"the pass died: exit {proc.exitcode} (-7 is SIGBUS)"
    done: ChildPass = receive.recv()
    return done


def test_a_month_db_write_error_stops_the_event_phase_rolled_back(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    site, fs = mount(templates.recovered)
    done = pass_failing_at(site, fs, "batch_archived", 1, "write", "archive/events/*.db-wal")
    (line,) = failed_pass(tally, done, names=str(site / "archive" / "events"))
    injected(tally, fs, done.rule, "month DB write")
    assert "disk I/O error" in line and "rolled back" in line, line
    assert done.files["errors"] == 0
    fs.clear()
    checked(tally, fs, templates.recovered.originals, settled=False)

    next_run(site, fs, "pass")
    checked(tally, fs, templates.recovered.originals, remount=False)


def test_a_month_db_that_cannot_be_read_is_refused_and_the_others_go_on(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    """A month DB an earlier pass filled, unreadable when this pass opens it: that
    month is refused (its rows stay live), the later months are moved."""
    site, fs = mount(templates.half)
    month = max(p.stem for p in (site / "archive" / "events").glob("*.db"))
    rule = fs.fail("read", f"archive/events/{month}.db", EIO)

    result = failed_cli(tally, site, "pass", names=f"event month {month} refused")["result"]
    injected(tally, fs, rule, "month DB read")
    (line,) = [p for p in result["problems"] if "refused" in p]
    assert str(site / "archive" / "events" / f"{month}.db") in line, line
    assert result["events"]["moved"] > 0 and month not in result["events"]["months"]
    fs.clear()
    checked(tally, fs, templates.half.originals, settled=False)

    next_run(site, fs, "pass")
    checked(tally, fs, templates.half.originals, remount=False)


def test_a_live_db_that_cannot_be_read_stops_the_event_phase(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    site, fs = mount(templates.recovered)
    rule = fs.fail("read", "state.db", EIO)

    result = failed_cli(tally, site, "pass", names=str(site / "state.db"))["result"]
    injected(tally, fs, rule, "live DB read")
    assert result["files"]["archived"] == result["files"]["eligible"], "the files went on"
    assert any("could not be read" in p for p in result["problems"]), result["problems"]
    fs.clear()
    checked(tally, fs, templates.recovered.originals)

    next_run(site, fs, "pass")
    checked(tally, fs, templates.recovered.originals, remount=False)


def test_a_live_db_write_error_at_a_delete_stops_the_event_phase_rolled_back(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    """The second batch is copied; its delete from live cannot be written: rolled
    back, its rows stay in both places, and the next pass only deletes them."""
    site, fs = mount(templates.recovered)
    done = pass_failing_at(site, fs, "batch_archived", 2, "write", "state.db-wal")
    (line,) = failed_pass(tally, done, names=str(site / "state.db"))
    injected(tally, fs, done.rule, "live DB write")
    assert "disk I/O error" in line and "rolled back" in line, line
    fs.clear()
    checked(tally, fs, templates.recovered.originals, settled=False)

    next_run(site, fs, "pass")
    checked(tally, fs, templates.recovered.originals, remount=False)


def test_a_live_db_read_error_mid_phase_stops_it_and_never_kills_the_process(
    mount: Mount, templates: Templates, tally: Tally
) -> None:
    """The first batch moved, live's pages unreadable from then on. With live
    memory-mapped, this read was a SIGBUS: coldkeep died without a word (and a
    scheduler with it). Read through read(), it is an error; SQLite reports EIO
    from a read as "database disk image is malformed", which the line says may
    be the disk."""
    site, fs = mount(templates.recovered)
    done = pass_failing_at(site, fs, "batch_deleted", 1, "read", "state.db")
    (line,) = failed_pass(tally, done, names=str(site / "state.db"))
    injected(tally, fs, done.rule, "live DB read mid-phase")
    assert "check the kernel log" in line, line
    checked(tally, fs, templates.recovered.originals, settled=False)

    next_run(site, fs, "pass")
    checked(tally, fs, templates.recovered.originals, remount=False)
