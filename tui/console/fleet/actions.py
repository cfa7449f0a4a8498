"""The fleet view's one registry of actions: browsing, selecting and restoring
--to a folder. It makes the fleet view's bindings, its footer, its help screen
and its palette, as the main console's registry (kit/actions.py) makes theirs.
Nothing that changes a site or the remote (no pass, ship, sweep…) is in it.
"""

from __future__ import annotations

from ...operations.spec import ConsoleAction

FLEET_ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction(
        "restore",
        "r",
        "Restore",
        "Restore the selected files (or the highlighted one) under the target directory: "
        "shows what goes where and asks first",
    ),
    ConsoleAction(
        "select_row", "space", "Select", "Select or unselect the highlighted file", button=False
    ),
    ConsoleAction(
        "select_all",
        "a",
        "All",
        "Select every match listed (at most the first 500); again: select none",
        button=False,
    ),
    ConsoleAction(
        "focus_filter",
        "slash",
        "Filter",
        "Search every site at once: words of the path, site:NAME, unit:NAME, sha:PREFIX, "
        "status:STATUS, after:DATE, before:DATE",
    ),
    ConsoleAction(
        "focus_sites",
        "s",
        "Sites",
        "Go to the sites table (the sick on top): enter on a site says why it is in its "
        "state and what its heartbeat says",
    ),
    ConsoleAction(
        "find",
        "g",
        "Find",
        "Find archived files at every site (a glob or part of a path, as coldkeep find "
        "--fleet): every version, where it is, its hold; enter selects it here",
    ),
    ConsoleAction(
        "focus_to", "t", "Target", "Type the directory restores go under (required)", button=False
    ),
    ConsoleAction(
        "focus_table",
        "escape",
        "Results",
        "Leave the filter or the target for the table of matches",
        button=False,
    ),
    ConsoleAction(
        "events",
        "e",
        "Events",
        "Every site's event rows from the fleet's lake (the selected files' sites, if any "
        "are selected): rows per month, site and kind, and a SQL box over `events`",
    ),
    ConsoleAction(
        "reload",
        "f",
        "Reload",
        "List the sites again and fetch any newer manifest snapshot",
        alt_key="f5",
    ),
    ConsoleAction("stop", "x", "Stop", "Stop the restore before its next file"),
    ConsoleAction(
        "help", "question_mark", "Help", "Show every key and action", alt_key="f1", button=False
    ),
    ConsoleAction("quit", "q", "Quit", "Quit (asks first while a restore runs)"),
)
FLEET_HELP = (
    "The fleet view reads the manifest snapshots the sites shipped: it shows each "
    "site as of its last ship, and changes nothing on the remote or on any site. "
    "The sites table shows each one's health, the sick first: enter on a site shows "
    "why, and its heartbeat. "
    "Type in the filter, move to the table (down, enter, tab or esc), select with "
    "space, set the target (t), restore (r). esc closes this."
)
