"""One fleet site opened from the sites table (``enter``): its health and every
reason, and what its newest believable heartbeat says, line by line; ``f``
filters the matches to its files (``site:NAME``), ``escape`` goes back. Reads
nothing: what the view loaded is shown."""

from __future__ import annotations

import time
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from coldkeep.core.ops.fleet import FleetSite
from coldkeep.core.ops.health import MARKS, span
from coldkeep.core.remote.heartbeat import Beat

from ...text.fmt import clock_time, human, plural, shown
from .sites import STYLES, snapshot_time


def _beat_lines(b: Beat, quiet: int | None) -> list[str]:
    ago = f"{span(quiet)} ago" if quiet is not None else "?"
    last = f"{clock_time(b.last_pass_at)} {b.last_pass_status}" if b.last_pass_at else "none yet"
    backlog = f"{plural(b.backlog_files, 'file')} ({human(b.backlog_bytes)}), "
    backlog += f"{b.backlog_rows:,} rows"
    if b.backlog_since is not None:
        backlog += f", standing {span(int(time.time() * 1000) - b.backlog_since)}"
    failed = "; ".join(f"{job}: {why}" for job, why in sorted(b.job_failures.items()))
    return [
        f"heartbeat   {ago} (due every {span(b.interval_s * 1000)}), host {shown(b.host)}, "
        f"coldkeep {b.version}, mode {b.mode}",
        f"last pass   {last}",
        f"backlog     {backlog}",
        f"problems    {plural(b.file_problems, 'file')} quarantined; verify failures: "
        f"{b.verify_failed} here, {b.remote_verify_failed} remote",
        f"to ship     {plural(b.pending_files, 'file')}, {human(b.pending_bytes)}",
        f"locks       {b.locked} locked, {b.legal_held} legally held",
        f"jobs        {failed or 'none failed'}",
    ]


def site_text(site: FleetSite) -> Text:
    """What the view knows of ``site``, for a person."""
    state = site.health.state
    text = Text(f"{MARKS[state]} {site.site}: {state}\n", style=f"bold {STYLES[state]}")
    for reason in site.health.reasons:
        text.append(f"  {reason}\n", style=STYLES[state])
    beat = site.heard.beat if site.heard is not None else None
    lines = _beat_lines(beat, site.health.quiet_ms) if beat is not None else ["no heartbeat"]
    snap = f"{snapshot_time(site.taken_at)} ({site.snapshot})" if site.usable else "none usable"
    text.append("\n".join([*lines, f"snapshot    {snap}"]))
    return text


class SiteScreen(ModalScreen[str | None]):
    """Dismissed with the filter to show the site's files (``f``), or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        ("f", "files", "Its files"),
        ("escape,q", "dismiss_screen", "Back"),
    ]
    DEFAULT_CSS = """
    SiteScreen { align: center middle; }
    #site-box { width: 90%; height: auto; max-height: 90%; border: round $accent;
                padding: 0 1; background: $surface; }
    """

    def __init__(self, site: FleetSite) -> None:
        super().__init__()
        self.site = site

    def compose(self) -> ComposeResult:
        with Vertical(id="site-box"):
            yield Static(site_text(self.site), id="site-detail")
            yield Static(Text("f: its files in the table · esc: back", style="dim"))

    def action_files(self) -> None:
        self.dismiss(f"site:{self.site.site}")

    def action_dismiss_screen(self) -> None:
        self.dismiss(None)
