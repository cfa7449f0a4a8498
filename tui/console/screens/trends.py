"""The Trends screen: what coldkeep recorded, as charts. Bytes archived per day
(in and out) and their compression ratio, the backlog over time, event rows
archived per month, where the archived bytes are (here, shipped, only in the
remote tier, expired) and how long passes took. ``d`` changes the days shown.

A worker reads (``Archiver.trends``, read-only) and posts one message; its
handler draws every chart. The charts sit in a grid that scrolls, so every one
is reachable at 80x24.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Grid, VerticalScroll
from textual.message import Message
from textual.widgets import Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.errors import ColdkeepError
from coldkeep.core.ops.trends import Trends
from coldkeep.core.store.connection import ManifestError

from ...operations.spec import ConsoleAction
from ...text.fmt import human, plural
from ..kit.actions import bindings
from ..widgets.charts import NameBars, SeriesChart
from ..widgets.footer import FittedFooter
from .help import KeyedScreen

SPANS = (30, 90, 365)
TIERS = {
    "local": "here",
    "shipped": "here and shipped",
    "remote_only": "remote only",
    "expired": "expired",
}


@dataclass
class TrendsRead(Message):
    trends: Trends | None
    error: str = ""


class TrendsScreen(KeyedScreen):
    KEYS = (
        ConsoleAction("app.pop_screen", "escape", "Back", "Close the Trends screen"),
        ConsoleAction(
            "days", "d", "Days shown", f"The days charted: {' / '.join(map(str, SPANS))}"
        ),
    )
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(KEYS)]
    HELP_TITLE = "Trends: keys"
    HELP_FOOT = "Arrow keys and page up / down scroll the charts. esc closes this."

    def __init__(self, archiver: Archiver) -> None:
        super().__init__()
        self.archiver = archiver
        self.days = SPANS[0]

    def compose(self) -> ComposeResult:
        yield Static("Trends", id="trends-title")
        yield Static("reading…", id="trends-summary")
        with VerticalScroll(id="trends-scroll"), Grid(id="trends-grid"):
            yield SeriesChart("bytes archived per day: in, out", id="trends-bytes", bytes_axis=True)
            yield SeriesChart("compression: out / in", id="trends-ratio")
            yield SeriesChart("backlog", id="trends-backlog", bytes_axis=True)
            yield SeriesChart("event rows archived per month", id="trends-months")
            yield SeriesChart("pass duration, seconds", id="trends-passes")
            yield NameBars("where the archived bytes are", id="trends-tiers")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.read()

    def action_days(self) -> None:
        self.days = SPANS[(SPANS.index(self.days) + 1) % len(SPANS)]
        self.read()

    @work(exclusive=True, group="trends", exit_on_error=False)
    async def read(self) -> None:
        try:
            got = await self.archiver.trends(self.days)
        except (ColdkeepError, ManifestError, OSError) as err:
            self.post_message(TrendsRead(None, str(err)))
            return
        self.post_message(TrendsRead(got))

    def on_trends_read(self, message: TrendsRead) -> None:
        got = message.trends
        if got is None:
            self.query_one("#trends-summary", Static).update(message.error)
            return
        days = [d[5:] for d in got.days]
        archived = sum(got.bytes_in)
        self.query_one("#trends-summary", Static).update(
            f"the last {self.days} days (d: {' / '.join(map(str, SPANS))}): "
            f"{human(archived)} archived into {human(sum(got.bytes_out))}; "
            f"{plural(len(got.pass_seconds), 'pass', 'passes')}"
        )
        self.query_one("#trends-bytes", SeriesChart).show(
            days, [("in", got.bytes_in), ("out", got.bytes_out)]
        )
        self.query_one("#trends-ratio", SeriesChart).show(days, [("ratio", got.ratio())])
        self.query_one("#trends-backlog", SeriesChart).show(
            days,
            [("backlog", got.backlog_bytes)],
            lines=True,
            empty="no sample yet",
        )
        self.query_one("#trends-months", SeriesChart).show(
            [m for m, _ in got.month_rows], [("rows", [n for _, n in got.month_rows])]
        )
        self.query_one("#trends-passes", SeriesChart).show(
            [time.strftime("%m-%d", time.gmtime(s)) for s in got.pass_started],
            [("seconds", got.pass_seconds)],
        )
        tiers = [(TIERS.get(k, k), n) for k, n in got.tiers.items()]
        self.query_one("#trends-tiers", NameBars).show(tiers, fmt="bytes")
