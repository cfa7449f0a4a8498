"""store/schema.py: the migrations in order, and the version check each open makes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from coldkeep.core.store.entries import KEPT_SQL
from coldkeep.core.store.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    migration_scripts,
    version_problem,
)


def test_the_version_is_the_number_of_migrations() -> None:
    assert len(MIGRATIONS) == SCHEMA_VERSION


def test_each_migration_runs_in_one_transaction_with_its_version_bump() -> None:
    scripts = list(migration_scripts(SCHEMA_VERSION - 2))
    assert [n for n, _ in scripts] == [SCHEMA_VERSION - 1, SCHEMA_VERSION]
    for n, script in scripts:
        assert script.startswith("BEGIN IMMEDIATE;")
        assert script.endswith(f"PRAGMA user_version = {n};\nCOMMIT;")
    assert list(migration_scripts(SCHEMA_VERSION)) == []


def test_every_migration_applies_on_an_empty_database(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "db", isolation_level=None) as db:
        for _, script in migration_scripts(0):
            db.executescript(script)
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_a_newer_schema_is_refused_and_an_older_one_only_read_only() -> None:
    path = Path("/archive/coldkeep.db")
    assert version_problem(path, SCHEMA_VERSION, readonly=True) is None
    assert version_problem(path, SCHEMA_VERSION - 1, readonly=False) is None
    newer = version_problem(path, SCHEMA_VERSION + 1, readonly=False)
    assert newer is not None and "upgrade coldkeep" in newer
    older = version_problem(path, SCHEMA_VERSION - 1, readonly=True)
    assert older is not None and "needs migrating" in older


# What the triggers of schema 14 keep, against what a scan of the entries says.
_STATUSES = ("archived", "stale", "restored", "missing", "expired")
_PATHS = ("files/a.tar", b"files/\xff.gz")
_op = st.one_of(
    st.tuples(st.just("entry"), st.sampled_from(_PATHS), st.sampled_from(_STATUSES)),
    st.tuples(st.just("status"), st.integers(0, 30), st.sampled_from(_STATUSES)),
    st.tuples(st.just("move"), st.integers(0, 30), st.sampled_from(_PATHS)),
    st.tuples(st.just("drop"), st.integers(0, 30), st.none()),
    st.tuples(st.just("ship"), st.sampled_from(_PATHS), st.none()),
    st.tuples(st.just("unship"), st.sampled_from(_PATHS), st.none()),
    st.tuples(st.just("drop local"), st.sampled_from(_PATHS), st.none()),
    st.tuples(st.just("verify"), st.sampled_from(_PATHS), st.booleans()),
)


def _apply(db: sqlite3.Connection, op: tuple[str, Any, Any]) -> None:
    what, a, b = op
    ids = [r[0] for r in db.execute("SELECT id FROM entries ORDER BY id")]
    pick = ids[a % len(ids)] if ids and isinstance(a, int) else None
    if what == "entry":
        db.execute(
            "INSERT INTO entries (unit, relpath, bytes, sha256, gz_path, gz_bytes, mtime_ns, "
            "dev, ino, mode, archived_at, status, member_offset) "
            # Every entry a member at an offset of its own: any two may share a path.
            "VALUES ('u', ?, 100, 'x', ?, 30, 0, 0, 0, 33188, ?, ?, "
            "(SELECT coalesce(max(id), 0) + 1 FROM entries))",
            [f"r{len(ids)}", a, len(ids), b],
        )
    elif what == "status" and pick is not None:
        db.execute("UPDATE entries SET status = ?, bytes = bytes + 1 WHERE id = ?", [b, pick])
    elif what == "move" and pick is not None:
        db.execute(
            "UPDATE entries SET gz_path = ?, member_offset = ? WHERE id = ?", [b, pick, pick]
        )
    elif what == "drop" and pick is not None:
        db.execute("DELETE FROM entries WHERE id = ?", [pick])
    elif what == "ship":
        db.execute(
            "INSERT OR IGNORE INTO remote_objects (path, bytes, sha256, shipped_at) "
            "VALUES (?, 7, 'x', 0)",
            [a],
        )
    elif what == "drop local":
        db.execute("UPDATE remote_objects SET local_gone_at = 1 WHERE path = ?", [a])
    elif what == "verify":
        db.execute(
            "UPDATE remote_objects SET verify_error = ?, bytes = bytes + 1 WHERE path = ?",
            [None if b else "bad", a],
        )
    elif what == "unship":
        db.execute("DELETE FROM remote_objects WHERE path = ?", [a])


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(_op, max_size=40))
@example(ops=[("entry", "files/a.tar", "archived"), ("ship", "files/a.tar", None)] * 2)
@example(
    ops=[
        ("entry", "files/a.tar", "archived"),
        ("ship", "files/a.tar", None),
        ("drop local", "files/a.tar", None),
    ]
)
@example(
    ops=[
        ("ship", "files/a.tar", None),
        ("entry", "files/a.tar", "stale"),
        ("unship", "files/a.tar", None),
    ]
)
def test_the_totals_and_the_shipped_marks_follow_every_write(
    ops: list[tuple[str, Any, Any]],
) -> None:
    """Status, the console, ship and recovery read per-status totals and where
    each entry's copies are from what triggers keep: any sequence of writes
    leaves them equal to what a scan of every entry says."""
    with sqlite3.connect(":memory:", isolation_level=None) as db:
        for _, script in migration_scripts(0):
            db.executescript(script)
        for op in ops:
            _apply(db, op)
        scanned = db.execute(
            "SELECT status, remote, count(*), sum(bytes), sum(gz_bytes) FROM entries "
            "GROUP BY status, remote"
        ).fetchall()
        kept = db.execute(
            "SELECT status, remote, entries, bytes, gz_bytes FROM entry_totals WHERE entries > 0"
        ).fetchall()
        assert sorted(kept) == sorted(scanned)
        wrong = db.execute(
            "SELECT id, gz_path FROM entries WHERE remote != coalesce((SELECT 1 + "
            "(local_gone_at IS NOT NULL) FROM remote_objects WHERE path = gz_path), 0)"
        ).fetchall()
        assert wrong == []
        remote = db.execute(
            "SELECT count(*), coalesce(sum(bytes), 0), count(local_gone_at), "
            "coalesce(sum(CASE WHEN local_gone_at IS NOT NULL THEN bytes END), 0), "
            "count(verify_error) FROM remote_objects"
        ).fetchall()
        assert (
            db.execute("SELECT objects, bytes, gone, gone_bytes, bad FROM remote_totals").fetchall()
            == remote
        )


def test_the_partial_indexes_cover_the_kept_statuses(tmp_path: Path) -> None:
    # The reads name these indexes with the same WHERE, built from KEPT_SQL.
    with sqlite3.connect(tmp_path / "db", isolation_level=None) as db:
        for _, script in migration_scripts(0):
            db.executescript(script)
        where = dict(
            db.execute(
                "SELECT name, sql FROM sqlite_master WHERE name IN "
                "('entries_unshipped', 'entries_local')"
            ).fetchall()
        )
    assert where["entries_unshipped"].endswith(f"WHERE remote = 0 AND status {KEPT_SQL}")
    assert where["entries_local"].endswith(f"WHERE remote < 2 AND status {KEPT_SQL}")
