"""The remote tier in the console: the Remote pane, and shipping from it (the plan
shown and confirmed first) to the demo's folder remote."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from textual.widgets import DataTable, Static

from coldkeep.core.base.config import Settings, load_settings
from coldkeep.core.base.stream import FileDone
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.panes import JobsPane, RemotePane
from coldkeep.tui.console.panes.remote import NO_REMOTE
from coldkeep.tui.console.screens import ConfirmScreen, HelpScreen

from consolekit import archive_all, current_screen, make_app, settle, until

SIZE = (120, 36)
REMOTE = '[remote]\nurl = "file:remote"\nsite = "demo"\n'


def remote_row(app: ColdkeepApp, key: str) -> str:
    """The Remote pane's row ``key``: its label and value, as shown."""
    table = app.query_one(RemotePane).query_one("#remote-table", DataTable)
    return "  ".join(str(cell) for cell in table.get_row(key))


def row_keys(app: ColdkeepApp) -> list[str | None]:
    table = app.query_one(RemotePane).query_one("#remote-table", DataTable)
    return [key.value for key in table.rows]


def running(app: ColdkeepApp) -> str | None:
    """What runs now (read through a call, so that a type checker does not carry
    an earlier comparison past the keys pressed since)."""
    return app.running


def shipped_files(settings: Settings) -> set[str]:
    assert settings.remote is not None and settings.remote.folder is not None
    files = settings.remote.folder / settings.remote.site / "files"
    return {p.relative_to(files).as_posix() for p in files.rglob("*") if p.is_file()}


def reconfigured(settings: Settings, old: str, new: str) -> Settings:
    assert settings.config_path is not None
    text = settings.config_path.read_text()
    assert old in text
    settings.config_path.write_text(text.replace(old, new))
    return load_settings(settings.config_path)


async def test_ship_asks_with_the_plan_then_ships_and_the_pane_shows_it(
    settings: Settings,
) -> None:
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert str(app.query_one("#remote-where", Static).render()) == "remote/demo/"
        assert remote_row(app, "last") == "last ship  never"
        await archive_all(app, pilot)
        pending = app.query_one(RemotePane).plan
        assert pending is not None and pending.pending_files > 5
        assert remote_row(app, "pending").startswith(f"pending  {pending.pending_files} files, ")
        # The event rows the pass moved: only this host holds them until the ship.
        status = await app.archiver.status()
        assert status.remote is not None and status.remote.pending_events.rows > 0
        events = status.remote.pending_events
        assert remote_row(app, "pending_events") == (
            f"pending rows  {events.rows} in {len(events.months)} months"
        )

        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        summary = str(app.screen.query_one("#confirm-summary", Static).render())
        assert summary.startswith(f"Ship {pending.pending_files} archive files (")
        assert " to remote/demo/; " in summary
        assert "no local copy is dropped: none was shipped more than 30 days ago" in summary
        assert not shipped_files(settings), "nothing is sent before the operator says yes"

        await pilot.press("y")
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen)
        assert app.running is None
        assert app.last_result.startswith("ship: ") and "objects shipped" in app.last_result
        assert len(shipped_files(settings)) == pending.pending_files
        assert remote_row(app, "pending") == "pending  0 files, 0 B"
        shipped = remote_row(app, "shipped").split()
        assert shipped[0] == "shipped" and int(shipped[1]) >= pending.pending_files
        assert remote_row(app, "last") == "last ship  2026-11-01 12:00 ok"
        assert remote_row(app, "rate").startswith("last rate  ")
        assert not app.query_one("#remote-problems").display
        assert "pending_events" not in row_keys(app), "every archived row is shipped"

        await pilot.press("u")  # all shipped: said, nothing asked
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen) and app.running is None

        # A remote copy that failed its verify (as verify --remote records it):
        # the pane and the header say so.
        db = sqlite3.connect(settings.archive_root / "coldkeep.db")
        with db:
            db.execute(
                "UPDATE remote_objects SET verify_error = 'sha256 differs' "
                "WHERE path = (SELECT min(path) FROM remote_objects)"
            )
        db.close()
        await pilot.press("f")
        await settle(pilot)
        assert remote_row(app, "verify_failed") == "verify failed  1"
        assert "REMOTE VERIFY FAILED 1" in str(app.query_one("#status-line", Static).render())


async def test_running_the_ship_job_asks_first_like_a_ship(archived: Settings) -> None:
    settings = archived
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        jobs = app.query_one(JobsPane).query_one("#jobs-table", DataTable)
        jobs.focus()  # the job is chosen in its table
        jobs.move_cursor(row=jobs.get_row_index("ship"))
        await pilot.press("j")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen), "the job can drop local copies: it asks"
        assert "to remote/demo/" in str(app.screen.query_one("#confirm-summary", Static).render())
        await pilot.press("n")
        await settle(pilot)
        assert running(app) is None and not shipped_files(settings)

        await pilot.press("j")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert shipped_files(settings)
        assert remote_row(app, "pending") == "pending  0 files, 0 B"
        assert app.last_result.startswith("job ship: ")


async def test_a_ship_problem_is_shown_in_the_pane(archived: Settings) -> None:
    settings = archived
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # Other bytes already at one object's key (another host shipping as the
        # same site): never replaced, reported.
        assert settings.remote is not None and settings.remote.folder is not None
        gz = next(settings.archive_root.glob("files/unit-0000/**/*.gz"))
        rel = gz.relative_to(settings.archive_root).as_posix()
        squatter = settings.remote.folder / "demo" / rel
        squatter.parent.mkdir(parents=True)
        squatter.write_bytes(b"not the archive's bytes")

        await pilot.press("u")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        problems = str(app.query_one("#remote-problems", Static).render())
        assert problems.startswith("1 problem in the last ship:"), problems
        assert rel in problems and "nothing replaced" in problems
        assert remote_row(app, "pending").startswith("pending  1 file, ")
        assert remote_row(app, "last").endswith(" failed")
        assert squatter.read_bytes() == b"not the archive's bytes"


async def test_stopping_a_ship_stops_it_between_objects(archived: Settings) -> None:
    settings = archived
    slow = reconfigured(settings, 'site = "demo"\n', 'site = "demo"\nbytes_per_s = 200000\n')
    app = make_app(slow)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        await pilot.press("y")
        pane = app.query_one(RemotePane)
        await until(pilot, lambda: bool(pane.transfer and pane.transfer.done), "an object shipped")
        assert running(app) == "ship"
        await pilot.press("x")
        await settle(pilot)
        assert running(app) is None
        assert "stopped" in app.last_result
        assert not app.query_one("#remote-problems").display, "a stop is no problem"
        plan = pane.plan
        assert plan is not None and plan.pending_files > 0
        assert remote_row(app, "last").endswith(" cancelled")


async def test_without_a_remote_tier_ship_is_off_and_the_pane_says_why(
    settings: Settings,
) -> None:
    bare = reconfigured(settings, REMOTE, "")
    assert bare.remote is None
    app = make_app(bare)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "do-ship" not in {b.id for b in app.query(".action")}
        assert not app.query_one(RemotePane).display, "the wide grid gives its place away"
        assert str(app.query_one("#remote-where", Static).render()) == NO_REMOTE
        await pilot.press("u")
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen) and app.running is None
        await app.run_action("ship")  # reached another way (the palette): refused
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen) and app.running is None
        assert app.unavailable("ship") == NO_REMOTE
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert app.screen.unavailable["ship"] == NO_REMOTE
    async with make_app(bare).run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("7")  # narrow: the Remote tab says there is none
        await settle(pilot)
        pilot_app = pilot.app
        assert isinstance(pilot_app, ColdkeepApp)
        assert pilot_app.query_one(RemotePane).display


def test_the_rate_is_measured_from_the_ships_own_events() -> None:
    now = [100.0]
    pane = RemotePane(monotonic=lambda: now[0])
    pane.ship_started()
    pane.ship_phase(3)
    now[0] += 2
    pane.object_done(FileDone("ship", "files/a.gz", "shipped", 3000))
    pane.object_done(FileDone("ship", "files/b.gz", "exists", 5000))  # nothing sent
    now[0] += 2
    pane.object_done(FileDone("ship", "files/c.gz", "shipped", 5000))
    t = pane.transfer
    assert t is not None and (t.done, t.sent, t.rate) == (3, 8000, 2000.0)
    pane.object_done(FileDone("ship", "events/2026-01.0123456789ab.db", "shipped", 2000))
    assert (t.done, t.months) == (3, 1)
    pane.ship_ended()
    now[0] += 100  # a late event is measured to the ship's end, not to now
    pane.object_done(FileDone("ship", "manifest/x.db", "shipped", 2000))
    assert t.rate == 12000 / 4


def test_paths_are_shown_relative_to_the_config(tmp_path: Path) -> None:
    from coldkeep.core.base.configremote import RemoteSettings
    from coldkeep.tui.text.fmt import remote_where

    inside = RemoteSettings((tmp_path / "remote").as_uri(), site="db1")
    assert remote_where(inside, tmp_path) == "remote/db1/"
    s3 = RemoteSettings("s3://bucket/prefix", site="db1")
    assert remote_where(s3, tmp_path) == "s3://bucket/prefix/db1"


def test_the_pane_says_a_cold_class_its_cost_and_the_thaws_waiting() -> None:
    from coldkeep.core.base.times import now_ms
    from coldkeep.core.ops.status import ClassShare, ColdState, RemoteState
    from coldkeep.core.store.remoteobjects import RemoteTotals

    pane = RemotePane()
    totals = RemoteTotals(0, 0, 3, 3 << 30, 3, 3 << 30, 0)
    two_hours_ago = now_ms() - 2 * 3_600_000 - 60_000
    cold = ColdState("DEEP_ARCHIVE", 3, 3 << 30, 0.003, 2, 1, two_hours_ago, "up to 12 hours")
    classes = (
        ClassShare("DEEP_ARCHIVE", 3, 3 << 30, 0.003),
        ClassShare("STANDARD", 2, 1 << 30, 0.023),
    )
    pane.state = RemoteState("s3://b/p", "db1", 0, totals, None, cold=cold, classes=classes)
    said = pane._locked()
    assert "DEEP_ARCHIVE 3.0 GiB ~under 0.01 USD, STANDARD 1.0 GiB ~0.02 USD/month" in said, said
    assert "2 thaws asked (the oldest 2h ago; usually up to 12 hours), 1 restore waiting" in said
    pane.state = RemoteState("s3://b/p", "db1", 0, totals, None)
    assert "DEEP_ARCHIVE" not in pane._locked()
