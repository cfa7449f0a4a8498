"""Orphans & stale: everything recovery found or kept that an operator may want to
look at: leftover partials, orphan gzips, stale versions, missing gzips."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from ...text.fmt import age, human
from ..tables import keyed_table, sync_table
from .base import Pane


@dataclass(frozen=True)
class Finding:
    path: str  # relative to archive_root (or absolute for a restore partial)
    kind: str  # partial | orphan | restore-partial | stale | missing | verify-failed
    size: int | None
    age_s: float | None


class OrphansPane(Pane):
    TITLE: ClassVar[str] = "Orphans & stale"

    def __init__(self) -> None:
        super().__init__()
        self.findings: dict[str, Finding] = {}

    def compose(self) -> ComposeResult:
        yield Static("nothing found", id="orphans-summary", classes="pane-summary")
        yield keyed_table(
            "orphans-table",
            [("Finding", "kind"), ("Path", "path"), ("Size", "size"), ("Age", "age")],
        )

    def show(self, findings: list[Finding], walking: int | None = None) -> None:
        """``walking``: the archive walk is still going, this many gzips and
        bundles seen so far (what it finds is added as it goes)."""
        self.findings = {f.path: f for f in findings}
        sync_table(
            self.query_one("#orphans-table", DataTable),
            {
                f.path: (
                    f.kind,
                    f.path.removeprefix("files/"),
                    "" if f.size is None else human(f.size),
                    "" if f.age_s is None else age(f.age_s),
                )
                for f in findings
            },
            sort_by="kind",
        )
        counts: dict[str, int] = {}
        for f in findings:
            counts[f.kind] = counts.get(f.kind, 0) + 1
        text = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "nothing found"
        if walking is not None:
            text += f" (walking the archive: {walking:,} seen so far)"
        self.query_one("#orphans-summary", Static).update(text)

    def selected(self) -> Finding | None:
        table = self.query_one("#orphans-table", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.findings.get(key or "")
