"""The index of paths beside the manifest: a word's candidates are exactly the
covered entries whose path holds it, whatever the bytes and wherever a read's
chunk ends; what was archived since is appended; and an index a crash broke,
another manifest's or one this process has not checked is never believed."""

from __future__ import annotations

import functools
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coldkeep.core.base.names import to_db
from coldkeep.core.files import pathindex
from coldkeep.core.files.pathindex import HEADER_BYTES, PathIndex, Stopped
from coldkeep.core.store.schema import migration_scripts

Rows = Sequence[tuple[int, bytes]]

# Paths of a few pieces, so that words meet them often: a separator, ASCII, a
# UTF-8 letter and a byte that is not UTF-8 (the manifest keeps that name as a BLOB).
PIECE = st.sampled_from([b"a", b"b", b"ab", b"/", b"\xc3\xa9", b"\xe9", b"part-0"])
PATH = st.lists(PIECE, min_size=1, max_size=12).map(b"".join)
WORD = st.lists(PIECE, min_size=1, max_size=3).map(b"".join)


@functools.cache
def _empty_manifest() -> bytes:
    """A manifest at the current schema with nothing in it, made once: its
    migrations take 30 ms, and the property below wants one an example."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "coldkeep.db"
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            for _, script in migration_scripts(0):
                conn.executescript(script)
        finally:
            conn.close()  # its WAL checkpointed into the file
        return db.read_bytes()


def create(db: Path) -> None:
    db.write_bytes(_empty_manifest())


def insert(db: Path, rows: Rows) -> None:
    with sqlite3.connect(db) as conn:  # one transaction
        conn.executemany(
            "INSERT INTO entries (id, unit, relpath, bytes, sha256, gz_path, gz_bytes, "
            "mtime_ns, dev, ino, mode, archived_at, status) "
            "VALUES (?, 'u', ?, 1, 'x', ?, 1, 0, 0, 0, 33188, 0, 'archived')",
            [(i, to_db(os.fsdecode(p)), f"files/{i}.gz") for i, p in rows],
        )


def holding(rows: Rows, word: bytes) -> list[int]:
    return [i for i, p in rows if word in p]


@st.composite
def entries(draw: st.DrawFn) -> list[tuple[int, bytes]]:
    """Entries with ascending ids, in runs with gaps between (a manifest made by
    coldkeep has one run; the index must not rely on that)."""
    paths = draw(st.lists(PATH, min_size=1, max_size=60))
    gaps = draw(st.lists(st.sampled_from([1, 1, 1, 2, 50]), min_size=len(paths)))
    ids, last = [], 0
    for gap in gaps[: len(paths)]:
        last += gap
        ids.append(last)
    return list(zip(ids, paths, strict=True))


@settings(max_examples=150, deadline=None)
@given(
    rows=entries(),
    words=st.lists(WORD, min_size=1, max_size=4),
    split=st.floats(0, 1),
    chunk=st.sampled_from([3, 7, 16, 64, 1 << 20]),
)
def test_the_candidates_are_exactly_the_paths_that_hold_the_word(
    rows: list[tuple[int, bytes]], words: list[bytes], split: float, chunk: int
) -> None:
    """Built from the first part of the entries, then appended the rest to;
    read in chunks shorter than a path, of a few paths, or of all."""
    cut = int(len(rows) * split)
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(pathindex, "_CHUNK", chunk)
        db = Path(tmp) / "coldkeep.db"
        create(db)
        insert(db, rows[:cut])
        index = PathIndex(db)
        index.prepare()
        for word in words:
            assert index.candidates(word, cap=10**6) == (
                holding(rows[:cut], word),
                rows[cut - 1][0] if cut else 0,
            )
        insert(db, rows[cut:])
        index.prepare()
        # Another process's view: it checks the file before it reads it.
        other = PathIndex(db)
        assert other.candidates(words[0], cap=10**6) is None
        other.prepare()
        for word in words:
            expected = (holding(rows, word), rows[-1][0])
            assert index.candidates(word, cap=10**6) == expected
            assert other.candidates(word, cap=10**6) == expected


def built(tmp_path: Path, rows: Rows) -> tuple[Path, PathIndex]:
    db = tmp_path / "coldkeep.db"
    create(db)
    insert(db, rows)
    index = PathIndex(db)
    index.prepare()
    return db, index


ROWS = [(i, f"unit-{i % 7}/2026/part-{i:06d}.jsonl".encode()) for i in range(1, 3001)]


def test_records_a_power_cut_lost_under_a_kept_header_are_built_again(tmp_path: Path) -> None:
    """The header promises records the disk no longer has (zeros where a path
    was): the next process's check finds it and builds the index anew."""
    db, index = built(tmp_path, ROWS)
    with open(index.path, "r+b") as f:
        f.seek(HEADER_BYTES + 1000)
        f.write(bytes(5000))
    after = PathIndex(db)
    after.prepare()
    assert after.candidates(b"part-000500", cap=10) == ([500], 3000)
    assert after.candidates(b"part-0002", cap=1000) == (holding(ROWS, b"part-0002"), 3000)


@pytest.mark.parametrize("damage", ["header", "magic", "last path"])
def test_an_index_that_does_not_read_or_disagrees_is_built_again(
    tmp_path: Path, damage: str
) -> None:
    db, index = built(tmp_path, ROWS)
    inode = index.path.stat().st_ino
    if damage == "last path":  # the manifest's last covered entry says another path
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE entries SET relpath = 'elsewhere' WHERE id = 3000")
    else:
        with open(index.path, "r+b") as f:
            f.seek(0 if damage == "magic" else 40)
            f.write(b"\xff" * 8)
    again = PathIndex(db)
    again.prepare()
    assert index.path.stat().st_ino != inode
    word = b"elsewhere" if damage == "last path" else b"part-003000"
    assert again.candidates(word, cap=10) == ([3000], 3000)


def test_another_manifest_at_the_same_name_is_not_the_one_indexed(tmp_path: Path) -> None:
    """A manifest fetched back from the remote tier replaces the file: the index
    names the inode it was built from, so it is neither read nor appended to."""
    db, index = built(tmp_path, ROWS)
    other = tmp_path / "other.db"
    create(other)
    insert(other, [(1, b"fetched/back.jsonl")])
    os.replace(other, db)
    assert index.candidates(b"part-", cap=10) is None
    index.prepare()
    assert index.candidates(b"back", cap=10) == ([1], 1)
    assert index.candidates(b"part-", cap=10) == ([], 1)


def test_bytes_past_the_recorded_end_are_never_read(tmp_path: Path) -> None:
    """An append a crash cut short left records past the header's end: they
    are not candidates, and the next append writes over them."""
    db, index = built(tmp_path, ROWS)
    with open(index.path, "ab") as f:
        f.write(b"ghost/part-999999.jsonl\0")
    assert index.candidates(b"ghost", cap=10) == ([], 3000)
    insert(db, [(3001, b"late/arrival.jsonl")])
    index.prepare()
    assert index.candidates(b"ghost", cap=10) == ([], 3001)
    assert index.candidates(b"arrival", cap=10) == ([3001], 3001)
    assert PathIndex(db).candidates(b"x", cap=1) is None  # not checked by that one


def test_a_word_in_more_paths_than_the_cap_stops_at_one_past_it(tmp_path: Path) -> None:
    _, index = built(tmp_path, ROWS)
    found = index.candidates(b"unit-3", cap=100)
    assert found is not None and found[0] == holding(ROWS, b"unit-3")[:101]


def test_a_scan_is_given_up_when_its_stop_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pathindex, "_CHUNK", 4096)
    _, index = built(tmp_path, ROWS)
    asked = 0

    def replaced() -> bool:
        nonlocal asked
        asked += 1
        return asked > 3

    with pytest.raises(Stopped):
        index.candidates(b"nowhere", cap=10, stop=replaced)
    assert asked == 4  # asked between chunks, and given up at the first yes


def test_a_build_a_crash_left_is_swept_and_one_under_way_is_not(tmp_path: Path) -> None:
    db = tmp_path / "coldkeep.db"
    create(db)
    insert(db, ROWS[:10])
    dead = tmp_path / "coldkeep.paths.0badc0de.partial"
    alive = tmp_path / "coldkeep.paths.12345678.partial"
    for partial in (dead, alive):
        partial.write_bytes(b"half")
    old = time.time() - 3600
    os.utime(dead, (old, old))
    PathIndex(db).prepare()
    assert not dead.exists() and alive.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if "paths" in p.name) == [
        "coldkeep.paths",
        alive.name,
    ]


def test_a_copy_of_the_index_moved_with_the_archive_is_rebuilt(tmp_path: Path) -> None:
    """The archive copied elsewhere (a new inode for the manifest) carries its
    index along: it names the old manifest, so the copy builds its own."""
    (tmp_path / "a").mkdir()
    _, index = built(tmp_path / "a", ROWS)
    moved = tmp_path / "b"
    shutil.copytree(tmp_path / "a", moved)
    there = PathIndex(moved / "coldkeep.db")
    there.prepare()
    assert there.candidates(b"part-000007", cap=5) == ([7], 3000)
    assert index.candidates(b"part-000007", cap=5) == ([7], 3000)
