"""The fleet view's Events screen (``e``) over a folder remote holding the fleet's
lake (tests/lakekit.py: two sites, two months, one month in two generations):
the chart and bars count each site's rows as the newest files hold them, a
range of months narrows them, SQL typed in the box fills the table (its first
500 rows, said so), a SQL that writes or reads beyond the lake is refused in
one line, escape goes back to the fleet view and closes the lake. A prefix
without a lake says so, and a lake without a ``kind`` column says that."""

from __future__ import annotations

from pathlib import Path

import duckdb
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Input

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.files.catalog import CatalogRow
from coldkeep.core.remote.lakelayout import RAW, lake_key
from coldkeep.tui.console.fleet.app import FleetApp
from coldkeep.tui.console.fleet.events import FleetEventsScreen
from coldkeep.tui.console.fleet.matches import row_key
from coldkeep.tui.console.fleet.view import FleetScreen

from consolekit import settle
from lakekit import COUNTS, GEN, build, folder_put, webhooks

SIZE = (140, 40)


def lake(tmp_path: Path) -> RemoteSettings:
    root = tmp_path / "bucket"
    build(folder_put(root), tmp_path)
    return RemoteSettings(root.as_uri())


def said(screen: FleetEventsScreen, selector: str) -> str:
    """What a line, a chart or a set of bars shows, as text."""
    return str(screen.query_one(selector, Widget).render())


def cells(screen: FleetEventsScreen) -> list[list[str]]:
    table = screen.query_one("#events-rows", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def opened(app: FleetApp, pilot: Pilot[None]) -> FleetEventsScreen:
    """The fleet view settled, then ``e`` from its table (the filter takes
    letters): the Events screen, read."""
    await settle(pilot)
    await pilot.press("escape", "e")
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, FleetEventsScreen), type(screen).__name__
    return screen


def focused(pilot: Pilot[None]) -> Widget | None:
    """The focused widget now (through a call: no narrowing carried past a key)."""
    return pilot.app.focused


async def sql(pilot: Pilot[None], text: str) -> None:
    """``text`` run from the SQL box (``s`` goes there from the table; ctrl+u
    empties it)."""
    box = pilot.app.screen.query_one("#lake-sql", Input)
    if isinstance(pilot.app.focused, DataTable):
        await pilot.press("s")
        assert focused(pilot) is box, "s goes to the SQL box"
    else:
        pilot.app.screen.set_focus(box)  # from a field, where s is a letter
    await pilot.press("ctrl+u", *text, "enter")
    await settle(pilot)


def site_total(site: str) -> int:
    return sum(n for (s, _), n in COUNTS.items() if s == site)


async def test_the_fleets_rows_charted_queried_and_refused_in_one_line(tmp_path: Path) -> None:
    app = FleetApp(lake(tmp_path), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(app, pilot)
        total = sum(COUNTS.values())
        assert said(screen, "#events-summary").startswith(
            f"{total} rows from 2 sites, 2 months (2026-02 to 2026-03): 4 files"
        ), "the older generation of 2024's March is not read"
        assert f"2026-02: {30 + 20}" in said(screen, "#events-days")
        assert f"2026-03: {12 + 9}" in said(screen, "#events-days")
        bars = said(screen, "#lake-sites").splitlines()
        assert bars[0] == "rows per site"
        assert bars[1].startswith("2024 ") and bars[1].endswith(f" {site_total('2024')}")
        assert bars[2].startswith("web-1 ") and bars[2].endswith(f" {site_total('web-1')}")
        hooks = sum(webhooks(n) for n in COUNTS.values())
        kinds = said(screen, "#lake-kinds")
        assert f"{total - hooks}" in kinds.splitlines()[1] and "login" in kinds

        await sql(pilot, "SELECT site, count(*) AS n FROM events GROUP BY site ORDER BY site")
        assert cells(screen) == [
            ["2024", str(site_total("2024"))],
            ["web-1", str(site_total("web-1"))],
        ]
        assert said(screen, "#lake-answer") == "2 rows"

        # More rows than the table holds: the first 500, said so.
        await sql(pilot, "SELECT a.id FROM events a, events b")
        assert len(cells(screen)) == 500
        assert said(screen, "#lake-answer") == "the first 500 rows shown: the query has more"

        for bad, why in (
            ("DROP TABLE events", "only SELECT is run"),
            ("SELECT * FROM read_csv('/etc/passwd')", "reads the events view"),
        ):
            await sql(pilot, bad)
            line = said(screen, "#lake-answer")
            assert why in line and "\n" not in line and "Traceback" not in line, line
            assert cells(screen) == []

        # A range of months: March alone, read again.
        screen.set_focus(screen.query_one("#events-from", Input))
        await pilot.press(*"2026-03", "enter")
        await settle(pilot)
        assert said(screen, "#events-summary").startswith(f"{12 + 9} rows from 2 sites, 1 month")
        await pilot.press("ctrl+u", *"2026-13", "enter")
        await settle(pilot)
        assert said(screen, "#events-summary").startswith("--from '2026-13': ")
        await sql(pilot, "SELECT 1 FROM events")
        assert said(screen, "#lake-answer").startswith("the range of months is not one")
        screen.set_focus(screen.query_one("#events-from", Input))

        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        assert screen.reader.closed


async def test_the_selected_files_sites_alone_and_a_site_without_a_lake(tmp_path: Path) -> None:
    remote = lake(tmp_path)
    app = FleetApp(remote, tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # A file of web-1 selected in the view (as space selects one listed).
        row = CatalogRow(1, "a.log", "u", "0" * 64, "archived", 1, 0, 0, "a.log.gz")
        app.view.rows = {row_key("web-1", 1): ("web-1", row)}
        app.view.selected = {row_key("web-1", 1)}
        screen = await opened(app, pilot)
        assert said(screen, "#events-title").startswith("Events of the site web-1: ")
        assert said(screen, "#events-summary").startswith("29 rows from 1 site, 2 months")
        assert "2024" not in said(screen, "#lake-sites")
        await pilot.press("escape")
        await app.push_screen(FleetEventsScreen(remote, ["web-9"]))
        await settle(pilot)
        assert isinstance(app.screen, FleetEventsScreen)
        line = said(app.screen, "#events-summary")
        assert line.startswith("web-9: no such site in the lake under ") and "\n" not in line


async def test_no_lake_and_a_lake_without_kinds_say_so(tmp_path: Path) -> None:
    root = tmp_path / "bucket"
    root.mkdir()
    app = FleetApp(RemoteSettings(root.as_uri()), tmp_path / "cache")
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(app, pilot)
        assert said(screen, "#events-summary").startswith(
            f"no site has a lake under {root.as_uri()}/lake/events/: set [lake] enabled = true"
        )
        await sql(pilot, "SELECT count(*) FROM events")
        assert said(screen, "#lake-answer").startswith("no site has a lake under ")

        # A site whose events table has no kind column.
        path = root / lake_key("kindless", "2026-01", GEN, "ab" * 32)
        path.parent.mkdir(parents=True)
        with duckdb.connect() as con:
            con.execute(
                f"COPY (SELECT i AS id, i AS ts, NULL::VARCHAR AS {RAW} FROM range(7) r(i)) "
                f"TO '{path}' (FORMAT parquet)"
            )
        await pilot.press("escape", "e")
        await settle(pilot)
        assert isinstance(app.screen, FleetEventsScreen)
        assert said(app.screen, "#events-summary").startswith("7 rows from 1 site, 1 month")
        assert said(app.screen, "#lake-kinds") == "rows per kind\nthe lake has no kind column"
