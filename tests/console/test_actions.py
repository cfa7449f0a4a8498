"""Every console action, driven through the keyboard with Textual's Pilot on a real
demo site: what an operator would see, and what happens on disk."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from rich.console import Console
from textual.widgets import Button, DataTable, ProgressBar, Static

from coldkeep.core.base.config import Settings
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.base.stream import FileDone
from coldkeep.core.files import recovery
from coldkeep.core.files.recovery import ArchiveFiles
from coldkeep.tui.console.kit.messages import OperationStopped, StatusLoaded
from coldkeep.tui.console.panes import InFlightPane, JobsPane, LogPane, OrphansPane
from coldkeep.tui.console.panes.log import StableLog
from coldkeep.tui.console.screens import ConfirmScreen, HelpScreen, RestoreScreen

from consolekit import (
    archive_all,
    current_screen,
    make_app,
    press_to,
    settle,
    the_one_quit,
    until,
)

SIZE = (120, 36)


def text_of(app: object, selector: str) -> str:
    return str(app.query_one(selector, Static).render())  # type: ignore[attr-defined]


def live_files(settings: Settings) -> set[str]:
    return {
        p.relative_to(settings.live_root).as_posix()
        for p in settings.live_root.rglob("*")
        if p.is_file() and p.name != ".closed"
    }


async def test_pass_asks_with_the_plan_then_archives_and_updates_the_panes(
    settings: Settings,
) -> None:
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        eligible = app.backlog.files if app.backlog else 0
        assert eligible > 5
        assert f"{eligible} files" in text_of(app, "#backlog-total")

        await pilot.press("p")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        summary = str(app.screen.query_one("#confirm-summary", Static).render())
        assert (
            f"{eligible} files" in summary and "Recovery will remove 1 leftover partial;" in summary
        )
        assert "REMOVED" in str(app.screen.query_one("#confirm-warning", Static).render())

        await pilot.press("y")
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen)
        assert "pass: ok" in text_of(app, "#inflight-phase")
        assert app.query_one("#inflight-bar", ProgressBar).percentage == 1, "done: full"
        assert "0 files" in text_of(app, "#backlog-total")
        jobs = app.query_one(JobsPane).query_one("#jobs-table", DataTable)
        assert [str(jobs.get_row_at(i)[0]) for i in range(jobs.row_count)] == [
            "alerts",
            "checkpoint",
            "heartbeat",
            "pass",
            "ship",
            "stats",
            "verify",
        ]
        kinds = {f.kind for f in app.query_one(OrphansPane).findings.values()}
        assert kinds == {"stale"}
        assert "last pass #1 ok" in text_of(app, "#status-line")


async def test_cancelling_the_confirmation_changes_nothing(settings: Settings) -> None:
    before = live_files(settings)
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        await pilot.press("n")
        await settle(pilot)
        assert app.running is None and not isinstance(app.screen, ConfirmScreen)
    assert live_files(settings) == before
    assert not (settings.archive_root / "coldkeep.db").exists()


async def test_running_the_pass_job_asks_first_like_a_pass(settings: Settings) -> None:
    before = live_files(settings)
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("j")  # no job chosen: nothing runs, the Jobs table to choose one
        await settle(pilot)
        jobs = app.query_one(JobsPane).query_one("#jobs-table", DataTable)
        assert app.focused is jobs and app.running is None
        assert not isinstance(current_screen(app), ConfirmScreen)
        jobs.move_cursor(row=jobs.get_row_index("pass"))
        await pilot.press("j")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen), "the job removes files: it asks"
        title = str(app.screen.query_one("#confirm-title", Static).render())
        assert title.startswith("Job pass: "), "the question says which job runs"
        assert "REMOVED" in str(app.screen.query_one("#confirm-warning", Static).render())
        await pilot.press("n")
        await settle(pilot)
        assert app.running is None and live_files(settings) == before

        await pilot.press("j")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert "0 files" in text_of(app, "#backlog-total")


async def test_log_lines_written_while_its_tab_is_hidden_wrap_at_the_pane(
    settings: Settings,
) -> None:
    app = make_app(settings)
    async with app.run_test(size=(80, 24)) as pilot:  # narrow: the panes are tabs
        await settle(pilot)
        line = "files: 28 to do, 5.3 MiB, written while another tab is shown"
        app.log_line("info", line)
        await settle(pilot)
        await pilot.press("6")
        await settle(pilot)
        view = app.query_one(StableLog)
        shown = [strip.text.rstrip() for strip in view.lines]
        assert any(s.endswith(line) for s in shown), shown


async def test_attached_mid_phase_the_bar_claims_no_progress_it_cannot_know(
    settings: Settings,
) -> None:
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.query_one(InFlightPane)
        for n in range(3):  # files finishing in a phase whose start was never seen
            pane.done(FileDone("archive", f"u/{n}.jsonl", "archived", 1000))
        pane.flush()  # what the next frame tick does
        await settle(pilot)
        assert app.query_one("#inflight-bar", ProgressBar).percentage == 0


async def test_plan_recounts(settings: Settings) -> None:
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        (settings.live_root / "unit-0000" / "late.jsonl").write_text("{}\n")
        os.utime(settings.live_root / "unit-0000" / "late.jsonl", (0, 0))  # very old
        before = app.backlog.files if app.backlog else 0
        await pilot.press("l")
        await settle(pilot)
        assert app.backlog is not None and app.backlog.files == before + 1


async def test_restore_through_the_browser(settings: Settings) -> None:
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        gone = sorted(f for f in live_files(settings) if f.startswith("unit-0000/"))

        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, RestoreScreen)
        await pilot.press(*"unit:unit-0000", "enter")  # the filter has focus
        await settle(pilot)
        table = app.screen.query_one("#restore-table", DataTable)
        assert table.row_count >= 1
        await pilot.press("space")
        await settle(pilot)
        assert "→" in str(app.screen.query_one("#restore-preview", Static).render())
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(current_screen(app), ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, RestoreScreen)
        results = app.screen.query_one("#restore-results", DataTable)
        assert results.row_count == 1
        assert str(results.get_row_at(0)[0]) == "restored"
        restored = str(results.get_row_at(0)[1])
        assert (settings.live_root / restored).exists() and restored not in gone


async def test_adopt_the_selected_orphan(settings: Settings) -> None:
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        pane = app.query_one(OrphansPane)
        orphans = sorted(p for p, f in pane.findings.items() if f.kind == "orphan")
        assert len(orphans) == 3
        table = pane.query_one(DataTable)
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("a")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert text_of(app.screen, "#confirm-title") == "Adopt 1 orphan gzip"
        listed = app.screen.query_one("#confirm-table", DataTable)
        chosen = str(listed.get_row_at(0)[0])
        assert listed.row_count == 1 and chosen in orphans
        await pilot.press("y")
        await settle(pilot)
        left = {p for p, f in app.query_one(OrphansPane).findings.items() if f.kind == "orphan"}
        assert chosen not in left and len(left) == 2


async def test_findings_show_as_the_archive_walk_finds_them(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a big archive the walk takes seconds: what it found so far is shown,
    said to be partial, before it ends. Here it is held after its first piece."""
    release = threading.Event()
    walk = recovery.walk_archive

    def held_walk(layout: Layout, piece: int | None = None) -> Iterator[ArchiveFiles]:
        for n, found in enumerate(walk(layout, piece)):
            if n == 1:
                assert release.wait(30), "the test never let the walk go on"
            yield found

    monkeypatch.setattr(recovery, "walk_archive", held_walk)
    monkeypatch.setattr(recovery, "WALK_PIECE", 1)
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await until(
            pilot,
            lambda: "walking the archive" in text_of(app, "#orphans-summary"),
            "the walk shown under way",
        )
        summary = text_of(app, "#orphans-summary")
        assert re.search(r"walking the archive: [01] seen so far", summary), summary
        release.set()
        await settle(pilot)
        summary = text_of(app, "#orphans-summary")
        assert "walking" not in summary and "3 orphans" in summary, summary


async def test_sweep_shows_the_exact_paths_first(settings: Settings) -> None:
    partial = next(settings.archive_root.rglob("*.partial"))
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert text_of(app.screen, "#confirm-title") == "Sweep 1 leftover"
        rows = app.screen.query_one("#confirm-table", DataTable)
        assert [str(rows.get_row_at(i)[0]) for i in range(rows.row_count)] == [
            partial.relative_to(settings.archive_root).as_posix()
        ]
        assert partial.exists(), "nothing is removed before the operator says yes"
        await pilot.press("y")
        await settle(pilot)
        assert not partial.exists()


async def test_verify_reports_every_gzip(settings: Settings) -> None:
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        await pilot.press("v")
        await settle(pilot)
        assert "verify:" in text_of(app, "#inflight-phase") and " ok" in text_of(
            app, "#inflight-phase"
        )


async def test_read_only_hides_and_refuses_every_mutating_action(settings: Settings) -> None:
    app = make_app(settings, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        buttons = {b.id for b in app.query(".action")}
        assert "do-run_pass" not in buttons and "do-adopt" not in buttons
        assert "do-refresh" in buttons and "do-restore" in buttons, "browsing changes nothing"
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, RestoreScreen)
        offered = [b.id for b in app.screen.query(Button)]
        assert "restore-go" not in offered and "events-go" not in offered, offered
        assert "restore-copy" in offered, "copying a gzip's path changes nothing"
        await pilot.press("down")  # to the table: the browser's keys are live
        await settle(pilot)
        hints = {
            b.binding.action
            for b in app.screen.active_bindings.values()
            if b.enabled and b.binding.show
        }
        assert "restore" not in hints and "copy" in hints, hints
        await pilot.press("r")  # restore: refused, nothing asked
        await settle(pilot)
        assert isinstance(app.screen, RestoreScreen) and app.running is None
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("p", "u", "s", "a", "v")
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen) and app.running is None
        await app.run_action("run_pass")  # reached another way (the palette): refused
        await settle(pilot)
        assert app.running is None
        assert "READ-ONLY" in text_of(app, "#status-line")
        helped = await press_to(app, pilot, HelpScreen, "question_mark")
        narrow = Console(width=76, record=True, file=io.StringIO())
        narrow.print(helped.keys())
        shown = "".join(narrow.export_text().split())
        assert "(unavailable:theconsoleisread-only(--read-only))" in shown, "in full at 80"
    assert not (settings.archive_root / "coldkeep.db").exists()


HOLD = """
import sys
from pathlib import Path
from coldkeep.core.base.lock import ArchiveLock
lock = ArchiveLock.try_acquire(Path(sys.argv[1]), command="coldkeep pass (cron)")
print("held", flush=True)
sys.stdin.read()
"""


async def test_a_lock_held_elsewhere_is_shown_and_explains_refusals(settings: Settings) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(settings.archive_root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    try:
        app = make_app(settings)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            line = text_of(app, "#status-line")
            assert f"LOCKED by pid {holder.pid}" in line and "coldkeep pass (cron)" in line
            await pilot.press("p")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen) and app.running is None
            assert app.unavailable("run_pass") is not None
            assert f"pid {holder.pid}" in (app.unavailable("sweep") or "")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


async def test_quitting_during_a_pass_asks_then_stops_cleanly(settings: Settings) -> None:
    text = settings.config_path.read_text() if settings.config_path else ""
    assert settings.config_path is not None
    settings.config_path.write_text(
        text.replace("workers = 1", "workers = 1\nbytes_per_s = 300000")
    )
    from coldkeep.core.base.config import load_settings

    slow = load_settings(settings.config_path)
    settings.config_path.with_name("fast.toml").write_text(text)
    app = make_app(slow)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("p")
        await settle(pilot)
        await pilot.press("y")
        pane = app.query_one(InFlightPane)
        await until(
            pilot, lambda: pane.phase == "files" and bool(pane.files), "the pass in its files"
        )
        assert app.running == "pass"
        await pilot.press("q")
        await pilot.pause()
        while not isinstance(app.screen, ConfirmScreen):
            await pilot.pause()
        await pilot.press("y")
        await settle(pilot)
    assert app.return_code in (0, None)
    assert not list(settings.archive_root.rglob("*.partial"))
    from coldkeep.core.archiver import Archiver

    # What the stop left is what recovery handles; the next pass finishes the job.
    after = Archiver(load_settings(settings.config_path.with_name("fast.toml")))
    recovered = await after.recover()
    assert recovered.errors == [] and recovered.missing == []
    done = await after.run_pass()
    assert done.status == "ok" and done.recovery["orphans_found"] == 0


async def test_a_report_that_lands_after_the_panes_are_gone_is_dropped(
    settings: Settings,
) -> None:
    """Closing takes the panes down while a worker's report may still wait in the
    queue (a status read, an operation's end): the closing console drops it."""
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.status is not None
        await app.screen.remove_children()
        app.post_message(StatusLoaded(app.status))
        app.post_message(OperationStopped("pass", "stopped: asked to"))
        await pilot.pause()
    # run_test raises what a handler raised: a handler that went looking for a
    # pane would fail the test here.
    assert app.return_code in (0, None)


async def test_the_log_has_no_empty_phase_line(settings: Settings) -> None:
    """A phase with nothing counted ("recovery", "events") says nothing: no
    "recovery:" with nothing after it."""
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        lines = [line for _, line in app.query_one(LogPane).lines]
        assert any("pass: ok" in line for line in lines), lines
        assert not [line for line in lines if line.rstrip().endswith(":")], lines


async def test_a_pass_stopped_by_an_unexpected_error_says_so(settings: Settings) -> None:
    app = make_app(settings)

    async def crash(name: StepName, info: StepInfo) -> None:
        if name == "batch_archived":
            raise RuntimeError("the step hook broke")

    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.archiver.steps.user_step = crash
        await pilot.press("p")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        said = text_of(app, "#inflight-phase")
        assert "unexpected error: RuntimeError: the step hook broke" in said, said
        assert "last pass #1 failed" in text_of(app, "#status-line")


async def test_the_palette_offers_each_command_once_and_quit_asks(settings: Settings) -> None:
    """Textual's own Quit (which quits at once) is replaced by the registry's."""
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "asks first" in the_one_quit(app).help
