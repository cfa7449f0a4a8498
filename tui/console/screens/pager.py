"""The pager: one archived file's content, read without restoring it (Toolong's
model: a file viewed line by line, never loaded whole).

The bytes are inflated in the core's thread (``cat``: checked against the
manifest's sha256 as they go) into a ``Spool`` (spool.py: an unlinked temporary
file and the offset of each line); the view draws only the lines on screen,
read back by their offsets. So a file of any size shows its first screen as
soon as its first chunk is inflated, memory holds the line index and the lines
drawn, and the event loop never waits on the read. JSON lines are shown
pretty-printed (``p`` toggles); ``/`` searches (``n``/``N``: next, previous),
in a thread, a chunk of the spool at a time. The verdict comes after the last
byte: a copy whose bytes are not the archived file ends in a red banner (and
the status line says it), never silently.

Everything read from the file is shown as text, never as markup: undecodable
bytes and control characters are escaped (``shown``).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import BinaryIO, ClassVar, cast

from rich.highlighter import JSONHighlighter
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Input, Static

from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.config import Settings
from coldkeep.core.base.errors import explain
from coldkeep.core.ops.cat import cat_file
from coldkeep.core.remote.sealing import Identities

from ...operations.spec import ConsoleAction
from ...text.fmt import human, shown, terminal_text
from ..kit.actions import bindings
from ..widgets.fields import Field
from ..widgets.footer import FittedFooter
from .help import KeyedScreen
from .spool import Spool

# The file's bytes to ``out`` as they are read, checked: the problem when they
# are not the archived file (None: they are). Raises what the read raises.
Source = Callable[[BinaryIO, CancelToken], Awaitable[str | None]]

# How often the view is told more bytes came (the first chunk at once).
GROWN_S = 0.1
# Records (lines, each drawn on one or more rows) kept drawn, for scrolling back.
CACHED = 512
# The file names whose lines are JSON: pretty-printed from the start.
JSON_NAMES = (".jsonl", ".ndjson", ".json", ".jsonl.gz")
_JSON = JSONHighlighter()


@dataclass
class Grown(Message):
    """The spool holds ``bytes`` now (a newer one replaces one not yet handled)."""

    bytes: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, Grown)


@dataclass
class Ended(Message):
    """The read ended: every byte (``problem``: they are not the archived file),
    or ``error`` (it stopped there)."""

    bytes: int
    problem: str | None
    error: str | None = None


@dataclass
class SearchDone(Message):
    needle: str
    start: int  # the line searched from
    forward: bool
    line: int | None  # where it was found


class _Feed:
    """What the core writes to: the spool, and a ``Grown`` to the screen now and
    then (from the inflate's thread: posting is thread-safe)."""

    def __init__(self, spool: Spool, post: Callable[[Message], object]) -> None:
        self.spool = spool
        self.post = post
        self.posted = 0.0

    def write(self, piece: bytes) -> int:
        n = self.spool.write(piece)
        now = time.monotonic()
        if now - self.posted >= GROWN_S:
            self.posted = now
            self.post(Grown(self.spool.size))
        return n

    def flush(self) -> None:
        self.spool.flush()


def is_json_name(name: str) -> bool:
    return name.lower().endswith(JSON_NAMES)


def record_text(data: bytes, more: int, *, pretty: bool) -> Text:
    """One line of the file as it is drawn: pretty-printed when ``pretty`` and it
    is a JSON object or array, else as it is, escaped."""
    text = data.decode("utf-8", "surrogateescape")
    body: Text | None = None
    if pretty and not more and data.lstrip()[:1] in (b"{", b"["):
        try:
            value = json.loads(text)
        except ValueError:
            value = None
        if value is not None:
            body = _JSON(Text(terminal_text(json.dumps(value, indent=2, ensure_ascii=False))))
    if body is None:
        body = Text(shown(text))
    if more:
        body.append(f" … {human(more)} more on this line", style="dim italic")
    return body


class PagerView(Widget, can_focus=True):
    """The lines of a spool from ``top`` down, as many as fit, each wrapped to
    the width; then, after the last line, the verdict."""

    DEFAULT_CSS = """
    PagerView { height: 1fr; padding: 0 1; }
    """

    def __init__(self, spool: Spool, *, pretty: bool, id: str | None = None) -> None:
        super().__init__(id=id)
        self.spool = spool
        self.top = 0
        self.pretty = pretty
        self.needle = ""
        self.hit: int | None = None
        # End was the last move: the view keeps to the end while the file is
        # still being read (as less's G waits for it), until another move.
        self.at_end = False
        self.tail = Text("reading…", style="dim")
        self._frame: tuple[tuple[object, ...], list[Text]] | None = None
        self._cache: OrderedDict[tuple[object, ...], list[Text]] = OrderedDict()

    # drawing -------------------------------------------------------------------

    def _gutter(self) -> int:
        return len(f"{max(self.spool.lines, 1):,}") + 1

    def rows(self, i: int) -> list[Text]:
        """Line ``i`` drawn: its number, then its text wrapped to the width."""
        width = max(self.content_size.width - self._gutter(), 8)
        key = (i, self.spool.span(i)[1], width, self.pretty, self.needle, self.hit == i)
        if (cached := self._cache.get(key)) is not None:
            self._cache.move_to_end(key)
            return cached
        data, more = self.spool.line(i)
        body = record_text(data, more, pretty=self.pretty)
        if self.needle:
            body.highlight_words(
                [self.needle], "black on yellow", case_sensitive=self.needle != self.needle.lower()
            )
        lines = body.wrap(self.app.console, width, overflow="fold") or [Text("")]
        pad = self._gutter()
        number = Text()
        number.append(f"{i + 1:>{pad - 1},}", style="reverse" if self.hit == i else "dim")
        number.append(" ")
        drawn = [number + lines[0], *(Text(" " * pad) + line for line in lines[1:])]
        self._cache[key] = drawn
        if len(self._cache) > CACHED:
            self._cache.popitem(last=False)
        return drawn

    def _tail_rows(self) -> list[Text]:
        return list(self.tail.wrap(self.app.console, max(self.content_size.width, 8)))

    def screen_rows(self) -> list[Text]:
        """The rows on screen: the lines from ``top`` down, as many as fit, then
        the verdict when the last line is among them."""
        height, total = self.content_size.height, self.spool.lines
        out: list[Text] = []
        i = self.top
        while len(out) < height and i < total:
            out += self.rows(i)
            i += 1
        if i >= total:
            out += self._tail_rows()
        return out[:height]

    def render_line(self, y: int) -> Strip:
        # The Line API: each row drawn as it was wrapped here (Textual never
        # wraps it again). The rows are worked out once for what is shown now
        # (Textual asks row by row, and may ask for a few rows alone).
        shown = (self.top, self.pretty, self.needle, self.hit, self.spool.size, self.tail)
        key = (*shown, self.content_size)
        if self._frame is None or self._frame[0] != key:
            self._frame = (key, self.screen_rows())
        rows = self._frame[1]
        width, style = self.content_size.width, self.rich_style
        if y >= len(rows):
            return Strip.blank(width, style)
        return Strip(list(rows[y].render(self.app.console))).crop_extend(0, width, style)

    # moving --------------------------------------------------------------------

    def last_shown(self) -> int:
        """The last line drawn whole (or the top one, taller than the screen)."""
        room, i = self.content_size.height, self.top
        while i < self.spool.lines:
            room -= len(self.rows(i))
            if room < 0:
                break
            i += 1
        return max(i - 1, self.top)

    def _top_ending_at(self, last: int, room: int) -> int:
        """The top line from which ``last`` is the last line that fits in ``room``."""
        i = last
        while i > 0:
            room -= len(self.rows(i))
            if room < len(self.rows(i - 1)):
                break
            i -= 1
        return max(i, 0)

    def go(self, top: int) -> None:
        self.at_end = False
        self.top = max(min(top, self.spool.lines - 1), 0)
        self.refresh()

    def scroll_lines(self, n: int) -> None:
        self.go(self.top + n)

    def page_down(self) -> None:
        self.go(max(self.last_shown() + 1, self.top + 1))

    def page_up(self) -> None:
        if self.top > 0:
            self.go(self._top_ending_at(self.top - 1, self.content_size.height))

    def end(self) -> None:
        """The last line at the bottom, with the verdict after it; and so again
        as the file is read on (``at_end``)."""
        last = self.spool.lines - 1
        if last >= 0:
            self.go(self._top_ending_at(last, self.content_size.height - len(self._tail_rows())))
        self.at_end = True

    def keep_to_end(self) -> None:
        """After the file grew, or its verdict came: at the end again if End was
        the last move."""
        if self.at_end:
            self.end()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.scroll_lines(3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.scroll_lines(-3)


class PagerScreen(KeyedScreen):
    KEYS = (
        ConsoleAction(
            "close", "escape", "Close", "Close the search box, else the pager", alt_key="q"
        ),
        ConsoleAction(
            "search", "slash", "Search", "Search the file (lower case: any case); enter finds"
        ),
        ConsoleAction("next", "n", "Next", "The next line the search finds"),
        ConsoleAction("previous", "N", "Previous", "The line before that the search finds"),
        ConsoleAction(
            "pretty", "p", "Pretty JSON", "JSON lines pretty-printed, or as they are stored"
        ),
        ConsoleAction("lines(1)", "down", "Down", "One line down", alt_key="j", footer=False),
        ConsoleAction("lines(-1)", "up", "Up", "One line up", alt_key="k", footer=False),
        ConsoleAction(
            "page_down", "pagedown", "Page down", "A screen down", alt_key="space", footer=False
        ),
        ConsoleAction("page_up", "pageup", "Page up", "A screen up", alt_key="b", footer=False),
        ConsoleAction("home", "home", "Top", "The first line", alt_key="g", footer=False),
        ConsoleAction("end", "end", "End", "The last line, and the verdict after it", alt_key="G"),
    )
    BINDINGS: ClassVar[list[BindingType]] = [*bindings(KEYS)]
    HELP_TITLE = "Pager: keys"
    HELP_FOOT = (
        "The file is read as it is shown, never restored; the last line says whether its "
        "bytes are the archived file's (sha256). esc closes this."
    )

    def __init__(self, title: Text, name: str, source: Source) -> None:
        super().__init__()
        self.title_text = title
        self.source = source
        self.spool = Spool()
        self.cancel = CancelToken()
        self.pretty = is_json_name(name)
        self.ended: Ended | None = None
        # A search running, and the hits n (+1) and N (-1) asked for meanwhile:
        # each is searched for from the hit before it, as it is found, so
        # that keys typed faster than a search finds move as far as typed.
        self.searching = False
        self.moves = 0

    def compose(self) -> ComposeResult:
        yield Static(self.title_text, id="pager-title")
        yield PagerView(self.spool, pretty=self.pretty, id="pager-view")
        yield Static("", id="pager-status")
        yield Field(placeholder="search (lower case: any case); enter finds", id="pager-search")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.query_one("#pager-search").display = False
        self.view.focus()
        self.stream()
        self._status()

    def on_unmount(self) -> None:
        # The inflate stops at its next chunk; the spool refuses any write from
        # now on and its file goes (it was never linked anywhere).
        self.cancel.cancel("the pager was closed")
        self.spool.close()

    @property
    def view(self) -> PagerView:
        return self.query_one(PagerView)

    # workers -------------------------------------------------------------------

    @work(exclusive=True, group="pager", exit_on_error=False)
    async def stream(self) -> None:
        feed = _Feed(self.spool, self.post_message)
        try:
            problem = await self.source(cast("BinaryIO", feed), self.cancel)
        except (BrokenPipeError, Cancelled):
            return  # the pager was closed
        except Exception as err:
            known = explain(err)
            if known is None:
                raise  # a bug: the worker's error shows it whole
            self.post_message(Ended(self.spool.size, None, known[1]))
            return
        self.post_message(Ended(self.spool.size, problem))

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def run_search(self, needle: str, start: int, forward: bool) -> None:
        try:
            line = self.spool.find(
                needle.encode("utf-8", "surrogateescape"), start, forward=forward
            )
        except BrokenPipeError:
            return  # the pager was closed
        self.post_message(SearchDone(needle, start, forward, line))

    # handlers ------------------------------------------------------------------

    def on_grown(self, message: Grown) -> None:
        self.view.refresh()
        self.view.keep_to_end()
        self._status()

    def on_ended(self, message: Ended) -> None:
        self.ended = message
        view = self.view
        if message.error is not None:
            view.tail = Text(
                f"READ STOPPED after {human(message.bytes)}: {shown(message.error)}",
                style="bold white on red",
            )
        elif message.problem is not None:
            view.tail = Text(
                f"SHA256 MISMATCH: {shown(message.problem)}. The bytes above are not the "
                "archived file (coldkeep verify finds the bad copy).",
                style="bold white on red",
            )
        else:
            view.tail = Text(f"— end: {human(message.bytes)}, sha256 verified —", style="dim green")
        view.refresh()
        view.keep_to_end()  # the verdict may take more rows than "reading…" did
        self._status()

    def on_search_done(self, message: SearchDone) -> None:
        if message.needle != self.view.needle:
            return  # a newer search was asked for since
        self.searching = False
        if message.line is None:
            self.moves = 0
            where = "below" if message.forward else "above"
            more = "" if self.ended else " (so far: the file is still being read)"
            self.notify(
                f"{shown(message.needle)!r}: not found {where} line {message.start + 1}{more}",
                severity="warning",
                markup=False,
            )
            return
        self.view.hit = message.line
        self.view.go(message.line)
        self._status()
        if self.moves:
            forward, self.moves = self.moves > 0, self.moves - (1 if self.moves > 0 else -1)
            self._search(self.view.needle, message.line, forward)

    def _search(self, needle: str, start: int, forward: bool) -> None:
        self.searching = True
        self.run_search(needle, start, forward)

    def _status(self) -> None:
        view, spool = self.view, self.spool
        lines = spool.lines
        at = f"line {view.top + 1:,} of {lines:,}" if lines else "no lines yet"
        state: str | Text
        if self.ended is None:
            state = f"reading… {human(spool.size)} so far"
        elif self.ended.error is not None:
            state = Text("READ STOPPED: see the end", style="bold red")
        elif self.ended.problem is not None:
            state = Text("SHA256 MISMATCH: see the end", style="bold white on red")
        else:
            state = f"{human(self.ended.bytes)}, sha256 verified"
        mode = "pretty JSON (p: as stored)" if view.pretty else "as stored (p: pretty JSON)"
        self.query_one("#pager-status", Static).update(
            Text.assemble(f"{at}  ·  ", state, f"  ·  {mode}")
        )

    # actions -------------------------------------------------------------------

    def action_close(self) -> None:
        box = self.query_one("#pager-search", Input)
        if box.display:
            box.display = False
            self.view.focus()
            return
        self.dismiss(None)

    def action_search(self) -> None:
        box = self.query_one("#pager-search", Input)
        box.display = True
        box.focus()

    @on(Input.Submitted, "#pager-search")
    def _searched(self, event: Input.Submitted) -> None:
        event.input.display = False
        self.view.focus()
        self.view.needle = event.value
        self.view.hit = None
        self.moves = 0
        if event.value:
            self._search(event.value, self.view.top - 1, True)
        self.view.refresh()

    def _from(self) -> int:
        view = self.view
        return view.hit if view.hit is not None else view.top

    def action_next(self) -> None:
        self._move(True)

    def action_previous(self) -> None:
        self._move(False)

    def _move(self, forward: bool) -> None:
        """The next hit (or the one before), or once the running search ends."""
        if not self.view.needle:
            return
        if self.searching:
            self.moves += 1 if forward else -1
            return
        self._search(self.view.needle, self._from(), forward)

    def action_pretty(self) -> None:
        self.view.pretty = not self.view.pretty
        self.view.refresh()
        self.view.keep_to_end()  # its lines drawn anew: the end moved
        self._status()

    def action_lines(self, n: int) -> None:
        self.view.scroll_lines(n)
        self._status()

    def action_page_down(self) -> None:
        self.view.page_down()
        self._status()

    def action_page_up(self) -> None:
        self.view.page_up()
        self._status()

    def action_home(self) -> None:
        self.view.go(0)
        self._status()

    def action_end(self) -> None:
        self.view.end()
        self._status()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # In the search field, letters are typed.
        return not (isinstance(self.focused, Input) and action != "close")


def archived(
    settings: Settings, relpath: str, entry_id: int, identities: Identities | None
) -> Source:
    """The bytes of entry ``entry_id`` (a version of ``relpath``) as ``coldkeep
    cat`` reads them: from its gzip, its bundle member, or the remote copy (a
    sealed one opened with ``identities``, the console's ``--identity``)."""

    async def read(out: BinaryIO, cancel: CancelToken) -> str | None:
        got = await cat_file(settings, relpath, str(entry_id), out, cancel, identities)
        return got.problem

    return read
