"""The Events screen: every event row, live and archived, without restoring
any. A time range and kinds choose the rows; rows per day are charted, rows per
kind drawn as bars, and the rows themselves listed in time order, a page at a
time as the cursor nears the end. A SQL box runs any read-only query over the
same ``events`` table; the result (the rows chosen, or the SQL's) is written to
a JSONL or CSV file; ``R`` puts the chosen archived rows back, asked first, as
``restore-events`` does.

Workers read (the core's query engine, in threads: DuckDB blocks) and post
messages; the handlers own what is shown. One engine is open while the screen
is, for its range; one lock keeps two reads from using it at once (a worker
that was replaced may still be in its thread). The engine is closed when the
screen is: no reader stays on the application's database.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.base import durable
from coldkeep.core.base.errors import ColdkeepError
from coldkeep.core.base.fsutil import fsync_dir
from coldkeep.core.events.overview import Overview, Page, overview, page
from coldkeep.core.events.query import EventsQuery, Rows, TimeRange, parse_range

from ...operations.restore import RESTORE_EVENTS, restore_span
from ...text.fmt import plural
from ...text.rows import lines
from ..charts import NameBars, SeriesChart
from ..footer import FittedFooter
from ..messages import Confirmed
from ..tables import Cell, name_cell
from .confirm import ConfirmScreen
from .export import ExportScreen

PAGE = 500
# Rows left below the cursor when the next page is read.
AHEAD = 50
DEFAULT_DAYS = 90
TIME_KEY = "coldkeep-time"


@dataclass
class Counted(Message):
    """The range's counts (or why there are none)."""

    overview: Overview | None
    error: str = ""


@dataclass
class RowsRead(Message):
    """Rows for the table: ``first`` replaces what it shows."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    more: bool
    first: bool
    error: str = ""


def _cell(value: Any) -> Cell:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (int, float)):
        return value
    return name_cell(str(value))


class EventsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        ("escape", "app.pop_screen", "Back"),
        ("R", "restore", "Restore these rows"),
        ("o", "export", "Export"),
        ("s", "sql", "SQL"),
    ]

    def __init__(self, archiver: Archiver, *, now_s: int, blocked: str | None) -> None:
        super().__init__()
        self.archiver = archiver
        self.blocked = blocked
        start = time.strftime("%Y-%m-%d", time.gmtime(now_s - DEFAULT_DAYS * 86_400))
        self.start, self.end, self.kinds = start, "", list[str]()
        self.engine: EventsQuery | None = None
        self.engine_span: TimeRange | None = None
        self.engine_lock = asyncio.Lock()
        self.counts: Overview | None = None
        self.sql = ""  # the SQL box's query the table shows; "" for the chosen rows
        self.after: tuple[Any, Any] | None = None
        self.result: Rows | None = None  # the SQL's rows not read yet
        self.more = False
        self.reading = False

    def compose(self) -> ComposeResult:
        yield Static(
            "Events: every row, live and archived (nothing is restored to read them)",
            id="events-title",
        )
        with Horizontal(id="events-form"):
            yield Input(self.start, placeholder="from YYYY-MM[-DD]", id="events-from")
            yield Input(placeholder="to YYYY-MM[-DD] (empty: now)", id="events-to")
            yield Input(placeholder="kinds, comma-separated (empty: all)", id="events-kinds")
            yield Button("Show", id="events-show")
        yield Static("reading…", id="events-summary")
        with Horizontal(id="events-charts"):
            yield SeriesChart("rows per day", id="events-days")
            yield NameBars(id="events-kinds-bars")
        table: DataTable[Cell] = DataTable(id="events-rows", cursor_type="row")
        yield table
        yield Input(
            placeholder="SQL over `events` (enter runs it; empty: the rows above)", id="events-sql"
        )
        yield FittedFooter()

    def on_mount(self) -> None:
        # The table has the focus, so the screen's keys work at once (a text
        # field would take the letters); tab reaches the range and kinds.
        self.query_one("#events-rows", DataTable).focus()
        self.reload()

    def on_unmount(self) -> None:
        if self.engine is not None:  # no reader left on the application's database
            engine, self.engine = self.engine, None
            asyncio.get_running_loop().run_in_executor(None, engine.close)

    # reading ------------------------------------------------------------------

    @on(Button.Pressed, "#events-show")
    @on(Input.Submitted, "#events-form Input")
    def _apply(self) -> None:
        self.start = self.query_one("#events-from", Input).value.strip()
        self.end = self.query_one("#events-to", Input).value.strip()
        text = self.query_one("#events-kinds", Input).value
        self.kinds = sorted({k for k in re.split(r"[,\s]+", text) if k})
        self.sql = ""
        self.reload()

    @work(exclusive=True, group="events-read", exit_on_error=False)
    async def reload(self) -> None:
        """The counts, then the first page (or the SQL box's first rows)."""
        try:
            span = parse_range(self.start or None, self.end or None)
            async with self.engine_lock:
                engine = await self._engine(span)
                if not self.sql:
                    counts = await asyncio.to_thread(overview, engine, self.kinds)
                    self.post_message(Counted(counts))
                got = await self._first(engine)
        except (ColdkeepError, OSError) as err:
            self.post_message(Counted(None, str(err)))
            return
        self.post_message(got)

    async def _engine(self, span: TimeRange) -> EventsQuery:
        """The engine for ``span``: the one open, or a new one (the old closed)."""
        if self.engine is not None and self.engine_span == span:
            return self.engine
        if self.engine is not None:
            old, self.engine = self.engine, None
            await asyncio.to_thread(old.close)
        engine = self.archiver.events_query(span, partial=True)
        await asyncio.to_thread(engine.open)
        self.engine, self.engine_span = engine, span
        return engine

    async def _first(self, engine: EventsQuery) -> RowsRead:
        if not self.sql:
            got: Page = await asyncio.to_thread(page, engine, self.kinds, None, PAGE)
            self.after, self.result = got.after, None
            return RowsRead(got.columns, got.rows, got.after is not None, first=True)
        rows = await asyncio.to_thread(engine.run, self.sql)
        self.result = rows
        batch = await asyncio.to_thread(_take, rows)
        return RowsRead(rows.columns, batch, len(batch) == PAGE, first=True)

    @work(exclusive=True, group="events-more", exit_on_error=False)
    async def read_more(self) -> None:
        try:
            async with self.engine_lock:
                engine = self.engine
                if engine is None:
                    return
                if self.result is not None:
                    batch = await asyncio.to_thread(_take, self.result)
                    got = RowsRead(self.result.columns, batch, len(batch) == PAGE, first=False)
                else:
                    more: Page = await asyncio.to_thread(page, engine, self.kinds, self.after, PAGE)
                    self.after = more.after
                    got = RowsRead(more.columns, more.rows, more.after is not None, first=False)
        except (ColdkeepError, OSError) as err:
            got = RowsRead([], [], False, first=False, error=str(err))
        self.post_message(got)

    # showing ------------------------------------------------------------------

    def on_counted(self, message: Counted) -> None:
        summary = self.query_one("#events-summary", Static)
        if message.overview is None:
            summary.update(message.error)
            return
        self.counts = got = message.overview
        plan = self.engine.plan if self.engine is not None else None
        left = f"; left out: {', '.join(plan.left_out)}" if plan and plan.left_out else ""
        months = plural(len(plan.months), "archived month") if plan else ""
        summary.update(
            f"{got.total:,} rows ({got.archived_rows:,} archived) from the live table and "
            f"{months}{left}"
        )
        self.query_one("#events-days", SeriesChart).show(
            [d[5:] for d, _ in got.days], [("rows", [n for _, n in got.days])]
        )
        self.query_one("#events-kinds-bars", NameBars).show(got.kinds)

    def on_rows_read(self, message: RowsRead) -> None:
        self.reading = False
        if message.error:
            self.notify(message.error, title="events", severity="error", markup=False)
            return
        table = self.query_one("#events-rows", DataTable)
        # The rows chosen (not a SQL result) lead with their time, readable.
        at = self._ts_at(message.columns)
        if message.first:
            table.clear(columns=True)
            if at is not None:
                table.add_column("time (UTC)", key=TIME_KEY)
            for name in message.columns:
                table.add_column(name, key=name)
        start = table.row_count
        with self.app.batch_update():
            for i, row in enumerate(message.rows):
                cells = list(map(_cell, row))
                if at is not None:
                    cells.insert(0, self._time(row[at]))
                table.add_row(*cells, key=str(start + i))
        self.more = message.more

    def _ts_at(self, columns: list[str]) -> int | None:
        if self.sql or self.engine is None or self.engine.schema.ts not in columns:
            return None
        return columns.index(self.engine.schema.ts)

    def _time(self, value: Any) -> str:
        """A time stamp in the table's units as UTC, to the second."""
        assert self.engine is not None
        fmt = self.engine.schema.ts_format
        if fmt == "iso" or not isinstance(value, (int, float)):
            return str(value)
        secs = value / 1000 if fmt == "ms" else value
        try:
            return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(secs))
        except (OverflowError, OSError, ValueError):  # a time no calendar holds
            return str(value)

    @on(DataTable.RowHighlighted, "#events-rows")
    def _near_end(self, event: DataTable.RowHighlighted) -> None:
        table = event.data_table
        if self.more and not self.reading and event.cursor_row >= table.row_count - AHEAD:
            self.reading = True
            self.read_more()

    # the SQL box, export, restore ----------------------------------------------

    def action_sql(self) -> None:
        self.query_one("#events-sql", Input).focus()

    @on(Input.Submitted, "#events-sql")
    def _run_sql(self, event: Input.Submitted) -> None:
        self.sql = event.value.strip()
        self.query_one("#events-summary", Static).update(
            f"SQL: {self.sql}" if self.sql else "reading…"
        )
        self.reload()

    def action_export(self) -> None:
        self.ask_export()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def ask_export(self) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        path = await self.app.push_screen_wait(
            ExportScreen(Path(os.getcwd()) / f"coldkeep-events-{stamp}.jsonl")
        )
        if path is None:
            return
        try:
            async with self.engine_lock:
                if self.engine is None:
                    return
                count = await asyncio.to_thread(_export, self.engine, self._result_sql(), path)
        except (ColdkeepError, OSError) as err:
            self.notify(str(err), title="export", severity="error", markup=False)
            return
        self.notify(f"{plural(count, 'row')} written to {path}", title="export")

    def _result_sql(self) -> str:
        """The SQL of what the table shows, every row of it."""
        if self.sql:
            return self.sql
        assert self.engine is not None
        schema = self.engine.schema
        kinds = ", ".join("'" + k.replace("'", "''") + "'" for k in self.kinds)
        where = f' WHERE "{schema.kind}" IN ({kinds})' if self.kinds else ""
        return f'SELECT * FROM events{where} ORDER BY "{schema.ts}", "{schema.pk}"'

    def action_restore(self) -> None:
        if self.blocked is not None:
            self.notify(f"Restore: {self.blocked}", severity="warning")
            return
        if self.sql:
            self.notify(
                "restore puts back the rows chosen by range and kinds, not a SQL query's: "
                "empty the SQL box first",
                severity="warning",
            )
            return
        self.confirm_restore()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def confirm_restore(self) -> None:
        got, span = self.counts, self.engine_span
        if got is None or span is None or not got.archived_rows:
            self.notify("no archived row is in the range and kinds chosen", severity="warning")
            return
        n = got.archived_rows
        kinds = ", ".join(self.kinds) or "every kind"
        ok = await self.app.push_screen_wait(
            ConfirmScreen(
                f"Restore {n:,} event {'row' if n == 1 else 'rows'}",
                f"of {kinds}, from {self.start or 'the first'} through {self.end or 'now'}, "
                "into the live table, held from passes for the hold time.",
                columns=("Month", "Rows"),
                rows=got.archived,
                warning="A live row with the same id is never overwritten: it is reported.",
                confirm="Restore",
            )
        )
        if ok:
            self.post_message(
                Confirmed("restore", RESTORE_EVENTS.name, restore_span(self.kinds, span))
            )


def _take(rows: Rows) -> list[tuple[Any, ...]]:
    return next(rows.batches(PAGE), [])


def _export(engine: EventsQuery, sql: str, path: Path) -> int:
    """Every row of ``sql`` to ``path`` (CSV for a .csv name, else JSON lines),
    through a temporary name: a file at ``path`` is whole or not there."""
    rows = engine.run(sql)
    fmt = "csv" if path.suffix.lower() == ".csv" else "json"
    count = 0

    def counted() -> Iterator[list[tuple[Any, ...]]]:
        nonlocal count
        for batch in rows.batches():
            count += len(batch)
            yield batch

    tmp = path.with_name(f".{path.name}.partial")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as out:
            for line in lines(fmt, rows.columns, counted()):
                out.write(line + "\n")
            out.flush()
            durable.fsync(out.fileno(), "export.data")
        os.replace(tmp, path)
        fsync_dir(path.parent, root=path.parent, site="export.placed")
    finally:
        tmp.unlink(missing_ok=True)
    return count
