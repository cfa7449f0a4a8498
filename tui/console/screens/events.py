"""The Events screen: every event row, live and archived, without restoring
any. A time range and kinds choose the rows; rows per day are charted, rows per
kind drawn as bars, and the rows themselves listed in id order, a page at a
time as the cursor nears the end. A SQL box runs any read-only query over the
same ``events`` table; the result (the rows chosen, or the SQL's) is written to
a JSONL or CSV file; ``R`` puts the chosen archived rows back, asked first, as
``restore-events`` does.

Workers read through one ``EventsReader`` (eventsread.py: one engine, one
thread at a time) and post what they read; the handlers own what is shown,
and drop an answer to a choice the operator has since replaced. Leaving the
screen stops a read in progress and closes the engine.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.errors import ColdkeepError
from coldkeep.core.base.times import DAY_S
from coldkeep.core.events.eventschema import EventSchema
from coldkeep.core.events.overview import Overview
from coldkeep.core.events.query import parse_range

from ...operations.restore import RESTORE_EVENTS, restore_span
from ...operations.spec import ConsoleAction
from ...text.fmt import plural
from ..kit.actions import bindings
from ..kit.messages import Confirmed
from ..widgets.charts import NameBars, SeriesChart
from ..widgets.fields import Field
from ..widgets.footer import FittedFooter
from ..widgets.tables import MeasuredTable, value_cell
from .confirm import ConfirmScreen
from .eventsread import Choice, EventsReader, Read
from .export import ExportScreen
from .help import KeyedScreen

# Rows left below the cursor when the next page is read.
AHEAD = 50
DEFAULT_DAYS = 90
TIME_KEY = "coldkeep-time"


@dataclass
class RowsRead(Message):
    """What a read got (``read``), or why it failed (``error``)."""

    choice: Choice
    read: Read | None
    first: bool
    error: str = ""


class EventsScreen(KeyedScreen):
    KEYS = (
        ConsoleAction("app.pop_screen", "escape", "Back", "Close the Events screen"),
        ConsoleAction(
            "restore",
            "R",
            "Restore these rows",
            "Put the archived rows of the range and kinds chosen back into the live table "
            "(asks first, as restore-events)",
        ),
        ConsoleAction(
            "export",
            "o",
            "Export",
            "Write every row shown (the range and kinds, or the SQL's answer) to a JSONL or "
            "CSV file",
        ),
        # Acted on as it is read (priority), and the box focused at once, so
        # that what is typed right after s lands in the box, not on the rows;
        # in a text field s is a letter.
        ConsoleAction(
            "sql",
            "s",
            "SQL",
            "To the SQL box: read-only SQL over `events`; enter runs it",
            at_once=True,
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(KEYS)]
    HELP_TITLE = "Events: keys"
    HELP_FOOT = (
        "Tab moves between the range (from, to: YYYY-MM or YYYY-MM-DD), the kinds, Show, "
        "the rows and the SQL box; enter in a field shows what it chose. The rows are read "
        "a page ahead of the cursor. esc closes this."
    )

    def __init__(self, archiver: Archiver, *, now_s: int, blocked: str | None) -> None:
        super().__init__()
        self.archiver = archiver
        self.blocked = blocked
        start = time.strftime("%Y-%m-%d", time.gmtime(now_s - DEFAULT_DAYS * DAY_S))
        self.start, self.end, self.kinds = start, "", list[str]()
        self.reader = EventsReader(archiver)
        self.choice: Choice | None = None  # what the table shows
        self.sql = ""  # the SQL box's query; "" for the rows chosen
        self.counts: Overview | None = None  # the chosen rows' counts (of self.counted)
        self.counted: Choice | None = None
        self.more = False
        self.reading = False

    def compose(self) -> ComposeResult:
        yield Static(
            "Events: every row, live and archived (nothing is restored to read them)",
            id="events-title",
        )
        with Horizontal(id="events-form"):
            # Reached by tab (which wraps from the SQL box to here), a field keeps
            # its text unselected: selected, the next key typed would replace it.
            yield Field(
                self.start, placeholder="from YYYY-MM[-DD]", id="events-from", select_on_focus=False
            )
            yield Field(
                placeholder="to YYYY-MM[-DD] (empty: now)", id="events-to", select_on_focus=False
            )
            yield Field(
                placeholder="kinds, comma-separated (empty: all)",
                id="events-kinds",
                select_on_focus=False,
            )
            yield Button("Show", id="events-show")
        yield Static("reading…", id="events-summary")
        with Horizontal(id="events-charts"):
            yield SeriesChart("rows per day", id="events-days")
            yield NameBars(id="events-kinds-bars")
        table = MeasuredTable(id="events-rows", cursor_type="row")
        yield table
        yield Field(
            placeholder="SQL over `events` (enter runs it; empty: the rows above)",
            id="events-sql",
            select_on_focus=False,
        )
        yield FittedFooter()

    def on_mount(self) -> None:
        # The table has the focus, so the screen's keys work at once (a text
        # field would take the letters); tab reaches the range and kinds.
        self.query_one("#events-rows", DataTable).focus()
        self.reload()

    def on_unmount(self) -> None:
        self.reader.close()  # no reader left on the application's database

    # reading ------------------------------------------------------------------

    @on(Button.Pressed, "#events-show")
    @on(Input.Submitted, "#events-form Input")
    def _apply(self) -> None:
        self.start = self.query_one("#events-from", Input).value.strip()
        self.end = self.query_one("#events-to", Input).value.strip()
        text = self.query_one("#events-kinds", Input).value
        self.kinds = sorted({k for k in re.split(r"[,\s]+", text) if k})
        self.sql = ""
        self.query_one("#events-sql", Input).value = ""
        self.reload()

    @work(exclusive=True, group="events-read", exit_on_error=False)
    async def reload(self) -> None:
        """The counts (not for SQL) and the first rows of what is chosen now."""
        try:
            span = parse_range(self.start or None, self.end or None)
        except ColdkeepError as err:
            self.query_one("#events-summary", Static).update(str(err))
            return
        choice = self.choice = Choice(span, tuple(self.kinds), self.sql)
        try:
            got = RowsRead(choice, await self.reader.first(choice), first=True)
        except (ColdkeepError, OSError) as err:
            got = RowsRead(choice, None, first=True, error=str(err))
        self.post_message(got)

    @work(exclusive=True, group="events-more", exit_on_error=False)
    async def read_more(self) -> None:
        assert self.choice is not None
        try:
            read = await self.reader.more()
            got = RowsRead(self.choice if read is None else read.choice, read, first=False)
        except (ColdkeepError, OSError) as err:
            got = RowsRead(self.choice, None, first=False, error=str(err))
        self.post_message(got)

    # showing ------------------------------------------------------------------

    def on_rows_read(self, message: RowsRead) -> None:
        if message.choice != self.choice:
            return  # an answer to what the operator has since replaced
        self.reading = False
        got = message.read
        if got is None:
            if message.first:
                self.query_one("#events-summary", Static).update(message.error)
            elif message.error:
                self.notify(message.error, title="events", severity="error", markup=False)
            self.more = False
            return
        if got.counts is not None:
            self.show_counts(got)
        self.show_rows(got, first=message.first)
        if got.choice.sql and message.first:
            self.query_one("#events-summary", Static).update(f"SQL: {got.choice.sql}")

    def show_counts(self, got: Read) -> None:
        counts, plan = got.counts, got.plan
        assert counts is not None
        self.counts, self.counted = counts, got.choice
        left = f"; left out: {', '.join(plan.left_out)}" if plan.left_out else ""
        self.query_one("#events-summary", Static).update(
            f"{counts.total:,} rows ({counts.archived_rows:,} archived) from the live table "
            f"and {plural(len(plan.months), 'archived month')}{left}"
        )
        self.query_one("#events-days", SeriesChart).show(
            [d[5:] for d, _ in counts.days], [("rows", [n for _, n in counts.days])]
        )
        self.query_one("#events-kinds-bars", NameBars).show(counts.kinds)

    def show_rows(self, got: Read, *, first: bool) -> None:
        table = self.query_one("#events-rows", DataTable)
        # The rows chosen (not a SQL result) lead with their time, readable.
        at = self._ts_at(got)
        if first:
            table.clear(columns=True)
            if at is not None:
                table.add_column("time (UTC)", key=TIME_KEY)
            for name in got.columns:
                table.add_column(name, key=name)
        start = table.row_count
        with self.app.batch_update():
            for i, row in enumerate(got.rows):
                cells = list(map(value_cell, row))
                if at is not None:
                    cells.insert(0, _time(row[at], got.schema))
                table.add_row(*cells, key=str(start + i))
        self.more = got.more

    def _ts_at(self, got: Read) -> int | None:
        if got.choice.sql or got.schema.ts not in got.columns:
            return None
        return got.columns.index(got.schema.ts)

    @on(DataTable.RowHighlighted, "#events-rows")
    def _near_end(self, event: DataTable.RowHighlighted) -> None:
        table = event.data_table
        if self.more and not self.reading and event.cursor_row >= table.row_count - AHEAD:
            self.reading = True
            self.read_more()

    # the SQL box, export, restore ----------------------------------------------

    def action_sql(self) -> None:
        self.set_focus(self.query_one("#events-sql", Input))

    @on(Input.Submitted, "#events-sql")
    def _run_sql(self, event: Input.Submitted) -> None:
        self.sql = event.value.strip()
        self.query_one("#events-summary", Static).update("reading…")
        self.reload()

    def action_export(self) -> None:
        self.ask_export()

    @work(exclusive=True, group="confirm", exit_on_error=False)
    async def ask_export(self) -> None:
        choice = self.choice
        if choice is None:
            return
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        path = await self.app.push_screen_wait(
            ExportScreen(Path(os.getcwd()) / f"coldkeep-events-{stamp}.jsonl")
        )
        if path is None:
            return
        try:
            count = await self.reader.export(choice, path)
        except (ColdkeepError, OSError) as err:
            self.notify(str(err), title="export", severity="error", markup=False)
            return
        self.notify(f"{plural(count, 'row')} written to {path}", title="export")

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
        got, chosen = self.counts, self.counted
        if got is None or chosen is None or not got.archived_rows:
            self.notify("no archived row is in the range and kinds chosen", severity="warning")
            return
        n = got.archived_rows
        kinds = ", ".join(chosen.kinds) or "every kind"
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
            run = restore_span(chosen.kinds, chosen.span)
            self.post_message(Confirmed("restore", RESTORE_EVENTS.name, run))


def _time(value: Any, schema: EventSchema) -> str:
    """A time stamp in its column's units as UTC, to the second."""
    if schema.ts_format == "iso" or not isinstance(value, (int, float)):
        return str(value)
    secs = value / 1000 if schema.ts_format == "ms" else value
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(secs))
    except (OverflowError, OSError, ValueError):  # a time no calendar holds
        return str(value)
