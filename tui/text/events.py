"""A core event in one line, for the events worth one: the CLI's progress lines,
``coldkeep run``'s log and the console's Log pane all say it the same way.

A file that simply did what the operation is for (archived, verified ok,
shipped) gets no line of its own, nor does a phase with nothing counted; a
batch of event rows gets one every 25 batches, or when it met a lock; a
checkpoint only when it failed.
"""

from __future__ import annotations

from coldkeep.core.base.stream import (
    BatchMoved,
    CheckpointRan,
    Event,
    FileDone,
    Finished,
    Notice,
    OrphanSeen,
    Phase,
    Started,
)

from .fmt import human, shown

# A file's outcome that is what the operation is for: no line of its own.
_ROUTINE = {
    ("archive", "archived"),
    ("verify", "ok"),
    ("rebuild", "entered"),
    ("ship", "shipped"),
    ("ship", "exists"),
}


def describe(event: Event) -> str | None:
    """One line for the events worth one, else None: its names (and whatever
    else) shown safely (``shown``), as one line whatever they hold."""
    line = _describe(event)
    return None if line is None else shown(line)


def _describe(event: Event) -> str | None:
    match event:
        case Started(operation=op, detail=detail):
            return f"{op}: started {detail}".rstrip()
        case Phase(phase=phase, items=items, bytes=size) if items:
            # A phase with nothing counted (recovery, events: they count as they
            # go, and their lines say what they did) has nothing to say yet.
            extra = f", {human(size)}" if size else ""
            return f"{phase}: {items} to do{extra}"
        case FileDone(op=op, relpath=rel, result=result, detail=detail):
            if (op, result) in _ROUTINE:
                return None
            return f"  {op} {result:<13} {rel}" + (f"  ({detail})" if detail else "")
        case BatchMoved(number=n, moved=moved, already=already, months=months, locked=locked):
            if not locked and n % 25:
                return None
            state = "LOCKED, retried later" if locked else f"{moved} moved, {already} already"
            return f"  events batch {n}: {state} ({', '.join(months)})"
        case OrphanSeen(gz=gz, relpath=rel, outcome=outcome, detail=detail):
            return f"  recovery {outcome:<9} {gz}" + (f"  ({detail})" if detail else "")
        case CheckpointRan(error=error) if error:
            # One that worked is routine (a pass runs dozens; the Checkpoints pane
            # and the pass summary count them): only a failure is worth a line.
            return f"  checkpoint failed: {error}"
        case Notice(level=level, message=message):
            return f"{level.upper()}: {message}"
        case Finished(operation=op, status=status):
            return f"{op}: {status}"
    return None
