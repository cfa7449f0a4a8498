"""The console's actions, in one registry: it feeds the key bindings, the action
bar's buttons, the help screen and the command palette, so the four can never
disagree. The operations' actions come with their entries (tui/operations); the
console's own (browsing, finding, holds, jobs, stop, refresh, help, quit) are listed
here; each one's ``place`` orders them all. Every action has a plain key (a
letter or a function key): nothing relies on ctrl+enter or ctrl+s, which
terminals and SSH clients swallow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial

from textual.app import SystemCommand
from textual.binding import Binding

from ...operations.registry import OPERATIONS
from ...operations.spec import ConsoleAction, Question

_OWN = (
    ConsoleAction(
        "plan", "l", "Plan", "Recount the backlog and the leftovers (writes nothing)", place=20
    ),
    # Not mutating: seeing holds changes nothing; placing and releasing one is
    # refused in read-only.
    ConsoleAction(
        "holds",
        "h",
        "Holds",
        "Legal holds: see them, place one, release one (expiry and drops never touch "
        "what they cover)",
        button=False,
        footer=False,
        place=50,
    ),
    # Not mutating: browsing and previewing change nothing (and work read-only);
    # restoring from the browser is refused where a change would be.
    ConsoleAction(
        "restore",
        "r",
        "Restore",
        "Open the restore browser: find and preview files and rows; restoring asks first",
        at_once=True,  # what is typed right after r is the filter
        place=60,
    ),
    # Not mutating: finding reads the manifest only.
    ConsoleAction(
        "find",
        "g",
        "Find",
        "Find archived files in the whole manifest (a glob or part of a path): every "
        "version, where its bytes are, its hold; enter selects one in the restore browser, "
        "H lists its versions, v reads it without restoring",
        at_once=True,  # what is typed right after g is the pattern
        button=False,
        footer=False,  # the footer's room goes to the operations (help and ^p list it)
        place=65,
    ),
    # Not mutating: reading rows changes nothing; restoring them asks first and
    # is refused where a change would be.
    ConsoleAction(
        "events",
        "E",
        "Events",
        "Every event row, live and archived, without restoring: rows per day and per "
        "kind for a range, the rows, SQL over them, export to JSONL or CSV; R restores "
        "the rows chosen (asks first)",
        button=False,
        footer=False,
        events=True,
        place=66,
    ),
    ConsoleAction(
        "trends",
        "T",
        "Trends",
        "Charts of what coldkeep recorded: bytes archived per day and their compression, "
        "the backlog, event rows per month, local, shipped and expired bytes, pass times",
        button=False,
        footer=False,
        place=67,
    ),
    ConsoleAction(
        "run_job",
        "j",
        "Run job",
        "Run the job chosen in the Jobs table now (anywhere else: go there to choose one; "
        "audited; never two at once)",
        mutating=True,
        place=110,
    ),
    ConsoleAction(
        "stop",
        "x",
        "Stop",
        "Stop the operation (here or attached) at its next safe point",
        place=120,
    ),
    ConsoleAction(
        "refresh", "f", "Refresh", "Reload status, backlog and checkpoints", alt_key="f5", place=130
    ),
    ConsoleAction(
        "help",
        "question_mark",
        "Help",
        "Show every key and action",
        alt_key="f1",
        button=False,
        place=140,
    ),
    ConsoleAction("quit", "q", "Quit", "Quit (asks first while an operation runs)", place=150),
)
ACTIONS: tuple[ConsoleAction, ...] = tuple(
    sorted(
        [*(op.console.action for op in OPERATIONS if op.console is not None), *_OWN],
        key=lambda a: a.place,
    )
)
BY_NAME = {a.name: a for a in ACTIONS}


def bindings(actions: Sequence[ConsoleAction] = ACTIONS) -> list[Binding]:
    """The key bindings of a registry (the main console's, or the fleet view's):
    every action in the footer but help and those kept out of it (help lists
    them all). An ``at_once`` action's key is a priority binding: Textual acts on it
    before it routes the next key (and not while a text field, which takes the
    letter, has focus)."""
    return [
        Binding(a.keys, a.name, a.label, show=a.footer and a.name != "help", priority=a.at_once)
        for a in actions
    ]


def palette(
    textual: Iterable[SystemCommand],
    actions: Iterable[ConsoleAction],
    run: Callable[[str], object],
) -> Iterator[SystemCommand]:
    """The palette's commands: Textual's own (theme, keys, screenshot…) but
    any a registry action of the same title replaces (Textual's Quit quits at
    once, where the registry's asks first while an operation runs), then each
    of ``actions``, run through ``run``."""
    ours = list(actions)
    titles = {a.label for a in ours}
    yield from (c for c in textual if c.title not in titles)
    for a in ours:
        yield SystemCommand(a.label, f"{a.help} \\[{a.key_label}]", partial(run, a.name))


def quit_question(running: str | None) -> Question:
    """What quitting asks while ``running`` runs."""
    return Question(
        f"Quit while {running} runs?",
        f"{running} will stop at its next safe point (between files or batches, or "
        "mid-file with its partial removed), then the console quits.",
        warning="Nothing is lost: what is left is what the next pass's recovery handles.",
        confirm="Stop and quit",
    )
