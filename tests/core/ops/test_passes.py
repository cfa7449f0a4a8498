"""The pass summary's document (docs/json.md): typed in Python, the same JSON shape
for a pass that moved rows and for one in mode plan."""

from __future__ import annotations

import json

from coldkeep.core.events.moverun import Conflict, MoveReport
from coldkeep.core.ops.passes import EventsMoved, EventsPlanned, PassSummary

EVENTS_KEYS = [
    "moved",
    "already_archived",
    "kept_changed",
    "conflicts",
    "conflicts_total",
    "unparsable",
    "held",
    "months",
    "months_refused",
    "locked_rows",
    "batches",
    "wal_peak",
    "checkpointer",
    "checkpoints",
]


def test_a_pass_that_moved_rows_keeps_its_documented_events_object() -> None:
    report = MoveReport(moved=3, batches=1, wal_peak=4096, checkpointer="on", checkpoints=2)
    report.months = {"2026-02", "2026-01"}
    report.months_refused = {"2026-03": "quick_check says no"}
    report.conflicts.append(Conflict(7, "2026-01", "row 7 differs"))
    report.conflicts_total = 1
    summary = PassSummary("on", events=EventsMoved.of(report))
    document = summary.to_dict()
    events = document["events"]
    assert list(events) == EVENTS_KEYS
    assert events["conflicts"] == [{"row_id": 7, "month": "2026-01", "detail": "row 7 differs"}]
    assert events["months"] == ["2026-01", "2026-02"]
    assert events["months_refused"] == {"2026-03": "quick_check says no"}
    assert json.loads(json.dumps(document)) == document, "plain JSON, lists not tuples"


def test_mode_plan_says_only_how_many_rows_are_eligible() -> None:
    document = PassSummary("plan", events=EventsPlanned(12)).to_dict()
    assert document["events"] == {"eligible_rows": 12}
    assert PassSummary("on").to_dict()["events"] is None
    assert list(document) == [
        "mode",
        "status",
        "pass_id",
        "started_at",
        "seconds",
        "recovery",
        "files",
        "events",
        "problems",
        "out_of_space",
        "file_problems",
        "new_problems",
    ]
