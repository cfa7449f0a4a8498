"""Retention and legal holds in the console: expiry asks with exactly what goes
(and what holds keep), then deletes; holds are placed, listed and released from
their screen; the restore browser says what is held; without a retention the
action is off and says why."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import DataTable, Input, Select, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import Settings, load_settings
from coldkeep.core.base.stream import EventStream
from coldkeep.core.store.audit import history
from coldkeep.core.store.manifest import Manifest
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.panes import LogPane
from coldkeep.tui.console.screens import ConfirmScreen, HelpScreen, HoldsScreen, RestoreScreen
from coldkeep.tui.operations.retention import NO_RETENTION

from consolekit import current_screen, make_app, notices, press_to, settle, until
from remotecheck import PREFIX, SITE, bucket_tier, set_remote
from s3kit import S3Site

SIZE = (120, 36)


def with_retention(settings: Settings, table: str) -> Settings:
    assert settings.config_path is not None
    settings.config_path.write_text(settings.config_path.read_text() + f"\n[retention]\n{table}")
    return load_settings(settings.config_path)


def archive_files(settings: Settings) -> set[str]:
    files = settings.archive_root / "files"
    return {
        p.relative_to(settings.archive_root).as_posix() for p in files.rglob("*") if p.is_file()
    }


def table_rows(screen: Screen[Any], table_id: str) -> list[list[str]]:
    table = screen.query_one(table_id, DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def logged(app: ColdkeepApp) -> str:
    """Every line the Log pane was told."""
    return "\n".join(line for _, line in app.query_one(LogPane).lines)


def held(app: ColdkeepApp) -> list[str]:
    return [r[1] for r in table_rows(current_screen(app), "#holds-table")]


async def test_expire_asks_with_what_goes_and_what_holds_keep_then_deletes(
    archived: Settings,
) -> None:
    settings = with_retention(archived, "files_days = 20\n")
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        before = archive_files(settings)
        await app.archiver.place_hold("unit", "unit-0001", "case 114")
        plan = await app.archiver.expire_plan()
        assert plan.items and plan.held

        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        title = str(app.screen.query_one("#confirm-title", Static).render())
        assert title == f"Expire {len(plan.items)} archive files", "files only: no month is due"
        rows = table_rows(app.screen, "#confirm-table")
        assert [r[0] for r in rows] == [i.path for i in plan.items] + [i.path for i in plan.held]
        assert all(r[1] == "HELD" and "case 114" in r[4] for r in rows[len(plan.items) :])
        warning = str(app.screen.query_one("#confirm-warning", Static).render())
        assert "DELETED" in warning
        await pilot.press("n")
        await settle(pilot)
        assert archive_files(settings) == before, "nothing goes before the operator says yes"

        await pilot.press("e")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert app.last_result.startswith(f"expire: {len(plan.items)} deleted")
        gone = {i.path for i in plan.items if i.kind != "month"}
        assert archive_files(settings) == before - gone
        assert {i.path for i in plan.held} <= archive_files(settings)

        await pilot.press("e")  # nothing left to delete: said, nothing asked
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen) and app.running is None


async def test_the_expire_confirm_says_which_remote_copies_the_bucket_s_lock_keeps(
    settings: Settings, worm: S3Site
) -> None:
    """Shipped to a compliance-locked bucket with a long retention, then the
    retention shortened: the question names the lock's dates, and never says
    the remote copies are deleted."""
    config = settings.config_path
    assert config is not None
    table = bucket_tier(worm, PREFIX, SITE, 'keep_local_days = -1\nobject_lock = "compliance"\n')
    days = "\n[retention]\nfiles_days = {}\nevents_days = 4000\n"
    # Locked for ten years: past the pinned clock, and past the bucket's own.
    set_remote(config.parent, table.table + days.format(4000))
    # Shipped by the real clock: a ship that locks goes by the bucket's.
    shipper = Archiver(load_settings(config), stream=EventStream())
    await shipper.run_pass()
    assert not (await shipper.ship()).problems
    set_remote(config.parent, table.table + days.format(20))
    app = make_app(load_settings(config))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        plan = await app.archiver.expire_plan()
        assert plan.items and len(plan.locked) == len(plan.items)
        await pilot.press("e")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        warning = str(app.screen.query_one("#confirm-warning", Static).render())
        assert "AND the remote tier" not in warning and "no copy" not in warning, warning
        assert f"the bucket's lock keeps the remote copies of all {len(plan.items)} " in warning
        assert "read only by coldkeep cat --expired" in warning
        rows = table_rows(app.screen, "#confirm-table")
        assert all("remote locked until " in r[4] for r in rows), rows
        await pilot.press("n")
        await settle(pilot)


async def test_holds_are_placed_listed_and_released_from_their_screen(
    archived: Settings,
) -> None:
    settings = archived
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("h")
        await settle(pilot)
        assert isinstance(app.screen, HoldsScreen)
        assert held(app) == []
        app.screen.query_one("#hold-scope", Select).value = "path"
        app.screen.query_one("#hold-target", Input).value = "bulk-*/**"
        reason = app.screen.query_one("#hold-reason", Input)
        reason.value = "GDPR request 77"
        reason.focus()
        await pilot.press("enter")
        await settle(pilot)
        assert held(app) == ["path bulk-*/**"]
        assert app.screen.query_one("#hold-target", Input).value == "", "ready for the next"
        [hold] = await app.archiver.holds()
        assert hold.reason == "GDPR request 77"

        # A hold without a reason is not sent.
        app.screen.query_one("#hold-target", Input).value = "unit-0002"
        await pilot.click("#hold-place")
        await settle(pilot)
        assert held(app) == ["path bulk-*/**"]

        # The restore browser says what is held, and by what.
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(current_screen(app), RestoreScreen)
        statuses = {r[1]: r[2] for r in table_rows(app.screen, "#restore-table")}
        bulk = [s for p, s in statuses.items() if p.startswith("bulk-")]
        assert bulk and all(s.endswith("· held") for s in bulk)
        assert not [s for p, s in statuses.items() if not p.startswith("bulk-") and "held" in s]
        await pilot.press("escape")
        await settle(pilot)

        # Released, after the question.
        await pilot.press("h")
        await settle(pilot)
        app.screen.query_one("#holds-table", DataTable).focus()
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(current_screen(app), ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        assert held(app) == [] and await app.archiver.holds() == []
        async with await Manifest.open(settings.archive_root / "coldkeep.db") as manifest:
            actions = [r.action for r in await history(manifest)]
        assert "hold" in actions and "hold-release" in actions


async def test_read_only_shows_holds_and_no_way_to_change_them(settings: Settings) -> None:
    await make_app(settings).archiver.place_hold("unit", "unit-0001", "case 114", ahead=True)
    app = make_app(settings, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await press_to(app, pilot, HoldsScreen, "h")
        assert held(app) == ["unit unit-0001"]
        assert not screen.query(Input) and not screen.query("#hold-place"), "no form"
        status = str(screen.query_one("#holds-status", Static).render())
        assert "read-only" in status
        offered = {b.binding.action for b in screen.active_bindings.values() if b.binding.show}
        assert "release" not in offered, offered
        screen.query_one("#holds-table", DataTable).focus()
        await pilot.press("d")
        await settle(pilot)
        assert current_screen(app) is screen and len(await app.archiver.holds()) == 1


async def test_without_a_retention_expire_is_off_and_help_says_why(settings: Settings) -> None:
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "do-expire" not in {b.id for b in app.query(".action")}
        await pilot.press("e")  # off, and it says why (as a key refused for a lock does)
        await settle(pilot)
        assert f"Expire refused: {NO_RETENTION}" in logged(app)
        assert not isinstance(current_screen(app), ConfirmScreen) and app.running is None
        await app.run_action("expire")  # reached another way (the palette): refused
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen) and app.running is None
        assert app.unavailable("expire") == NO_RETENTION
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert app.screen.unavailable["expire"] == NO_RETENTION


async def test_an_expired_file_is_not_offered_for_restore(archived: Settings) -> None:
    """Expired by retention, a file's entry is a tombstone: the browser shows it
    gone, and restoring it says it is never restored instead of asking."""
    settings = with_retention(archived, "files_days = 20\n")
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        said = notices(app)
        browser = await press_to(app, pilot, RestoreScreen, "r", *"status:expired", "enter")
        expired = table_rows(browser, "#restore-table")
        assert expired and all(r[2] == "expired" for r in expired)
        await pilot.press("r")  # the highlighted one
        await settle(pilot)
        assert current_screen(app) is browser and app.running is None, "nothing asked"
        assert f"{expired[0][1]}: expired by retention, never restored" in said[-1]

        # One expired among those selected: the question is about the others only.
        await pilot.press("slash", "backspace", "enter")  # every entry
        await settle(pilot)
        rows = table_rows(browser, "#restore-table")
        statuses = [r[2] for r in rows]
        table = browser.query_one("#restore-table", DataTable)
        for status in ("expired", "archived"):
            table.move_cursor(row=statuses.index(status))
            await pilot.press("space")
        question = await press_to(app, pilot, ConfirmScreen, "r")
        assert [r[0] for r in table_rows(question, "#confirm-table")] == [
            rows[statuses.index("archived")][1]
        ]
        summary = str(question.query_one("#confirm-summary", Static).render())
        assert "1 selected file expired by retention: not restored." in summary
        await pilot.press("n")
        await settle(pilot)


async def test_t_in_the_restore_browser_thaws_the_selected_cold_files_after_its_plan(
    settings: Settings, s3: S3Site
) -> None:
    """Shipped to DEEP_ARCHIVE, every local copy dropped: ``t`` on a unit's
    files asks with the plan (the objects, their class, the estimate), and yes
    sends one restore request per object; without a cold class ``t`` is off."""
    config = settings.config_path
    assert config is not None
    table = bucket_tier(s3, PREFIX, SITE, 'keep_local_days = 0\nstorage_class = "DEEP_ARCHIVE"\n')
    set_remote(config.parent, table.table)
    shipper = Archiver(load_settings(config), stream=EventStream())
    await shipper.run_pass()
    assert not (await shipper.ship()).problems
    s3.proxy.reset_counts()
    app = make_app(load_settings(config))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, RestoreScreen)
        await pilot.press(*"unit:unit-0000", "enter")
        await settle(pilot)
        await pilot.press("space", "t")
        await settle(pilot)
        assert isinstance(current_screen(app), ConfirmScreen)
        title = str(app.screen.query_one("#confirm-title", Static).render())
        assert title == "Thaw 1 object", title
        rows = table_rows(app.screen, "#confirm-table")
        assert rows[0][:2] == ["to ask", "DEEP_ARCHIVE"], rows
        assert "estimated" in str(app.screen.query_one("#confirm-warning", Static).render())
        assert s3.proxy.counts.get("POST", 0) == 0, "the plan asks for nothing"
        said = notices(app)
        await pilot.press("y")
        await settle(pilot)
        await until(pilot, lambda: app.running is None, "the thaw ended")
        assert s3.proxy.counts.get("POST", 0) == 1
        assert any(n.startswith("thaw: 1 asked") for n in said), said
