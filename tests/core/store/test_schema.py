"""store/schema.py: the migrations in order, and the version check each open makes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
