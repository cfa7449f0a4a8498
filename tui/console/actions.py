"""The console's actions, in one registry: it feeds the key bindings, the action
bar's buttons, the help screen and the command palette, so the four can never
disagree. Every action has a plain key (a letter or a function key): nothing
relies on ctrl+enter or ctrl+s, which terminals and SSH clients swallow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class ConsoleAction:
    name: str  # App.action_<name>
    key: str
    label: str
    help: str
    mutating: bool = False  # refused in --read-only, and while another process holds the lock
    alt_key: str | None = None
    button: bool = True
    remote: bool = False  # works on the remote tier: off where no [remote] is configured
    retention: bool = False  # deletes by retention: off where no [retention] is configured
    footer: bool = True  # its key in the footer (room there is short: help lists every key)

    @property
    def keys(self) -> str:
        return self.key if self.alt_key is None else f"{self.key},{self.alt_key}"

    @property
    def key_label(self) -> str:
        shown = {"question_mark": "?", "escape": "esc", "slash": "/"}
        return " / ".join(shown.get(k, k) for k in self.keys.split(","))


ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction(
        "run_pass",
        "p",
        "Pass",
        "Run a pass: shows the plan and asks before it removes anything",
        True,
    ),
    ConsoleAction("plan", "l", "Plan", "Recount the backlog and the leftovers (writes nothing)"),
    ConsoleAction(
        "ship",
        "u",
        "Ship",
        "Ship the archive to the remote tier, then drop local copies past keep_local_days "
        "(shows both and asks first)",
        True,
        remote=True,
    ),
    ConsoleAction(
        "expire",
        "e",
        "Expire",
        "Delete archived data past its retention, locally and remotely (shows exactly what "
        "goes and what holds keep, and asks first)",
        True,
        retention=True,
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
    ),
    # Not mutating: browsing and previewing change nothing (and work read-only);
    # restoring from the browser is refused where a change would be.
    ConsoleAction(
        "restore",
        "r",
        "Restore",
        "Open the restore browser: find and preview files and rows; restoring asks first",
    ),
    ConsoleAction(
        "adopt", "a", "Adopt", "Settle the selected orphan gzip (shows what will happen)", True
    ),
    ConsoleAction(
        "sweep", "s", "Sweep", "Remove leftover partials (shows the exact paths first)", True
    ),
    ConsoleAction(
        "verify", "v", "Verify", "Re-read every gzip and compare it with the manifest", True
    ),
    ConsoleAction(
        "checkpoint", "c", "Checkpoint", "Checkpoint the live database's WAL now (PASSIVE)", True
    ),
    ConsoleAction(
        "run_job",
        "j",
        "Run job",
        "Run the job selected in Jobs now (audited; never two at once)",
        True,
    ),
    ConsoleAction(
        "stop",
        "x",
        "Stop",
        "Stop the operation (here or attached) at its next safe point",
    ),
    ConsoleAction("refresh", "f", "Refresh", "Reload status, backlog and checkpoints", False, "f5"),
    ConsoleAction("help", "question_mark", "Help", "Show every key and action", False, "f1", False),
    ConsoleAction("quit", "q", "Quit", "Quit (asks first while an operation runs)", False),
)
BY_NAME = {a.name: a for a in ACTIONS}


def bindings(actions: Sequence[ConsoleAction] = ACTIONS) -> list[Binding]:
    """The key bindings of a registry (the main console's, or the fleet view's):
    every action in the footer but help and those kept out of it (help lists
    them all)."""
    return [Binding(a.keys, a.name, a.label, show=a.footer and a.name != "help") for a in actions]
