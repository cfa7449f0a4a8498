"""The restore browser, driven through the keyboard with Textual's Pilot on a real
demo site: typing filters (and fires nothing), the table's keys act once it has
focus, and a restore shows up in the browser without reopening it."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual import events
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static, TabbedContent
from textual.widgets._data_table import default_cell_formatter

from coldkeep.core.base.config import Settings
from coldkeep.core.files.catalog import Catalog, CatalogRow, load_catalog, parse_query
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.screens import ConfirmScreen, RestoreScreen
from coldkeep.tui.console.screens import restore as restore_screen

from consolekit import archive_all, current_screen, make_app, notices, settle, until

SIZE = (120, 36)
WANTED = "unit-0005/runs/part-03.jsonl"


async def open_browser(app: ColdkeepApp, pilot: Pilot[None]) -> RestoreScreen:
    """Open the browser (on a site archived already: ``archived``)."""
    await settle(pilot)
    await pilot.press("r")
    await settle(pilot)
    assert isinstance(app.screen, RestoreScreen)
    return app.screen


def shown(screen: RestoreScreen) -> list[tuple[str, str]]:
    """(path, status) of every row the table shows."""
    table = screen.query_one("#restore-table", DataTable)
    return [(str(r[1]), str(r[2])) for r in map(table.get_row_at, range(table.row_count))]


def count_line(screen: RestoreScreen) -> str:
    return str(screen.query_one("#restore-count", Static).render())


def nothing_fired(app: ColdkeepApp, screen: RestoreScreen) -> bool:
    """No dialog open, nothing running, restored or copied."""
    results = screen.query_one("#restore-results", DataTable)
    return (
        app.screen is screen and app.running is None and not results.display and app.clipboard == ""
    )


async def test_typing_filters_and_fires_no_binding(archived: Settings) -> None:
    app = make_app(archived)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        # "retry": r restores and y copies once the table has focus; in the
        # filter they are letters.
        await pilot.press(*"retry")
        await settle(pilot)
        assert nothing_fired(app, screen)
        assert screen.query_one("#restore-filter", Input).value == "retry"
        assert count_line(screen).startswith("0 of 21 entries match")

        await pilot.press(*["backspace"] * 5, *"runs/part-03 ")
        await settle(pilot)
        assert nothing_fired(app, screen)
        assert shown(screen) == [(WANTED, "archived")]

        # Down leaves the filter for the table, where the keys act again.
        await pilot.press("down", "y")
        await settle(pilot)
        # A line the system's tools run: gunzip, or tar then gunzip for a member.
        assert "gunzip -c" in app.clipboard and "part-03" in app.clipboard
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        title = str(app.screen.query_one("#confirm-title", Static).render())
        assert title == "Restore 1 file"
        listed = app.screen.query_one("#confirm-table", DataTable)
        assert [str(listed.get_row_at(i)[0]) for i in range(listed.row_count)] == [WANTED]
        await pilot.press("n")
        await settle(pilot)

        # `/` back to the filter, Tab out of it: the table again.
        await pilot.press("slash")
        assert app.focused is screen.query_one("#restore-filter", Input)
        await pilot.press("tab", "space")
        await settle(pilot)
        assert "1 selected" in count_line(screen)


async def test_a_restore_shows_its_new_status_and_keeps_the_filter(archived: Settings) -> None:
    app = make_app(archived)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        # r typed before the filter answered (it is held in its thread until
        # then): the restore asked about is the filter's row, not the row
        # highlighted in the list it replaces (CI restored that one once).
        catalog = screen.catalog
        assert catalog is not None
        held, filter_rows = threading.Event(), catalog.filter

        def held_filter(*args: Any, **kwargs: Any) -> tuple[int, list[CatalogRow], bool]:
            assert held.wait(30), "the test never let the filter go"
            return filter_rows(*args, **kwargs)

        catalog.filter = held_filter  # type: ignore[method-assign]
        await pilot.press(*"runs/part-03", "enter", "r")
        held.set()
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(pilot)
        assert current_screen(app) is screen
        results = screen.query_one("#restore-results", DataTable)
        assert [str(c) for c in results.get_row_at(0)[:2]] == ["restored", WANTED]

        assert screen.query_one("#restore-filter", Input).value == "runs/part-03"
        assert shown(screen) == [(WANTED, "restored")]
        assert "restored" in str(screen.query_one("#restore-preview", Static).render())

        await pilot.press("slash", "ctrl+u", *"status:restored")
        await settle(pilot)
        assert shown(screen) == [(WANTED, "restored")]


async def test_r_before_the_list_has_loaded_says_so_and_is_not_kept(
    archived: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore asked for before the manifest's list has loaded (held in its
    thread until then) is refused in a notice, and not carried out later."""
    held, load = threading.Event(), load_catalog

    def held_load(manifest: Path, **options: Any) -> Catalog:
        assert held.wait(30), "the test never let the list load"
        return load(manifest, **options)

    monkeypatch.setattr(restore_screen, "load_catalog", held_load)
    app = make_app(archived)
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await until(pilot, lambda: isinstance(app.screen, RestoreScreen), "the browser opened")
        await pilot.press("enter", "r")
        await pilot.pause()
        assert "the list is still loading: press it again once it shows" in said
        held.set()
        await settle(pilot)
        assert isinstance(app.screen, RestoreScreen), "no question asked after the list loaded"


async def test_a_target_inside_the_live_tree_is_refused_before_asking(archived: Settings) -> None:
    # The next pass would archive what a restore put there, as new files.
    app = make_app(archived)
    said = notices(app)
    inside = archived.live_root / "restored-here"
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"runs/part-03", "enter")
        screen.query_one("#restore-to", Input).value = str(inside)
        await settle(pilot)
        assert "inside live_root" in str(screen.query_one("#restore-preview", Static).render())
        screen.query_one("#restore-table", DataTable).focus()
        await pilot.press("r")
        await settle(pilot)
        assert current_screen(app) is screen, "a restore into the live tree was asked"
        assert any("inside live_root" in line for line in said), said
    assert not inside.exists()


async def test_an_unknown_status_names_the_statuses(archived: Settings) -> None:
    app = make_app(archived)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"status:bogus")
        await settle(pilot)
        line = count_line(screen)
        assert "status:bogus" in line
        assert all(s in line for s in ("archived", "stale", "restored", "missing"))


async def test_a_superseded_filter_result_never_replaces_the_newer_one(
    archived: Settings,
) -> None:
    """Filtering runs in a thread: a slow result for the text as it was may land
    after the result for the text as it is. The newer one stays."""
    from coldkeep.tui.console.screens.restore import Filtered

    app = make_app(archived)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        await pilot.press(*"part-03")
        await settle(pilot)
        current = shown(screen)
        assert current and all("part-03" in path for path, _ in current)
        assert screen.catalog is not None
        _, everything, _ = screen.catalog.filter(parse_query(""), limit=10**6)
        screen.post_message(Filtered("part-0", len(everything), everything))  # late, stale
        await settle(pilot)
        assert shown(screen) == current
        assert count_line(screen).startswith(f"{len(current)} of")


def offered(screen: RestoreScreen) -> set[str]:
    """The actions the footer offers now."""
    return {b.binding.action for b in screen.active_bindings.values() if b.binding.show}


async def test_an_invalid_filter_lists_nothing_and_says_why(archived: Settings) -> None:
    app = make_app(archived)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        assert len(shown(screen)) == 21
        app.post_message(events.Paste("after:notadate"))  # pasted: no valid text on the way
        await settle(pilot)
        assert screen.query_one("#restore-filter", Input).value == "after:notadate"
        assert shown(screen) == [], "an error lists nothing, not what came before"
        line = count_line(screen)
        assert "after:notadate" in line and "nothing listed" in line
        await pilot.press("down", "r")  # nothing listed: nothing to restore
        await settle(pilot)
        assert nothing_fired(app, screen)


async def test_slash_is_offered_where_it_leads_to_the_filter(archived: Settings) -> None:
    """In the filter `/` is a character and the footer does not offer it; from the
    table (or the Events tab) it leads back to the filter, its text selected."""
    app = make_app(archived)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        field = screen.query_one("#restore-filter", Input)
        assert app.focused is field and "focus_filter" not in offered(screen)
        await pilot.press(*"runs/")
        assert field.value == "runs/"
        await pilot.press("down")
        await settle(pilot)
        assert "focus_filter" in offered(screen)
        await pilot.press("slash", *"part-03")
        await settle(pilot)
        assert field.value == "part-03", "typing after / starts a new filter"

        screen.query_one("#restore-tabs", TabbedContent).active = "restore-events"
        screen.query_one("#events-months", DataTable).focus()
        await settle(pilot)
        await pilot.press("slash", "end", *" runs")
        await settle(pilot)
        assert app.focused is field and field.value == "part-03 runs"
        assert screen.query_one("#restore-tabs", TabbedContent).active == "restore-files"


async def test_r_in_the_log_search_is_a_letter(settings: Settings) -> None:
    """r opens the browser at once (a priority key), except where a text field
    takes letters."""
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        search = app.query_one("#log-search", Input)
        search.focus()
        await pilot.press(*"error")
        await settle(pilot)
        assert search.value == "error" and not isinstance(app.screen, RestoreScreen)


async def test_names_are_shown_escaped_and_never_read_as_markup(settings: Settings) -> None:
    """A name's ESC would reach the terminal, its "[bold]" would style the row
    and vanish: the browser shows both as written."""
    odd = "unit-0000/esc\x1b[2J[bold]x\udce9.log"
    path = os.fsencode(settings.live_root / odd)
    with open(path, "wb") as f:
        f.write(b"odd\n")
    os.utime(path, ns=(0, 0))
    app = make_app(settings)
    async with app.run_test(size=SIZE) as pilot:
        await archive_all(app, pilot)
        screen = await open_browser(app, pilot)
        await pilot.press(*"esc")
        await settle(pilot)
        table = screen.query_one("#restore-table", DataTable)
        [row] = [table.get_row_at(i) for i in range(table.row_count)]
        drawn = default_cell_formatter(row[1])
        assert isinstance(drawn, Text)
        assert drawn.plain == "unit-0000/esc\\x1b[2J[bold]x\\xe9.log", drawn.plain
        assert not drawn.spans, "no style from the name"


async def test_the_browser_builds_the_index_of_paths_its_filter_reads(
    archived: Settings,
) -> None:
    """Once the first page shows, the browser's worker builds the index of paths
    beside the manifest; a filter typed then is answered from it, archived
    entries it does not cover yet included."""
    app = make_app(archived)
    async with app.run_test(size=SIZE) as pilot:
        said = notices(app)
        screen = await open_browser(app, pilot)
        # Waited for by name: an empty list would wait for every worker (the
        # app's watchers run for its life).
        if loading := [w for w in app.workers if w.group == "catalog"]:
            await app.workers.wait_for_complete(loading)
        catalog = screen.catalog
        assert catalog is not None and catalog.paths is not None
        assert catalog.paths.path == archived.archive_root / "coldkeep.paths"
        found = catalog.paths.candidates(b"runs/part-03", cap=10)
        assert found is not None and len(found[0]) == 1
        await pilot.press(*"runs/part-03")
        await settle(pilot)
        assert shown(screen) == [(WANTED, "archived")]
        assert not [n for n in said if "index of paths" in n]


def test_a_remote_only_file_in_a_cold_class_is_shown_to_need_a_thaw() -> None:
    from coldkeep.core.files.catalog import CatalogRow
    from coldkeep.tui.console.screens.restore import source

    row = CatalogRow(7, "a/b.jsonl", "a", "0" * 64, "archived", 10, 0, 0,
                     "files/a/2026-01.0123456789ab.tar", 512, copies="remote")  # fmt: skip
    assert "thaw it first (usually up to 12 hours; t shows what it costs)" in source(
        row, "DEEP_ARCHIVE"
    )
    assert "in DEEP_ARCHIVE" in source(row, "DEEP_ARCHIVE")
    assert "thaw" not in source(row) and "thaw" not in source(row, None)
    local = CatalogRow(8, "a/c.jsonl", "a", "0" * 64, "archived", 10, 0, 0, "files/a/c.gz")
    assert "thaw" not in source(local, "GLACIER")


async def test_t_is_off_without_a_cold_class_and_help_says_why(archived: Settings) -> None:
    app = make_app(archived)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_browser(app, pilot)
        screen.query_one("#restore-table", DataTable).focus()
        await pilot.press("t")
        await settle(pilot)
        assert not isinstance(current_screen(app), ConfirmScreen)
        why = "the remote's storage_class is not cold: nothing to thaw"
        assert screen.unavailable()["thaw"] == why
