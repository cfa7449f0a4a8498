"""The console's tables show each row whole from the first frame it is drawn in,
whenever that frame comes."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.coordinate import Coordinate

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


async def test_a_table_narrowed_from_thousands_of_rows_keeps_the_cursor_on_its_row() -> None:
    """A filter that narrows 5,000 rows to a few rebuilds the table in one go
    (thousands of remove_row calls froze the fleet view for seconds); the
    highlighted row, where it stays, keeps the cursor, and the rows are the
    ones asked for, in order."""
    app = _Table()
    async with app.run_test(size=(60, 12)) as pilot:
        table = app.query_one("#t", MeasuredTable)
        many = {f"k{i:05}": ("f", name_cell(f"p{i:05}")) for i in range(5000)}
        sync_table(table, many)
        await pilot.pause()
        table.move_cursor(row=table.get_row_index("k04000"))
        few = {k: many[k] for k in ("k00001", "k04000", "k04999")}
        sync_table(table, few, sort_by="path")
        await pilot.pause()
        keys = [
            table.coordinate_to_cell_key(Coordinate(i, 0)).row_key.value
            for i in range(table.row_count)
        ]
        assert keys == ["k00001", "k04000", "k04999"]
        assert table.cursor_row == 1
        sync_table(table, {"k04000": ("f", name_cell("p04000"))})  # a small change trims
        assert table.row_count == 1 and table.cursor_row == 0
