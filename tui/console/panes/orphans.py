"""Orphans & stale: everything recovery found or kept that an operator may want to
look at: leftover partials, orphan gzips, stale versions, missing gzips; and the
live files a pass quarantined (``problem``: its reason and remedy beside it).

The pane walks the archive for what recovery would settle itself (``load``: a
worker that posts ``FindingsLoaded`` as the walk goes, which the app keeps too);
the app tells it what the status lists as needing attention (``attention``).
The pane says which orphans an adopt would take (``chosen``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from coldkeep.core.archiver import Archiver
from coldkeep.core.files.recovery import RecoveryReport
from coldkeep.core.ops.status import Status
from coldkeep.core.store.connection import ManifestError

from ...text.fmt import age, human, plural
from ..kit.messages import FindingsLoaded, LoadFailed
from ..widgets.tables import cursor_key, keyed_table, sync_table
from .base import Pane

# The kinds that are things (3 orphans); the others say what a thing is (3 stale).
NOUNS = {"partial", "orphan", "restore-partial", "problem"}


@dataclass(frozen=True)
class Finding:
    path: str  # relative to archive_root (or absolute for a restore partial)
    kind: str  # partial | orphan | restore-partial | stale | missing | verify-failed
    size: int | None
    age_s: float | None
    detail: str = ""  # a problem's reason and remedy


class OrphansPane(Pane):
    TITLE: ClassVar[str] = "Orphans & stale"

    def __init__(self) -> None:
        super().__init__()
        self.findings: dict[str, Finding] = {}
        self.archiver: Archiver | None = None  # the one the walk reads (paths, ages)
        self.recovery: RecoveryReport | None = None  # what the walk found so far
        self.status: Status | None = None

    def compose(self) -> ComposeResult:
        yield Static("nothing found", id="orphans-summary", classes="pane-summary")
        yield keyed_table(
            "orphans-table",
            [("Finding", "kind"), ("Path", "path"), ("Size", "size"), ("Age", "age")],
        )

    def load(self, archiver: Archiver) -> None:
        self.archiver = archiver
        self._walk(archiver)

    @work(exclusive=True, group="findings", exit_on_error=False)
    async def _walk(self, archiver: Archiver) -> None:
        try:
            found = await archiver.recovery_scan(
                lambda so_far: self.post_message(FindingsLoaded(so_far))
            )
            self.post_message(FindingsLoaded(found))
        except (ManifestError, OSError) as err:
            self.post_message(LoadFailed("the findings", str(err)))

    def on_findings_loaded(self, message: FindingsLoaded) -> None:
        self.recovery = message.recovery
        self._show_found()

    def attention(self, status: Status) -> None:
        """The entries the status lists as needing attention (stale, missing,
        failed their verify)."""
        self.status = status
        self._show_found()

    def _show_found(self) -> None:
        """What the walk found (perhaps still walking) and what the status lists,
        one row per path."""
        if self.archiver is None:
            return
        rec, status, layout = self.recovery, self.status, self.archiver.layout
        findings: list[Finding] = []
        if rec is not None:
            findings += [Finding(layout.rel(p), "partial", None, None) for p in rec.partials]
            findings += [
                Finding(str(p), "restore-partial", None, None) for p in rec.restore_partials
            ]
            findings += [Finding(layout.rel(o.gz), "orphan", None, None) for o in rec.orphans]
            findings += [Finding(e.location, "MISSING", e.bytes, None) for e in rec.missing]
        if status is not None:
            now = self.archiver.clock() / 1000
            for e in status.attention:
                kind = "verify-failed" if e.verify_error else e.status
                findings.append(Finding(e.location, kind, e.gz_bytes, now - e.mtime_ns / 1e9))
            for p in status.file_problems:
                why = f"{p.reason} -> {p.remedy}"
                findings.append(Finding(p.relpath, "problem", None, now - p.first_seen / 1000, why))
        unique = {f.path: f for f in findings}
        walking = rec.walked if rec is not None and rec.walking else None
        self.show(list(unique.values()), walking)

    def show(self, findings: list[Finding], walking: int | None = None) -> None:
        """``walking``: the archive walk is still going, this many gzips and
        bundles seen so far (what it finds is added as it goes)."""
        self.findings = {f.path: f for f in findings}
        sync_table(
            self.query_one("#orphans-table", DataTable),
            {
                f.path: (
                    f.kind,
                    f.path.removeprefix("files/") + (f"  ({f.detail})" if f.detail else ""),
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
        text = ", ".join(
            plural(n, k) if k in NOUNS else f"{n} {k}" for k, n in sorted(counts.items())
        )
        text = text or "nothing found"
        if walking is not None:
            text += f" (walking the archive: {walking:,} seen so far)"
        self.query_one("#orphans-summary", Static).update(text)

    def chosen(self) -> tuple[str, ...]:
        """The orphan gzips an adopt takes: the selected one, else every one."""
        chosen = self.selected()
        if chosen is not None and chosen.kind == "orphan":
            return (chosen.path,)
        return tuple(f.path for f in self.findings.values() if f.kind == "orphan")

    def selected(self) -> Finding | None:
        key = cursor_key(self.query_one("#orphans-table", DataTable))
        return self.findings.get(key) if key else None
