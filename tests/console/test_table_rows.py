"""The console's tables show each row whole from the first frame it is drawn in,
whenever that frame comes."""

from __future__ import annotations

from textual.app import App, ComposeResult

from coldkeep.tui.console.widgets.tables import MeasuredTable, keyed_table, name_cell, sync_table


class _Table(App[None]):
    def compose(self) -> ComposeResult:
        yield keyed_table("t", [("Finding", "kind"), ("Path", "path")])


async def test_a_frame_drawn_before_the_table_measures_its_rows_shows_them_whole() -> None:
    """DataTable measures new rows when its queue next runs empty and keeps the
    lines it drew: a frame in between (the frame timer first on a loaded
    machine) showed the path cut at "Path" until the terminal was resized."""
    app = _Table()
    async with app.run_test(size=(60, 6)) as pilot:
        await pilot.pause()
        table = app.query_one("#t", MeasuredTable)
        sync_table(table, {"a": ("orphan", name_cell("unit-0000/interrupted"))})
        # No await: the table has not had its idle turn yet; draw its first row now.
        drawn = table.render_line(1).text
        assert "unit-0000/interrupted" in drawn, drawn
        await pilot.pause()
        assert "unit-0000/interrupted" in table.render_line(1).text


async def test_a_cell_that_grows_is_drawn_whole_in_the_next_frame() -> None:
    """The same for a cell updated to a wider value (a size that grew, a path
    found later): its column widens before any frame draws it."""
    app = _Table()
    async with app.run_test(size=(60, 6)) as pilot:
        table = app.query_one("#t", MeasuredTable)
        sync_table(table, {"a": ("orphan", name_cell("u"))})
        await pilot.pause()
        sync_table(table, {"a": ("orphan", name_cell("unit-0000/interrupted"))})
        drawn = table.render_line(1).text
        assert "unit-0000/interrupted" in drawn, drawn
