"""The fleet view's Events screen (``e``): every site's event rows as the
fleet's lake holds them (each site's shipped months as Parquet, read in
place by DuckDB: nothing is fetched to disk), the main console's Events
screen over the whole fleet. A range of months chooses the files; rows per
month are charted, rows per site and per kind drawn as bars, and a SQL box
runs any read-only query over the view ``events`` (``site``, ``month``, then
the events table's columns) into the table, its first 500 rows.

Workers read through one ``LakeReader`` (lakeread.py: one connection, one
thread at a time) and post what they read; the handlers own what is shown,
and drop an answer to a choice or a SQL since replaced. Leaving the screen
stops a query in progress and closes the lake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Static

from coldkeep.core.base.configremote import RemoteSettings
from coldkeep.core.base.errors import ColdkeepError
from coldkeep.core.events.query import parse_range
from coldkeep.core.events.queryterms import first_line

from ...operations.spec import ConsoleAction
from ...text.fmt import human, plural
from ..kit.actions import bindings
from ..screens.help import KeyedScreen
from ..widgets.charts import NameBars, SeriesChart
from ..widgets.fields import Field
from ..widgets.footer import FittedFooter
from ..widgets.tables import MeasuredTable, value_cell
from .lakeread import LIMIT, Answer, Choice, Counts, LakeReader


@dataclass
class LakeCounted(Message):
    choice: Choice
    counts: Counts | None
    error: str = ""


@dataclass
class LakeAnswered(Message):
    choice: Choice
    sql: str
    answer: Answer | None
    error: str = ""


def _which(sites: tuple[str, ...] | None) -> str:
    if not sites:
        return "every site"
    return f"{'the site' if len(sites) == 1 else 'the sites'} {', '.join(sites)}"


class FleetEventsScreen(KeyedScreen):
    KEYS = (
        ConsoleAction("app.pop_screen", "escape", "Back", "Close the Events screen"),
        ConsoleAction(
            "sql",
            "s",
            "SQL",
            "To the SQL box: read-only SQL over `events` (site, month, then the events "
            "table's columns); enter runs it",
            at_once=True,
        ),
        ConsoleAction("help", "question_mark", "Help", "Show these keys", button=False),
    )
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(KEYS)]
    HELP_TITLE = "Fleet events: keys"
    HELP_FOOT = (
        "Tab moves between the range (from, to: YYYY-MM), Show, the rows and the SQL box; "
        "enter in a field reads what it chose. The lake holds whole months: a day "
        "reads its month. esc closes this."
    )
    DEFAULT_CSS = """
    #lake-sites, #lake-kinds { width: 2fr; padding: 0 1; }
    #lake-answer { height: auto; padding: 0 1; }
    """

    def __init__(self, remote: RemoteSettings, sites: list[str] | None = None) -> None:
        super().__init__()
        self.remote = remote
        self.sites = tuple(sites) if sites else None
        self.reader = LakeReader(remote)
        self.choice: Choice | None = None  # what the charts show (or are reading)
        self.sql = ""  # the SQL whose rows the table shows (or is reading)

    def compose(self) -> ComposeResult:
        yield Static(
            f"Events of {_which(self.sites)}: the fleet's lake at {self.remote.url} "
            "(read in place)",
            id="events-title",
        )
        with Horizontal(id="events-form"):
            yield Field(placeholder="from YYYY-MM", id="events-from", select_on_focus=False)
            yield Field(placeholder="to YYYY-MM (or none)", id="events-to", select_on_focus=False)
            yield Button("Show", id="events-show")
        yield Static("reading the lake…", id="events-summary")
        with Horizontal(id="events-charts"):
            yield SeriesChart("rows per month", id="events-days")
            yield NameBars("rows per site", id="lake-sites")
            yield NameBars("rows per kind", id="lake-kinds")
        yield Static("", id="lake-answer")
        yield MeasuredTable(id="events-rows", cursor_type="row")
        yield Field(
            placeholder="SQL over `events` (site, month, the events table's columns): enter "
            f"runs it, its first {LIMIT} rows shown",
            id="lake-sql",
            select_on_focus=False,
        )
        yield FittedFooter()

    def on_mount(self) -> None:
        self.query_one("#events-rows", DataTable).focus()
        self.reload()

    def on_unmount(self) -> None:
        self.reader.close()  # no query left running, the lake's connection closed

    def action_help(self) -> None:
        self.app.push_screen(self.help_screen())

    def action_sql(self) -> None:
        self.set_focus(self.query_one("#lake-sql", Input))

    # reading ------------------------------------------------------------------

    @on(Button.Pressed, "#events-show")
    @on(Input.Submitted, "#events-form Input")
    def reload(self) -> None:
        """The counts of the months now chosen (and the SQL's rows again over them)."""
        start = self.query_one("#events-from", Input).value.strip()
        end = self.query_one("#events-to", Input).value.strip()
        try:
            span = parse_range(start or None, end or None)
        except ColdkeepError as err:
            self.choice = None  # what is still being read answers nothing now
            self._summary(first_line(err), error=True)
            return
        self.choice = Choice(self.sites, span)
        self._summary("reading the lake…")
        self.query_one("#events-days", SeriesChart).show([], [], empty="reading…")
        for bars in self._bars():
            bars.show([], empty="reading…")
        self.count(self.choice)
        if self.sql:
            self.ask(self.choice, self.sql)

    @work(thread=True, exclusive=True, group="lake-count", exit_on_error=False)
    def count(self, choice: Choice) -> None:
        try:
            got = LakeCounted(choice, self.reader.counts(choice))
        except (ColdkeepError, OSError) as err:
            got = LakeCounted(choice, None, first_line(err))
        self.post_message(got)

    @work(thread=True, exclusive=True, group="lake-sql", exit_on_error=False)
    def ask(self, choice: Choice, sql: str) -> None:
        try:
            got = LakeAnswered(choice, sql, self.reader.answer(choice, sql))
        except (ColdkeepError, OSError) as err:
            got = LakeAnswered(choice, sql, None, first_line(err))
        self.post_message(got)

    @on(Input.Submitted, "#lake-sql")
    def _run_sql(self, event: Input.Submitted) -> None:
        self.sql = event.value.strip()
        if not self.sql:
            self._answer_line("")
            self.query_one("#events-rows", DataTable).clear(columns=True)
        elif self.choice is None:
            self._answer_line("the range of months is not one: see the line above", error=True)
        else:
            self._answer_line(f"running: {self.sql}")
            self.ask(self.choice, self.sql)

    # showing ------------------------------------------------------------------

    def _summary(self, text: str, *, error: bool = False) -> None:
        self.query_one("#events-summary", Static).update(
            Text(text, style="bold red" if error else "")
        )

    def _answer_line(self, text: str, *, error: bool = False) -> None:
        self.query_one("#lake-answer", Static).update(Text(text, style="bold red" if error else ""))

    def on_lake_counted(self, message: LakeCounted) -> None:
        if message.choice != self.choice:
            return  # an answer to a range since replaced
        got = message.counts
        days = self.query_one("#events-days", SeriesChart)
        site_bars, kind_bars = self._bars()
        if got is None:
            self._summary(message.error, error=True)
            days.show([], [], empty="no rows read")
            site_bars.show([], empty="")
            kind_bars.show([], empty="")
            return
        lake = got.lake
        months = f"{lake.months[0]} to {lake.months[-1]}" if lake.months else "no month"
        self._summary(
            f"{got.total:,} rows from {plural(len(lake.sites), 'site')}, "
            f"{plural(len(lake.months), 'month')} ({months}): "
            f"{plural(len(lake.files), 'file')}, {human(lake.size)}"
        )
        days.show([m for m, _ in got.months], [("rows", [n for _, n in got.months])])
        site_bars.show(got.sites)
        if got.kinds is None:
            kind_bars.show([], empty="the lake has no kind column")
        else:
            kind_bars.show(got.kinds)

    def _bars(self) -> tuple[NameBars, NameBars]:
        return self.query_one("#lake-sites", NameBars), self.query_one("#lake-kinds", NameBars)

    def on_lake_answered(self, message: LakeAnswered) -> None:
        if message.choice != self.choice or message.sql != self.sql:
            return  # an answer to a range or a SQL since replaced
        got = message.answer
        table = self.query_one("#events-rows", DataTable)
        table.clear(columns=True)
        if got is None:
            self._answer_line(message.error, error=True)
            return
        n = len(got.rows)
        more = f"the first {n:,} rows shown: the query has more" if got.capped else ""
        self._answer_line(more or plural(n, "row"))
        for name in got.columns:
            table.add_column(name)
        with self.app.batch_update():
            for i, row in enumerate(got.rows):
                table.add_row(*map(value_cell, row), key=str(i))
