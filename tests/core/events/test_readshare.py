"""The share between reads of event rows and the moves of them: a move waits
for the readers, at most its wait, then goes ahead and the readers it
overtook know they raced; it waits once for a reader that never lets go, and
again once a move found no reader, never longer in all than it worked besides;
a DuckDB read whose rows have left when it learns it raced refuses its
answer."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coldkeep.core.base.config import parse_settings
from coldkeep.core.events.query import EventsQuery, TimeRange
from coldkeep.core.events.queryterms import QueryRaced
from coldkeep.core.events.readshare import ChangeShare, ReadShare

from helpers import Roots


def test_a_move_waits_for_a_reader_then_overtakes_it_and_the_reader_knows(
    tmp_path: Path,
) -> None:
    reader, mover = ReadShare(tmp_path), ChangeShare(tmp_path, wait_s=0.05)
    try:
        with mover.changing():  # no reader: no wait
            pass
        assert (mover.overtaken, mover.waited_s < 0.05) == (0, True)
        reader.begin()
        with mover.changing():
            pass
        assert mover.overtaken == 1 and mover.waited_s >= 0.05
        waited = mover.waited_s
        with mover.changing():  # the same reader still there: no second wait
            pass
        assert mover.overtaken == 2 and mover.waited_s - waited < 0.05
        assert reader.end() is True
        reader.begin()
        assert reader.end() is False  # nothing moved while it read
        with mover.changing():  # a free moment: the next reader is waited for again,
            pass
        reader.begin()
        with mover.changing():  # ... no longer than the mover worked besides (~0 s)
            pass
        assert mover.overtaken == 3 and mover.waited_s - waited < 0.05
        assert reader.end() is True
        waited = mover.waited_s
        mover._since -= 1.0  # as if it had worked a second
        with mover.changing():
            pass
        reader.begin()
        with mover.changing():
            pass
        assert mover.overtaken == 4 and mover.waited_s - waited >= 0.05
        assert reader.end() is True
    finally:
        reader.close()
        mover.close()


def test_a_read_that_begins_while_a_move_goes_ahead_raced(tmp_path: Path) -> None:
    reader, mover, other = ReadShare(tmp_path), ChangeShare(tmp_path, wait_s=0), ReadShare(tmp_path)
    try:
        other.begin()  # a reader in the way: the move goes ahead
        with mover.changing():
            reader.begin()  # begins mid-move
        assert reader.end() is True
        assert other.end() is True
    finally:
        for share in (reader, other):
            share.close()
        mover.close()


def test_a_duckdb_read_overtaken_after_its_rows_left_refuses_its_answer(roots: Roots) -> None:
    with sqlite3.connect(roots.base / "state.db") as db:
        db.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER, kind TEXT)")
        db.executemany("INSERT INTO events VALUES (?, ?, 'view')", [(i, i) for i in range(100)])
    settings = parse_settings(
        {
            "live_root": str(roots.live),
            "archive_root": str(roots.archive),
            "state_db": str(roots.base / "state.db"),
        },
        roots.base / "coldkeep.toml",
    )
    engine = EventsQuery(settings, TimeRange())
    mover = ChangeShare(roots.archive, wait_s=0)
    try:
        engine.open()
        batches = engine.run("SELECT id FROM events ORDER BY id").batches(size=10)
        assert len(next(batches)) == 10
        with mover.changing():  # past the wait: it goes ahead
            pass
        with pytest.raises(QueryRaced, match="run the query again"):
            list(batches)
        assert engine.fetch("SELECT count(*) FROM events")[1] == [(100,)]  # the next read is whole
    finally:
        engine.close()
        mover.close()
