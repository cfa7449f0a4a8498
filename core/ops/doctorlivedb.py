"""Doctor's checks of the application's live database, opened read-only: WAL mode,
an index on (kind, ts), what the move's DELETE and a restore's INSERT would fire
(triggers, foreign keys) against what ``[events]`` allows, and which of its
kinds ``events.kinds`` archives.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..base.config import Settings
from ..base.configevents import EventsSettings
from ..base.ioerror import describe
from ..events.eventschema import (
    DeleteEffects,
    EventSchema,
    EventsError,
    KindsSeen,
    delete_effects,
    discover,
    journal_mode,
    open_live,
    q,
    table_kinds,
)
from .doctorfinding import Finding


def _kind_ts_index(conn: sqlite3.Connection, schema: EventSchema) -> str | None:
    """An index on the events table whose leading columns are (kind, ts)."""
    want = [schema.kind.lower(), schema.ts.lower()]
    for row in conn.execute(f"PRAGMA index_list({q(schema.table)})").fetchall():
        if row[4]:  # a partial index serves only queries whose WHERE implies its own
            continue
        cols = sorted(conn.execute(f"PRAGMA index_info({q(str(row[1]))})").fetchall())
        if [str(c[2]).lower() for c in cols[:2]] == want:
            return str(row[1])
    return None


def check_live_db(settings: Settings, db: Path) -> list[Finding]:
    cfg = settings.events
    try:
        conn = open_live(db, busy_timeout_s=cfg.busy_timeout_ms / 1000, readonly=True)
    except EventsError as err:
        return [Finding("live_db", "fail", str(err), "fix state_db in the config")]
    try:
        schema = discover(conn, db, cfg)
        mode = journal_mode(conn)
        index = _kind_ts_index(conn, schema)
        kinds = KindsSeen(tuple(table_kinds(conn, schema)), cfg.kinds)
        effects = delete_effects(conn, schema.table)
    except EventsError as err:
        return [Finding("live_db", "fail", str(err))]
    except sqlite3.Error as err:
        return [Finding("live_db", "fail", f"{db}: {describe(err)}")]
    finally:
        conn.close()
    if mode == "wal":
        mode_finding = Finding("live_db", "ok", f"{db}: table {schema.table}, WAL mode")
    else:
        mode_finding = Finding(
            "live_db",
            "fail",
            f"{db} is not in WAL mode ({mode}): each batch delete would block the "
            "application's readers, and no checkpoint can run",
            f"switch it once, with the application stopped: sqlite3 {db} "
            "'PRAGMA journal_mode=WAL' (it stays WAL)",
        )
    cols = f"{schema.table} ({schema.kind}, {schema.ts})"
    if index is not None:
        index_finding = Finding("events_index", "ok", f"index {index} on {cols}")
    else:
        index_finding = Finding(
            "events_index",
            "fail",
            f"no index on {cols}: counting and moving old rows scans the whole table",
            f"CREATE INDEX {schema.table}_{schema.kind}_{schema.ts} ON {cols} "
            "(it holds the write lock while it builds: at a quiet time)",
        )
    return [mode_finding, index_finding, _kinds(schema, kinds), *_effects(schema, effects, cfg)]


def _triggers(table: str, effects: DeleteEffects, cfg: EventsSettings, fix: str) -> Finding:
    """The triggers on the events table: which fire on the move's DELETE and
    which on a restore's INSERT, and what the config says of them."""
    if not effects.triggers:
        return Finding("events_triggers", "ok", f"no trigger on {table}")
    said, refused = [], []
    if effects.on_delete:
        said.append(f"{_listed(list(effects.on_delete))} fire on the move's DELETE")
        refused.append("the event phase")
    if effects.on_insert:
        said.append(f"{_listed(list(effects.on_insert))} on a restore's INSERT")
        refused.append("restore-events")
    if not said:
        found = f"{_listed(list(effects.triggers))} on {table}: none fires on the move or a restore"
        return Finding("events_triggers", "ok", found)
    found = f"on {table}, {'; '.join(said)}"
    if cfg.triggers == "refuse":
        return Finding("events_triggers", "fail", f"{found}: {' and '.join(refused)} refused", fix)
    return Finding("events_triggers", "warn", f'{found} (events.triggers = "fire")')


def _effects(schema: EventSchema, effects: DeleteEffects, cfg: EventsSettings) -> list[Finding]:
    """The triggers on the events table and the foreign keys referencing it:
    what the move's DELETE would set off, and what the config says of it."""
    table = f"table {schema.table}"
    fix = "drop them, or say how to treat them: events.triggers, events.foreign_keys"
    triggers = _triggers(table, effects, cfg, fix)
    keys = _listed(list(effects.foreign_keys))
    if not effects.foreign_keys:
        fks = Finding("events_foreign_keys", "ok", f"no foreign key references {table}")
    elif cfg.foreign_keys == "refuse":
        said = f"foreign keys {keys} reference {table}: the event phase is refused"
        fks = Finding("events_foreign_keys", "fail", said, fix)
    elif cfg.foreign_keys == "fire":
        said = f"foreign keys {keys} reference {table}; their ON DELETE actions run on the move"
        fks = Finding("events_foreign_keys", "warn", said + ' (events.foreign_keys = "fire")')
    else:
        said = f"foreign keys {keys} reference {table}; the rows that reference archived rows "
        fks = Finding(
            "events_foreign_keys",
            "warn",
            said + 'keep their values (events.foreign_keys = "ignore")',
        )
    return [triggers, fks]


def _kinds(schema: EventSchema, kinds: KindsSeen) -> Finding:
    """The kinds the events table has beside those ``events.kinds`` archives."""
    table = f"table {schema.table}"
    have = f"{len(kinds.in_table)} kinds in {table} ({_listed(list(kinds.in_table))})"
    if kinds.archived is None:
        return Finding("events_kinds", "ok", f"every kind is archived: {have}")
    if kinds.in_table and not kinds.moving:
        return Finding(
            "events_kinds",
            "warn",
            f"events.kinds names {_listed(sorted(kinds.archived))}: none of them has a row in "
            f"{table}, so no event row would move; it has {_listed(list(kinds.in_table))}",
            "name the table's kinds to archive in events.kinds, or leave the key out to "
            "archive every kind",
        )
    said = f"events.kinds archives {_listed(kinds.moving) or 'none'} of {have}"
    if kinds.staying:
        said += f"; staying live: {_listed(kinds.staying)}"
    if kinds.not_in_table:
        return Finding(
            "events_kinds",
            "warn",
            f"{said}; it also names {_listed(kinds.not_in_table)}, with no row in {table}",
            "check those names against the table's kinds (a typo archives nothing)",
        )
    return Finding("events_kinds", "ok", said)


def _listed(items: list[str], most: int = 8) -> str:
    shown = ", ".join(items[:most])
    return shown + (f", … ({len(items) - most} more)" if len(items) > most else "")
