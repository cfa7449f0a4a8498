"""Restore (SPEC §7): files back from their gzips, event rows back from their month
databases, never overwriting anything.

Files: a ``Selection`` (entry ids, unit, path glob, mtime range, sha prefix) picks
manifest entries (the newest version of each path unless ids or all versions are
asked for); each goes through ``FileMover.restore`` (intent, ``.restore-partial``,
verify, mode and mtime, rename without replacing) to its live path or under
another directory.

Invariants:
- Every target is checked before anything is written: the entry's relpath and gz
  path must stay inside their roots (no absolute path, no ``..``, no symlinked
  parent), and a ``--to`` directory must be a real directory outside the archive,
  reached through no symlink.
- A target that exists is ``exists`` and untouched; a gzip that does not give the
  recorded bytes is ``mismatch`` and nothing is placed.
- Two versions of one path never share a target (``target_names``): under
  another directory the older ones are renamed, in place they are refused.
- Restoring in place puts the entry under a hold (``hold_days``): passes leave the
  file alone until it runs out. Event rows get the same hold, recorded BEFORE they
  are inserted, so a crash in between can never let a pass move them straight
  back.
- An event row goes back only where live has no row with its id; a live row with
  the same content is counted as already there, one with other content is a
  conflict: reported, never overwritten.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .cancel import CancelToken, in_thread
from .config import Settings
from .dbmove import Conflict
from .eventschema import EventSchema, EventsError, discover, open_live, q
from .filemove import FileMover
from .globs import GlobError, compile_globs
from .gzfile import Restored
from .layout import UnsafePath, resolve_inside
from .manifest import Entry, Manifest, now_ms
from .stream import EventStream, FileDone, Phase

RestoreOutcome = Literal["restored", "exists", "mismatch", "missing", "refused", "error"]
DAY_MS = 86_400_000


class SelectionError(ValueError):
    """A selection that cannot be used; the message says why."""


@dataclass(frozen=True)
class Selection:
    ids: tuple[int, ...] = ()
    unit: str | None = None
    glob: str | None = None
    sha: str | None = None
    after_ns: int | None = None  # the file's mtime, inclusive
    before_ns: int | None = None  # exclusive
    all_versions: bool = False

    @property
    def empty(self) -> bool:
        return not (
            self.ids or self.unit or self.glob or self.sha or self.after_ns or self.before_ns
        )


async def select_entries(manifest: Manifest, sel: Selection) -> list[Entry]:
    """The entries a selection names, oldest path first."""
    if sel.empty:
        raise SelectionError("select something: ids, --unit, --path, --sha or a time range")
    where = ["status IN ('archived', 'stale', 'restored', 'missing')"]
    params: list[Any] = []
    if sel.ids:
        where.append(f"id IN ({', '.join('?' * len(sel.ids))})")
        params += sel.ids
    if sel.unit:
        where.append("unit = ?")
        params.append(sel.unit)
    if sel.sha:
        if not all(c in "0123456789abcdef" for c in sel.sha.lower()):
            raise SelectionError(f"--sha {sel.sha!r} is not hexadecimal")
        where.append("sha256 LIKE ?")
        params.append(sel.sha.lower() + "%")
    if sel.after_ns is not None:
        where.append("mtime_ns >= ?")
        params.append(sel.after_ns)
    if sel.before_ns is not None:
        where.append("mtime_ns < ?")
        params.append(sel.before_ns)
    entries = await manifest.entries(" AND ".join(where), params, order="relpath, mtime_ns, id")
    if sel.glob:
        try:
            match = compile_globs([sel.glob])
        except GlobError as err:
            raise SelectionError(str(err)) from None
        entries = [e for e in entries if match.fullmatch(e.relpath)]
    if not sel.ids and not sel.all_versions:
        newest: dict[str, Entry] = {}
        for e in entries:  # ordered by the source's mtime: the newest version wins
            newest[e.relpath] = e
        entries = list(newest.values())
    return entries


@dataclass(frozen=True)
class FileRestore:
    entry_id: int
    relpath: str
    target: str
    result: RestoreOutcome
    detail: str = ""


@dataclass
class RestoreReport:
    files: list[FileRestore] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for f in self.files:
            out[f.result] += 1
        return dict(out)

    @property
    def failed(self) -> bool:
        return any(f.result in ("mismatch", "missing", "refused", "error") for f in self.files)


def check_restore_root(to: Path, archive_root: Path) -> Path:
    """A ``--to`` directory: absolute, reached through no symlink, outside the archive."""
    absolute = Path(os.path.abspath(to))
    if absolute.resolve() != absolute:
        raise UnsafePath(f"{to} goes through a symlink; give the real directory")
    if absolute == archive_root or archive_root in absolute.parents:
        raise UnsafePath(f"{to} is inside the archive; restore somewhere else")
    if absolute.exists() and not absolute.is_dir():
        raise UnsafePath(f"{to} is not a directory")
    return absolute


def target_names(entries: list[Entry], *, in_place: bool) -> dict[int, str]:
    """Where each entry goes, relative to the restore root: its relpath. Several
    versions of one path (``--all-versions``, or ids naming them) cannot all go
    there: under ``--to`` the newest keeps the name and each older one gets
    ``.entry-<id>`` after it; in place they are refused, before anything is
    written (an older version would take the live path, or be skipped as
    ``exists`` while an older one was placed)."""
    versions: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        versions[e.relpath].append(e)
    names: dict[int, str] = {}
    for relpath, group in versions.items():
        group.sort(key=lambda e: (e.mtime_ns, e.id))
        if len(group) > 1 and in_place:
            ids = ", ".join(str(e.id) for e in group)
            raise SelectionError(
                f"{len(group)} versions of {relpath} (entries {ids}) would all go to its "
                "live path; restore them with --to DIR (older versions get .entry-<id> "
                "after the name), or pick one by its entry id"
            )
        *older, newest = group
        names[newest.id] = relpath
        names.update((e.id, f"{relpath}.entry-{e.id}") for e in older)
    return names


async def restore_files(
    mover: FileMover,
    entries: list[Entry],
    *,
    to: Path | None,
    hold_days: float,
    stream: EventStream,
    cancel: CancelToken | None = None,
) -> RestoreReport:
    report = RestoreReport()
    names = target_names(entries, in_place=to is None)
    root = mover.live_root if to is None else to
    hold_until = mover.clock() + int(hold_days * DAY_MS) if to is None else None
    stream.emit(Phase("restore", len(entries), sum(e.bytes for e in entries)))
    for entry in entries:
        if cancel is not None:
            cancel.check()
        one = await _restore_one(mover, entry, root, names[entry.id], hold_until, cancel)
        report.files.append(one)
        stream.emit(FileDone("restore", entry.relpath, one.result, entry.bytes, 0, one.detail))
    return report


async def _restore_one(
    mover: FileMover,
    entry: Entry,
    root: Path,
    name: str,
    hold_until: int | None,
    cancel: CancelToken | None,
) -> FileRestore:
    def result(outcome: RestoreOutcome, target: str = "", detail: str = "") -> FileRestore:
        return FileRestore(entry.id, entry.relpath, target, outcome, detail)

    if entry.status == "missing":
        return result("missing", detail=f"the gzip {entry.gz_path} is missing from the archive")
    try:
        target = resolve_inside(root, name)
        mover.layout.abs(entry.gz_path)
    except UnsafePath as err:
        return result("refused", detail=f"entry {entry.id}: {err}")
    try:
        done = await mover.restore(entry, target, hold_until=hold_until, cancel=cancel)
    except FileNotFoundError as err:
        return result("missing", str(target), f"{err.filename}: not found")
    except OSError as err:
        return result("error", str(target), f"{target}: {err}")
    if isinstance(done, Restored):
        return result("restored", str(target))
    if done.kind == "exists":
        return result("exists", str(target), f"{target} exists; left untouched")
    return result("mismatch", str(target), done.detail)


# event rows --------------------------------------------------------------------


@dataclass
class EventsRestoreReport:
    restored: int = 0
    already_live: int = 0
    conflicts: list[Conflict] = field(default_factory=list)
    months: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ArchivedMonth:
    month: str
    kind: str
    rows: int


def _count_month(db: Path, kind_col: str, table: str) -> list[tuple[str, int]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        sql = f"SELECT {q(kind_col)}, count(*) FROM {q(table)} GROUP BY 1 ORDER BY 1"
        return [(str(k), int(n)) for k, n in conn.execute(sql)]
    finally:
        conn.close()


async def archived_months(settings: Settings, events_dir: Path) -> list[ArchivedMonth]:
    """What the month DBs hold, per month and kind (read-only)."""
    cfg = settings.events
    paths = await asyncio.to_thread(lambda: sorted(events_dir.glob("*.db")))
    out: list[ArchivedMonth] = []
    for path in paths:
        try:
            counts = await asyncio.to_thread(_count_month, path, cfg.kind_column, cfg.table)
        except sqlite3.DatabaseError:
            continue  # a damaged month shows as missing here; the pass reports it
        out += [ArchivedMonth(path.stem, kind, n) for kind, n in counts]
    return out


def _live_schema(settings: Settings) -> EventSchema:
    assert settings.state_db is not None
    live = open_live(settings.state_db, busy_timeout_s=settings.events.busy_timeout_ms / 1000)
    try:
        return discover(live, settings.state_db, settings.events)
    finally:
        live.close()


def _month_rows(db: Path, schema: EventSchema, kinds: set[str] | None) -> list[tuple[Any, ...]]:
    """The live table's columns, in its order, of the archived rows of ``kinds``."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        sql = f"SELECT {schema.select_columns} FROM {q(schema.table)}"
        params: list[str] = []
        if kinds:
            sql += f" WHERE {q(schema.kind)} IN ({', '.join('?' * len(kinds))})"
            params = sorted(kinds)
        return conn.execute(f"{sql} ORDER BY {q(schema.pk)}", params).fetchall()
    finally:
        conn.close()


def _put_back(
    settings: Settings,
    schema: EventSchema,
    rows: list[tuple[Any, ...]],
    month: str,
    report: EventsRestoreReport,
) -> None:
    """Insert the rows whose id live does not have, in one short transaction."""
    assert settings.state_db is not None
    live = open_live(settings.state_db, busy_timeout_s=settings.events.busy_timeout_ms / 1000)
    table, pk, cols, at = q(schema.table), q(schema.pk), schema.select_columns, schema.pk_index
    try:
        live.execute("BEGIN IMMEDIATE")
        try:
            ids = [r[at] for r in rows]
            have: dict[Any, tuple[Any, ...]] = {}
            for i in range(0, len(ids), 900):
                chunk = ids[i : i + 900]
                sql = f"SELECT {cols} FROM {table} WHERE {pk} IN ({', '.join('?' * len(chunk))})"
                have.update({r[at]: r for r in live.execute(sql, chunk)})
            new = []
            for row in rows:
                there = have.get(row[at])
                if there is None:
                    new.append(row)
                elif there == row:
                    report.already_live += 1
                else:
                    report.conflicts.append(
                        Conflict(
                            row[at],
                            month,
                            f"live has row {row[at]} with other content; "
                            "the archived row was not restored over it",
                        )
                    )
            marks = ", ".join("?" * len(schema.columns))
            live.executemany(f"INSERT INTO {table} ({cols}) VALUES ({marks})", new)
            live.execute("COMMIT")
            report.restored += len(new)
        except BaseException:
            live.execute("ROLLBACK")
            raise
    finally:
        live.close()


async def restore_events(
    settings: Settings,
    events_dir: Path,
    manifest: Manifest,
    *,
    kinds: set[str] | None,
    months: list[str] | None,
    hold_days: float,
    cancel: CancelToken | None = None,
    batch_rows: int = 2000,
) -> EventsRestoreReport:
    """Put archived event rows (of ``kinds`` in ``months``; None: all) back into
    the live table, each under a hold first."""
    if settings.state_db is None:
        raise EventsError("no state_db is configured: there are no event rows to restore")
    token = cancel or CancelToken()
    schema = await in_thread(token, _live_schema, settings)
    paths = await asyncio.to_thread(lambda: sorted(events_dir.glob("*.db")))
    available = [p.stem for p in paths]
    unknown = sorted(set(months or ()) - set(available))
    if unknown:
        have = ", ".join(available) or "none"
        raise EventsError(f"no archived events for {', '.join(unknown)} (archived months: {have})")
    report = EventsRestoreReport()
    until = now_ms() + int(hold_days * DAY_MS)
    for month in available if months is None else sorted(set(months)):
        rows = await in_thread(token, _month_rows, events_dir / f"{month}.db", schema, kinds)
        report.months.append(month)
        for i in range(0, len(rows), batch_rows):
            token.check()
            chunk = rows[i : i + batch_rows]
            await manifest.hold_event_rows([r[schema.pk_index] for r in chunk], until)
            await in_thread(token, _put_back, settings, schema, chunk, month, report)
    return report
