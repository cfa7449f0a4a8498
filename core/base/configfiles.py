"""``[files]``: which live files are archived (include/exclude globs, minimum age),
when a unit counts as closed (a marker file, or a query on ``state_db``), and
which are packed into bundles.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .configtable import MAX_DAYS, ConfigError, Table


@dataclass(frozen=True)
class UnitClosedMarker:
    """A unit is closed when this file exists directly in its folder."""

    name: str


@dataclass(frozen=True)
class UnitClosedSql:
    """A unit is closed when this query (run on ``state_db``) returns its name."""

    query: str


UnitClosed = UnitClosedMarker | UnitClosedSql


@dataclass(frozen=True)
class FilesSettings:
    include: tuple[str, ...] = ("**/*.jsonl", "**/*.log")
    exclude: tuple[str, ...] = ()
    min_age_days: float = 14.0
    unit_closed: UnitClosed | None = None
    bundle_below: int = 1 << 20  # smaller files are packed into bundles; 0 = never
    bundle_bytes: int = 64 << 20  # a bundle's size cap


_BUNDLE_MEMBER_MAX = 64 << 20
# With a cold storage class every file up to a member's maximum is bundled by
# default: S3 adds about 40 KB to each GLACIER or DEEP_ARCHIVE object, and a
# unit's month of files in one object keeps that under 1 % where a gzip of its
# own would not (a 1 MiB log compresses to about 100 KB).
COLD_BUNDLE_BELOW = _BUNDLE_MEMBER_MAX


def read_files(t: Table, state_db: Path | None, *, cold: bool = False) -> FilesSettings:
    include = t.globs("include", FilesSettings.include)
    exclude = t.globs("exclude", FilesSettings.exclude)
    unit_closed = _unit_closed(t, state_db)
    files = FilesSettings(
        include=include,
        exclude=exclude,
        min_age_days=t.number(
            "min_age_days", FilesSettings.min_age_days, minimum=0, maximum=MAX_DAYS
        ),
        unit_closed=unit_closed,
        bundle_below=t.integer(
            "bundle_below", COLD_BUNDLE_BELOW if cold else FilesSettings.bundle_below, minimum=0
        ),
        bundle_bytes=t.integer("bundle_bytes", FilesSettings.bundle_bytes, minimum=1 << 20),
    )
    if files.bundle_below > _BUNDLE_MEMBER_MAX:
        raise ConfigError(
            t.file,
            t.key("bundle_below"),
            f"{files.bundle_below} is above {_BUNDLE_MEMBER_MAX} (members are packed in memory)",
            "bundles are for small files: keep it at a few MiB at most",
        )
    t.done()
    return files


def _unit_closed(t: Table, state_db: Path | None) -> UnitClosed | None:
    raw = t.string("unit_closed", None)
    if raw is None:
        return None
    kind, _, arg = raw.partition(":")
    arg = arg.strip()
    if kind == "marker" and arg and "/" not in arg:
        return UnitClosedMarker(arg)
    if kind == "sql" and arg:
        if state_db is None:
            raise ConfigError(
                t.file, "files.unit_closed", "a sql: rule needs a database", "set state_db"
            )
        return UnitClosedSql(arg)
    raise ConfigError(
        t.file,
        "files.unit_closed",
        f"{raw!r} is not a rule",
        'use "marker:<file name>" or "sql:SELECT unit FROM …"',
    )
