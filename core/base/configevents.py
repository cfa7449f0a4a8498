"""``[events]``: the application's events table (its name, columns, time format
and the kinds archived) and how the event move treats it (batch size, busy
timeout, WAL checkpoints, what to do about its triggers and foreign keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from .configtable import MAX_DAYS, ConfigError, Table

TsFormat = Literal["ms", "s", "iso"]


# RESTART and TRUNCATE wait on the application's readers and writers: never the default.
CheckpointMode = Literal["PASSIVE", "FULL", "RESTART", "TRUNCATE"]


# What the event move does when the application's triggers on its events table,
# or foreign keys of other tables referencing it, would act on its DELETE:
# "refuse" the event phase (the default), or "fire" them (the operator accepts
# that they run). Foreign keys may also be "ignore"d: enforcement stays off on
# coldkeep's connection and the referencing rows keep their values.
TriggerPolicy = Literal["refuse", "fire"]


ForeignKeyPolicy = Literal["refuse", "fire", "ignore"]


@dataclass(frozen=True)
class EventsSettings:
    table: str = "events"
    kind_column: str = "kind"
    ts_column: str = "ts"
    ts_format: TsFormat = "ms"
    kinds: frozenset[str] | None = None  # the kinds archived; None: every kind
    min_age_days: float = 30.0
    batch_rows: int = 2600
    busy_timeout_ms: int = 5000
    checkpoint_every: int = 8  # batches
    checkpoint_wal_bytes: int = 16 << 20
    wal_restart_bytes: int = 32 << 20  # 0: never wait for the checkpoints
    checkpoint_timeout_s: float = 30.0
    checkpoint_mode: CheckpointMode = "PASSIVE"
    triggers: TriggerPolicy = "refuse"
    foreign_keys: ForeignKeyPolicy = "refuse"


def _kinds(t: Table) -> frozenset[str] | None:
    """``events.kinds``: the kinds archived (every other one stays live), or None
    for every kind (the key left out)."""
    kinds = t.strings("kinds", ())
    if "kinds" in t.data and not kinds:
        raise ConfigError(
            t.file,
            t.key("kinds"),
            "an empty list archives no event row",
            "name the kinds to archive, or leave the key out to archive every kind",
        )
    return frozenset(kinds) if kinds else None


def read_events(t: Table) -> EventsSettings:
    events = EventsSettings(
        table=t.identifier("table", EventsSettings.table),
        kind_column=t.identifier("kind_column", EventsSettings.kind_column),
        ts_column=t.identifier("ts_column", EventsSettings.ts_column),
        ts_format=t.choice("ts_format", EventsSettings.ts_format, get_args(TsFormat)),
        kinds=_kinds(t),
        min_age_days=t.number(
            "min_age_days", EventsSettings.min_age_days, minimum=0, maximum=MAX_DAYS
        ),
        batch_rows=t.integer("batch_rows", EventsSettings.batch_rows, minimum=1),
        busy_timeout_ms=t.integer(
            "busy_timeout_ms", EventsSettings.busy_timeout_ms, minimum=0, maximum=86_400_000
        ),
        checkpoint_every=t.integer("checkpoint_every", EventsSettings.checkpoint_every, minimum=1),
        checkpoint_wal_bytes=t.integer(
            "checkpoint_wal_bytes", EventsSettings.checkpoint_wal_bytes, minimum=0
        ),
        wal_restart_bytes=t.integer(
            "wal_restart_bytes", EventsSettings.wal_restart_bytes, minimum=0
        ),
        checkpoint_timeout_s=t.number(
            "checkpoint_timeout_s", EventsSettings.checkpoint_timeout_s, minimum=0.1
        ),
        checkpoint_mode=t.choice(
            "checkpoint_mode", EventsSettings.checkpoint_mode, get_args(CheckpointMode)
        ),
        triggers=t.choice("triggers", EventsSettings.triggers, get_args(TriggerPolicy)),
        foreign_keys=t.choice(
            "foreign_keys", EventsSettings.foreign_keys, get_args(ForeignKeyPolicy)
        ),
    )
    t.done()
    return events
