"""Jobs: the last passes, newest first (the scheduler's jobs join them later)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.widgets import DataTable

from coldkeep.core.manifest import PassRecord

from ..fmt import clock_time, human
from ..tables import Cell, sync_table
from .base import Pane


class JobsPane(Pane):
    TITLE: ClassVar[str] = "Jobs"

    def compose(self) -> ComposeResult:
        table: DataTable[Cell] = DataTable(id="jobs-table", cursor_type="row")
        table.add_column("Pass", key="id")
        table.add_column("Started", key="started")
        table.add_column("Result", key="status")
        table.add_column("Files", key="files")
        table.add_column("Rows", key="rows")
        yield table

    def show(self, passes: list[PassRecord]) -> None:
        rows: dict[str, list[Cell]] = {}
        for p in passes:
            files = p.summary.get("files") or {}
            events = p.summary.get("events") or {}
            moved = f"{files.get('archived', 0)} {human(files.get('bytes_in', 0))}"
            rows[str(p.id)] = [
                p.id,
                clock_time(p.started_at),
                p.status,
                moved,
                events.get("moved", 0),
            ]
        sync_table(self.query_one("#jobs-table", DataTable), rows, sort_by="id", reverse=True)
