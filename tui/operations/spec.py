"""What an entry of the operation registry is made of: the ``coldkeep`` command
(its options, the archiver call they make), the console's action and the
question it asks first, and the words of each result the operation returns.

Invariants:
- An entry is data and small functions over the core's types: nothing here or
  in an entry imports the console, the CLI or Textual (an import-linter
  contract), so the CLI stays light and the console reads the same entries.
- A command's options become one call (``bind``), and what the console asked
  about becomes one call (``Console.start``): both are a ``Run``, the archiver
  call that the client runs with its own archiver and cancel token.
- Every result has ``to_dict()``: the ``result`` of its ``--json`` document.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

import click

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.config import Settings
from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK
from coldkeep.core.base.given import parse_id

from ..text.fmt import parse_day, shown, terminal_text

if TYPE_CHECKING:
    from coldkeep.core.remote.sealing import Identities


class Result(Protocol):
    """What an operation returns."""

    def to_dict(self) -> object:
        """The ``result`` of the command's ``--json`` document (docs/json.md)."""
        ...


R = TypeVar("R", bound=Result)
P = TypeVar("P")

Options = dict[str, Any]  # a command's own options, as click parsed them
Run = Callable[[Archiver, CancelToken], Awaitable[Result]]  # one archiver call


def _no_lines(result: object) -> list[str]:
    return []


def _never(result: object) -> bool:
    return False


@dataclass(frozen=True)
class Words(Generic[R]):
    """A result type in words, and when it counts as failed."""

    kind: type[R]
    # One line: the console's notice and in-flight line, the CLI text's last.
    headline: Callable[[R], str]
    # Failed: the --json document's "ok" is false, and the command exits 1.
    failed: Callable[[R], bool] = _never
    # What needs a look, one line each: the CLI's text before the headline.
    detail: Callable[[R], list[str]] = _no_lines
    # The CLI's whole text, where it is not the detail then "<command>: <headline>".
    text: Callable[[R], str] | None = None
    # The exit code, where it is not 1 for failed and 0 otherwise.
    exit: Callable[[R], int] | None = None

    def report(self, command: str, result: R) -> str:
        """The CLI's text for ``command``'s result."""
        if self.text is not None:
            return terminal_text(self.text(result))
        lines = [*self.detail(result), f"{command}: {self.headline(result)}"]
        return "\n".join(shown(line) for line in lines)

    def exit_code(self, result: R) -> int:
        if self.exit is not None:
            return self.exit(result)
        return EXIT_FAILED if self.failed(result) else EXIT_OK


@dataclass(frozen=True)
class ConsoleAction:
    """A key of a console: its binding, button, help line and palette entry."""

    name: str  # App.action_<name>; an operation's runs as the app's operation('<name>')
    key: str
    label: str
    help: str
    mutating: bool = False  # refused in --read-only, and while another process holds the lock
    alt_key: str | None = None
    button: bool = True
    remote: bool = False  # works on the remote tier: off where no [remote] is configured
    retention: bool = False  # deletes by retention: off where no [retention] is configured
    events: bool = False  # reads event rows: off where no state_db is configured
    footer: bool = True  # its key in the footer (room there is short: help lists every key)
    # Acted on as soon as its key is read (a priority binding), before the next key
    # is routed: it opens a field that takes typing, so what is typed right after
    # it (type-ahead, a paste) lands in that field, not on the screen it left.
    at_once: bool = False
    place: int = 0  # where it sits among the main console's actions (keys, buttons, help)

    @property
    def keys(self) -> str:
        return self.key if self.alt_key is None else f"{self.key},{self.alt_key}"

    @property
    def key_label(self) -> str:
        shown = {"question_mark": "?", "escape": "esc", "slash": "/"}
        return " / ".join(shown.get(k, k) for k in self.keys.split(","))


@dataclass(frozen=True)
class Question:
    """The console's confirmation: exactly what will happen, before it does."""

    title: str
    summary: str
    columns: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)
    warning: str = ""  # what cannot be undone
    confirm: str = "Run"  # the word on the button that says yes


@dataclass(frozen=True)
class Nothing:
    """Said instead of a question: there is nothing to do, or it cannot run."""

    text: str
    title: str = ""
    severity: Literal["information", "warning", "error"] = "information"


@dataclass(frozen=True)
class Site:
    """What an operation's question reads in the console."""

    archiver: Archiver
    base: Path  # the config's folder: paths are shown relative to it
    orphans: tuple[str, ...] = ()  # chosen in Orphans & stale: the selected one, else all


# Before anything is read: ask first, start at once, or say why not.
Gate = Literal["ask", "run"] | Nothing


def _ask(settings: Settings) -> Gate:
    return "ask"


@dataclass(frozen=True)
class Console(Generic[P]):
    """The console's side of an operation: its action, and what it reads and
    asks before it starts (without ``ask`` it starts at once)."""

    action: ConsoleAction
    start: Callable[[P], Run]  # the call, from what was read to ask about (None without)
    ask: Callable[[Site], Awaitable[tuple[P, Question | Nothing]]] | None = None
    gate: Callable[[Settings], Gate] = _ask

    def first(self, settings: Settings) -> Gate:
        """What comes first now: "ask" (its plan, then its question), "run" (it
        starts at once), or what to say instead."""
        gate = self.gate(settings)
        return "run" if gate == "ask" and self.ask is None else gate


@dataclass(frozen=True)
class Operation:
    """One operation, declared once: ``coldkeep <name>``, its console action if
    it has one, and the words of what it returns."""

    name: str  # the command, and the console's label while it runs
    help: str  # the command's help; its first sentence is the short help
    # The call the command's options make. A usage error raised here (click's, or
    # the core's UsageError) ends the command before anything is read.
    bind: Callable[[Options], Run]
    words: tuple[Words[Any], ...]  # of every result type it returns
    # Its own options and arguments; --wait, --json and --config come after them.
    params: tuple[click.Parameter, ...] = ()
    console: Console[Any] | None = None
    locks: bool = True  # it takes the archive lock: its command offers --wait


IDENTITY_HELP = (
    "An age identity file (age-keygen's AGE-SECRET-KEY-1… lines): opens remote copies "
    "sealed to its key ([remote] encrypt_to). Read once for the command, never kept."
)


def identity_option() -> click.Option:
    """``--identity FILE``, for every command that reads remote copies. Its
    ``bind`` is given the keys, loaded (``load_identity``) and their warnings
    said by the CLI before it binds (tui/cli/operations.py)."""
    return click.Option(
        ["--identity"], type=click.Path(path_type=Path), metavar="FILE", help=IDENTITY_HELP
    )


def load_identity(path: Path | None) -> Identities | None:
    """The keys of ``--identity``, loaded once for the command (None without
    one); a file that holds none is a usage error naming it, before anything
    is read. What the client must say of the file (open to others) is in
    ``warnings``: each client says it its own way."""
    if path is None:
        return None
    from coldkeep.core.remote.sealing import load_identities  # noqa: PLC0415 - pyrage, only then

    return load_identities(path)


def unsealing(identities: Identities | None, run: Run) -> Run:
    """``run`` with its archiver opening sealed remote copies with the keys of
    ``--identity`` (loaded before binding, once: a bad file ended the command
    before anything was read)."""
    if identities is None:
        return run

    def with_keys(archiver: Archiver, cancel: CancelToken) -> Awaitable[Result]:
        archiver.sessions.identities = identities
        return run(archiver, cancel)

    return with_keys


class _Id(click.ParamType[int]):
    """An id (an entry's, a hold's) as click reads it: ASCII digits alone, as
    ``cat PATH@ID`` takes one (click's INT would read ``١`` as 1)."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        got = value if isinstance(value, int) else parse_id(str(value))
        if got is None:
            self.fail(f"{value!r} is not an id (digits 0-9)", param, ctx)
        return got


ID = _Id()


def parse_when(value: str | None, option: str) -> int | None:
    """A ``YYYY-MM-DD[THH:MM]`` option (local time) as ns since the epoch."""
    if value is None:
        return None
    try:
        return parse_day(value) * 1_000_000
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint=option) from None
