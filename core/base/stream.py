"""The event stream: what every core operation reports, as it happens, to any
number of subscribers (the console's panes, the CLI's progress, the daemon's log,
a console attached over the socket).

Invariants:
- Emitting never blocks and never fails: each subscriber has its own bounded
  queue, and a subscriber that falls behind loses events (counted in ``dropped``),
  never slows the pass down.
- Events are frozen dataclasses with a ``kind``; ``as_dict`` turns any of them
  into plain JSON-able data with stable keys (docs/json.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import types
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

from .configevents import CheckpointMode

Level = Literal["info", "warning", "error"]
Status = Literal["ok", "failed", "cancelled"]


@dataclass(frozen=True)
class Started:
    """An operation (pass, recover, restore, verify, …) began."""

    kind: ClassVar[str] = "started"
    operation: str
    detail: str = ""


@dataclass(frozen=True)
class Finished:
    kind: ClassVar[str] = "finished"
    operation: str
    status: Status
    summary: dict[str, Any]


@dataclass(frozen=True)
class Phase:
    """A phase of an operation began, with how much work it has."""

    kind: ClassVar[str] = "phase"
    phase: str  # recovery | files | events | restore | verify | rebuild
    items: int
    bytes: int = 0


@dataclass(frozen=True)
class FileStep:
    """One file's protocol step, or its progress within a step."""

    kind: ClassVar[str] = "file_step"
    op: str  # archive | restore | verify
    relpath: str
    step: str  # a StepName, or "reading" while bytes stream
    bytes_done: int
    bytes_total: int


@dataclass(frozen=True)
class FileDone:
    kind: ClassVar[str] = "file_done"
    op: str
    relpath: str
    result: str  # archived | changed | verify_failed | error | restored | exists | …
    bytes: int = 0
    gz_bytes: int = 0
    detail: str = ""


@dataclass(frozen=True)
class BatchMoved:
    """One batch of event rows moved (events/dbmove.py): what was moved, and where
    the live WAL stands."""

    kind: ClassVar[str] = "batch"
    number: int
    first_id: int
    last_id: int
    moved: int
    already: int
    months: tuple[str, ...]
    wal_bytes: int
    locked: bool


@dataclass(frozen=True)
class OrphanSeen:
    kind: ClassVar[str] = "orphan"
    gz: str  # relative to archive_root
    relpath: str
    outcome: str  # found | adopted | stale | corrupt | changed | error
    detail: str = ""


@dataclass(frozen=True)
class CheckpointRan:
    """One live WAL checkpoint (events/checkpoint.py): when, SQLite's (busy, log,
    checkpointed), the time it took, and the WAL's size before and after.
    ``error`` is set when it failed or timed out. Also the ``checkpoint``
    command's result and a row of the checkpoint log."""

    kind: ClassVar[str] = "checkpoint"
    at_ms: int
    busy: int
    log: int
    checkpointed: int
    ms: float
    wal_before: int
    wal_after: int
    mode: CheckpointMode
    error: str | None

    def to_dict(self) -> dict[str, Any]:
        """The ``checkpoint`` command's JSON: the fields, without the event's kind."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Progress:
    """How far the current phase has come: sent to a console that attaches
    mid-phase, right after that phase's ``Phase``, so its bar starts where the
    work stands instead of at zero."""

    kind: ClassVar[str] = "progress"
    phase: str
    items_done: int
    bytes_done: int


@dataclass(frozen=True)
class Notice:
    kind: ClassVar[str] = "notice"
    level: Level
    message: str


Event = (
    Started
    | Finished
    | Phase
    | FileStep
    | FileDone
    | BatchMoved
    | OrphanSeen
    | CheckpointRan
    | Progress
    | Notice
)


def as_dict(event: Event) -> dict[str, Any]:
    """``{"kind": …, **fields}``, JSON-able."""
    return {"kind": event.kind, **dataclasses.asdict(event)}


_TYPES: dict[str, type[Any]] = {
    cls.kind: cls
    for cls in (
        Started,
        Finished,
        Phase,
        FileStep,
        FileDone,
        BatchMoved,
        OrphanSeen,
        CheckpointRan,
        Progress,
        Notice,
    )
}


def from_dict(data: dict[str, Any]) -> Event | None:
    """The event ``as_dict`` made (from another process); None if it is not one:
    an unknown kind, a missing field, or a field of the wrong type (the console
    would do arithmetic on it later, far from where it came in)."""
    cls = _TYPES.get(str(data.get("kind")))
    if cls is None:
        return None
    kwargs: dict[str, Any] = {}
    for name, hint in _FIELDS[cls].items():
        if name not in data:
            continue
        value = data[name]
        if isinstance(value, list) and get_origin(hint) is tuple:
            value = tuple(value)  # JSON has lists only
        if not _fits(value, hint):
            return None
        kwargs[name] = value
    try:
        event: Event = cls(**kwargs)
    except TypeError:  # a required field missing
        return None
    return event


def _hints(cls: type[Any]) -> dict[str, Any]:
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _fits(value: Any, hint: Any) -> bool:
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        return value in args
    if origin in (Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    if origin is tuple:
        return isinstance(value, tuple) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is type(None):
        return value is None
    return isinstance(value, hint)


_FIELDS = {cls: _hints(cls) for cls in _TYPES.values()}


class Subscription:
    """One reader of the stream: iterate it; close it when done."""

    def __init__(self, stream: EventStream, maxsize: int) -> None:
        self._stream = stream
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self.dropped = 0

    def offer(self, event: Event) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            yield await self.queue.get()

    def pending(self) -> list[Event]:
        """Everything queued now, without waiting."""
        out: list[Event] = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out

    def close(self) -> None:
        self._stream._subs.discard(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# A file's progress is reported at most every this many bytes (and at its end).
PROGRESS_EVERY = 4 << 20


def thread_progress(
    stream: EventStream, op: str, relpath: str, total: int
) -> Callable[[int], None]:
    """A progress callback for a worker thread: throttled, posted to the loop
    (call it on the loop; the callback it returns is for the thread)."""
    loop = asyncio.get_running_loop()
    last = [0]

    def progress(done: int) -> None:
        if done - last[0] >= PROGRESS_EVERY or done >= total:
            last[0] = done
            loop.call_soon_threadsafe(stream.emit, FileStep(op, relpath, "reading", done, total))

    return progress


class EventStream:
    def __init__(self) -> None:
        self._subs: set[Subscription] = set()
        self._phase: Phase | None = None
        self._items_done = 0
        self._bytes_done = 0

    def subscribe(self, maxsize: int = 10_000) -> Subscription:
        sub = Subscription(self, maxsize)
        self._subs.add(sub)
        return sub

    def emit(self, event: Event) -> None:
        match event:
            case Phase():
                self._phase, self._items_done, self._bytes_done = event, 0, 0
            case FileDone(bytes=size):
                self._items_done += 1
                self._bytes_done += size
            case Finished():
                self._phase = None
        for sub in list(self._subs):
            sub.offer(event)

    def catch_up(self) -> list[Event]:
        """What a subscriber joining now needs to show where the work stands: the
        current phase and its progress (nothing between phases)."""
        if self._phase is None:
            return []
        done = Progress(self._phase.phase, self._items_done, self._bytes_done)
        return [self._phase, done]

    def notice(self, level: Level, message: str) -> None:
        self.emit(Notice(level, message))
