"""The console's tables. Keyed, diffed updates (Dolphie's processlist): rows are
added, updated cell by cell, or removed by key, never cleared and refilled, so
the cursor, the scroll position and the selection survive every refresh. And a
table's columns are as wide as what it holds from the first frame that draws it
(``MeasuredTable``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from ...text.fmt import shown

Cell = str | Text | int | float


def name_cell(name: str) -> Text:
    """A file's name (or a line holding names) for a cell or a preview: its
    control characters and undecodable bytes escaped (``shown``), and never read
    as Rich markup (a ``str`` cell would be: ``[bold]`` in a name is the name's)."""
    return Text(shown(name))


def value_cell(value: object) -> Cell:
    """A value a query gave, for a cell: a number as it is (right-aligned,
    sorted as a number), bytes in hex, text as ``name_cell`` shows it, NULL
    empty."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (int, float)):
        return value
    return name_cell(str(value))


def _plain(cell: object) -> object:
    """A cell's sort key: a ``Text`` sorts by its text, like a ``str``."""
    return cell.plain if isinstance(cell, Text) else cell


def _width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else cell_len(str(cell))


class MeasuredTable(DataTable[Cell]):
    """A DataTable whose columns are widened for a new row, or a wider cell, at
    once.

    DataTable measures new rows and widened cells only when its own message queue
    next runs empty, and keeps the lines it drew until its size changes: a frame
    drawn in between (a loaded machine, the frame timer first) cached each row cut
    at the old widths, and the table showed them cut until the terminal was
    resized (the console in tmux, 1 start in 20 beside a busy test run)."""

    def add_row(
        self,
        *cells: Cell,
        height: int | None = 1,
        key: str | None = None,
        label: str | Text | None = None,
    ) -> RowKey:
        row_key = super().add_row(*cells, height=height, key=key, label=label)
        for column, cell in zip(self.ordered_columns, cells, strict=False):
            column.content_width = max(column.content_width, _width(cell))
        return row_key

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        # Every new row's cells were measured as it was added (add_row): only
        # one whose height or label DataTable works out is measured again.
        # Each cell measured twice kept the fleet view's screen from answering
        # for 125 ms when a filter listed 500 new rows.
        again = [
            key
            for key in new_rows
            if (row := self.rows.get(key)) is not None
            and (row.auto_height or row.label is not None)
        ]
        super()._update_dimensions(again)

    def update_cell(
        self,
        row_key: RowKey | str,
        column_key: ColumnKey | str,
        value: Cell,
        *,
        update_width: bool = False,
    ) -> None:
        super().update_cell(row_key, column_key, value, update_width=update_width)
        if update_width:
            column = self.columns[
                ColumnKey(column_key) if isinstance(column_key, str) else column_key
            ]
            column.content_width = max(column.content_width, _width(value))


def keyed_table(
    table_id: str, columns: Sequence[tuple[str, str]], *, zebra_stripes: bool = False
) -> DataTable[Cell]:
    """A row-cursor table whose columns, given as (label, key), carry the keys
    ``sync_table`` updates cells by."""
    table = MeasuredTable(id=table_id, cursor_type="row", zebra_stripes=zebra_stripes)
    for label, key in columns:
        table.add_column(label, key=key)
    return table


def cursor_key(table: DataTable[Cell]) -> str | None:
    """The key of the row under ``table``'s cursor; None when it has no rows."""
    if not table.row_count:
        return None
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


# Rows removed at once past which a table is rebuilt rather than trimmed.
REBUILD_AT = 64


def _rebuild(
    table: DataTable[Cell], rows: Mapping[str, Sequence[Cell]], sort_by: str | None, reverse: bool
) -> None:
    at = cursor_key(table)
    with table.app.batch_update():
        table.clear()
        for key, cells in rows.items():
            table.add_row(*cells, key=key)
        if sort_by is not None and rows:
            column = next(k for k in table.columns if k.value == sort_by)
            table.sort(column, key=_plain, reverse=reverse)
        if at is not None and at in rows:
            table.move_cursor(row=table.get_row_index(at))


def sync_table(
    table: DataTable[Cell],
    rows: Mapping[str, Sequence[Cell]],
    *,
    sort_by: str | None = None,
    reverse: bool = False,
) -> None:
    """Make ``table`` hold exactly ``rows`` (key -> cells). When rows were added
    and ``sort_by`` names a column, the table is re-sorted on it.

    Adding or removing a row, or widening a column, re-lays the whole screen
    out; a cell updated within its column's width only repaints. A change that
    removes most of a big table clears it and adds ``rows`` afresh (the cursor
    kept on its row where that stays): each ``remove_row`` re-indexes every row
    after it, and thousands of them froze the screen for seconds."""
    columns = list(table.columns)
    wanted = set(rows)
    added = False
    gone_keys = [k for k in table.rows if k.value not in wanted]
    if len(gone_keys) > REBUILD_AT and 2 * len(gone_keys) > table.row_count:
        _rebuild(table, rows, sort_by, reverse)
        return
    with table.app.batch_update():
        for gone in gone_keys:
            table.remove_row(gone)
        for key, cells in rows.items():
            row_key = RowKey(key)
            if row_key in table.rows:
                current = table.get_row(row_key)
                for column, old, new in zip(columns, current, cells, strict=True):
                    if old != new:
                        wider = _width(new) > table.columns[column].content_width
                        table.update_cell(row_key, column, new, update_width=wider)
            else:
                table.add_row(*cells, key=key)
                added = True
        if added and sort_by is not None:
            column = next(k for k in table.columns if k.value == sort_by)
            table.sort(column, key=_plain, reverse=reverse)
