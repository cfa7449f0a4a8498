"""The core API in-process: what a pass tells its subscribers, and stopping it;
the modules it imports when first called are the ones it is checked against."""

from __future__ import annotations

import ast
import importlib
from dataclasses import replace
from pathlib import Path

import pytest

from coldkeep.core import archiver as api
from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.config import load_settings, parse_settings
from coldkeep.core.base.errors import UsageError
from coldkeep.core.base.lazy import LazyModule
from coldkeep.core.base.lock import ArchiveLock, LockHeld
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.base.stream import (
    BatchMoved,
    CheckpointRan,
    EventStream,
    FileDone,
    FileStep,
    Finished,
    OrphanSeen,
    Phase,
    Started,
)
from coldkeep.core.files.restore import Selection
from coldkeep.core.ops.demo import write_demo
from coldkeep.core.store import audit

from helpers import Roots, jsonl


@pytest.fixture
def archiver(tmp_path: Path) -> Archiver:
    site = write_demo(tmp_path / "demo", seed=5, scale=0.02)
    return Archiver(load_settings(site.config), stream=EventStream())


async def test_a_pass_reports_every_step_to_every_subscriber(archiver: Archiver) -> None:
    console, log = archiver.stream.subscribe(), archiver.stream.subscribe()
    summary = await archiver.run_pass()
    events = console.pending()
    assert [type(e) for e in log.pending()] == [type(e) for e in events]

    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    assert events[-1].status == "ok" and events[-1].summary["pass_id"] == summary.pass_id
    phases = [e.phase for e in events if isinstance(e, Phase)]
    assert phases == ["recovery", "files", "events"]
    outcomes = {e.outcome for e in events if isinstance(e, OrphanSeen)}
    assert outcomes == {"partial_removed", "adopted", "stale", "corrupt"}
    archived = [e for e in events if isinstance(e, FileDone) and e.result == "archived"]
    assert len(archived) == summary.files.archived > 0
    steps = {e.step for e in events if isinstance(e, FileStep)}
    assert {"started", "partial_written", "verified", "renamed"} <= steps
    assert {"entry_committed", "source_unlinked"} <= steps
    assert {"bundle_written", "bundle_verified", "bundle_placed"} <= steps
    assert {"bundle_committed", "bundle_sources_unlinked"} <= steps
    # A file's steps, announced from the worker thread that takes them, arrive
    # in protocol order, each once, and before the file's result.
    order = [
        "started",
        "partial_written",
        "verified",
        "renamed",
        "entry_committed",
        "source_set_aside",
    ]
    singles = {e.relpath for e in events if isinstance(e, FileStep) and e.op == "archive"}
    assert singles
    for done in archived:
        if done.relpath not in singles:
            continue  # a bundle's member: its steps are its bundle's
        seen = [
            e.step
            for e in events[: events.index(done)]
            if isinstance(e, FileStep) and e.op == "archive" and e.relpath == done.relpath
        ]
        assert [s for s in seen if s != "reading"] == [*order, "source_unlinked"], done.relpath
    assert any(isinstance(e, BatchMoved) for e in events)
    assert any(isinstance(e, CheckpointRan) for e in events)


async def test_cancel_stops_at_a_safe_point_and_the_next_pass_finishes(
    archiver: Archiver,
) -> None:
    token = CancelToken()

    async def stop_after_first_bundle(name: StepName, info: StepInfo) -> None:
        if name == "bundle_sources_unlinked":
            token.cancel("operator pressed stop")

    archiver.steps.user_step = stop_after_first_bundle
    first = await archiver.run_pass(token)
    assert first.status == "cancelled"
    # The jobs in flight finish their step; nothing new starts.
    assert 1 <= first.files.archived < first.files.eligible
    assert not list(archiver.settings.archive_root.rglob("*.partial"))

    archiver.steps.user_step = Archiver(archiver.settings).steps.user_step
    second = await archiver.run_pass()
    assert second.status == "ok" and second.recovery["orphans_found"] == 0
    assert first.files.archived + second.files.archived == first.files.eligible


async def test_mutating_calls_hold_the_lock_and_readers_do_not(archiver: Archiver) -> None:
    async with archiver.session("test"):
        with pytest.raises(LockHeld):
            await archiver.recover()
        status = await archiver.status()  # never takes the lock
        assert status.holder is not None and status.holder_alive
        plan = await archiver.plan()
        assert plan.plan.files > 0


async def test_many_workers_archive_hundreds_of_files_without_a_database_error(
    roots: Roots,
) -> None:
    # Eight workers finishing small files at once used to break the manifest
    # connection (SQLITE_MISUSE): a cursor finalized on the event loop's thread.
    for i in range(300):
        roots.write(f"u{i % 10}/f{i:03d}.jsonl", jsonl(20, seed=i))
    settings = parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "mode": "on",
            "files": {"include": ["**/*.jsonl"], "min_age_days": 1},
            "io": {"workers": 8},
        },
        roots.base / "coldkeep.toml",
    )
    summary = await Archiver(settings).run_pass()
    assert (summary.status, summary.files.archived, summary.files.errors) == ("ok", 300, 0)
    assert not any(roots.live.rglob("*.jsonl"))


async def test_while_the_lock_is_held_partials_are_work_in_progress(archiver: Archiver) -> None:
    """The demo plants a leftover partial: a finding when the archive is free; while
    a live process holds the lock, partials are that process's work in progress."""
    free = await archiver.plan()
    assert free.recovery.partials and free.recovery.busy is None

    with ArchiveLock.try_acquire(archiver.settings.archive_root, "coldkeep pass (cli)"):
        busy = (await archiver.plan()).recovery
    assert busy.partials == [] and busy.restore_partials == []
    assert busy.in_flight == len(free.recovery.partials)
    assert busy.busy is not None and "coldkeep pass (cli)" in busy.busy


async def test_a_pass_that_dies_on_an_unexpected_error_is_recorded_failed(
    archiver: Archiver,
) -> None:
    async def crash_in_the_event_phase(name: StepName, info: StepInfo) -> None:
        if name == "batch_archived":
            raise RuntimeError("the step hook broke")

    archiver.steps.user_step = crash_in_the_event_phase
    watch = archiver.stream.subscribe()
    with pytest.raises(RuntimeError, match="the step hook broke"):
        await archiver.run_pass()
    [last, *_] = (await archiver.status()).last_passes
    assert last.status == "failed"
    assert any("RuntimeError: the step hook broke" in p for p in last.summary["problems"])
    [finished] = [e for e in watch.pending() if isinstance(e, Finished)]
    assert finished.status == "failed"
    async with archiver.session("test") as current:
        audited = await audit.last_of(current.manifest, "pass")
    assert audited is not None and audited.outcome == "error"

    # Nothing was lost: the next pass settles the batch left in both places.
    archiver.steps.user_step = Archiver(archiver.settings).steps.user_step
    assert (await archiver.run_pass()).status == "ok"


@pytest.mark.parametrize("hold_days", [1e15, float("inf"), float("nan")])
async def test_a_hold_too_long_to_record_restores_nothing_and_leaves_no_intent(
    archiver: Archiver, hold_days: float
) -> None:
    await archiver.run_pass()
    # The config refuses such a value at load time; this is the line behind it.
    odd = Archiver(replace(archiver.settings, hold_days=hold_days), stream=EventStream())
    selection = Selection(
        unit=(await archiver.select(Selection(glob="**")))[0].relpath.split("/")[0]
    )
    with pytest.raises(UsageError, match="hold_days"):
        await odd.restore(selection)
    status = await archiver.status()
    assert status.restore_intents == 0
    assert "restored" not in status.entries


def test_each_lazily_imported_module_is_the_one_its_name_is_checked_as() -> None:
    """archiver.py names its operations' modules twice: for the type checker
    (under TYPE_CHECKING) and for the running program (``lazy``). A name bound
    to another module than the checked one would fail only when called."""
    checked: dict[str, str] = {}
    for node in ast.walk(ast.parse(Path(api.__file__).read_text())):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                parent = f"coldkeep.core.{imp.module}"
                if hasattr(importlib.import_module(parent), "__path__"):  # names are modules
                    checked |= {a.asname or a.name: f"{parent}.{a.name}" for a in imp.names}
    lazy = {n: v._name for n, v in vars(api).items() if isinstance(v, LazyModule)}
    assert lazy == checked
    for name, module in lazy.items():
        assert getattr(api, name).__name__ == module  # each one imports
