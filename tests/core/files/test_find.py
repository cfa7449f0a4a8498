"""find's narrowing in SQL (the glob's literal prefix as an index range, its
longest literal piece as ``instr``, the BLOB names by their bytes) finds exactly
what the glob engine, or the substring, says over every name: generated
patterns against names at the edges (newline, bytes that are not UTF-8, the
last code point, characters around the surrogates)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.errors import UsageError
from coldkeep.core.base.globs import GlobError, compile_glob
from coldkeep.core.files.find import NothingFound, find, literal_pieces
from coldkeep.core.files.pathindex import PathIndex
from coldkeep.core.store.entries import NewEntry
from coldkeep.core.store.manifest import Manifest

NAMES = [
    "a", "ab.log", "a/b.log", "a/b/c.log", "a/bb/c.log", "b/a", "a\nb.log", "a/\nb",
    os.fsdecode(b"r\xe9sum\xe9.log"), os.fsdecode(b"a/\xe9/b.log"), os.fsdecode(b"a/\xff\xff"),
    "a/\U0010ffff", "a/\U0010ffffb", "a/\ud7ff", "a/\ue000", "\uffff/a", "é/x", "a/[x].log",
    "a/*", "x/y/z/a.log",
]  # fmt: skip
PIECES = [
    "a", "b", "/", "*", "**", "?", "[ab]", "[!a]", ".log", "\n", "é", "\U0010ffff", "\ud7ff",
    os.fsdecode(b"\xe9"), os.fsdecode(b"\xff"), "[", "]",
]  # fmt: skip


def _entry(n: int, relpath: str) -> NewEntry:
    return NewEntry(
        unit="u", relpath=relpath, bytes=n, sha256=f"{n:064x}", gz_path=f"files/{n}.gz",
        gz_bytes=1, mtime_ns=n, dev=None, ino=None, mode=0o100644, archived_at=n,
    )  # fmt: skip


@pytest.fixture(scope="module", params=["manifest", "index of paths"])
def manifest(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """The names in a manifest; or half of them there when the index of paths
    beside it was built, and the rest archived since (find reads both)."""
    path = tmp_path_factory.mktemp("find") / "coldkeep.db"
    half = len(NAMES) // 2 if request.param == "index of paths" else len(NAMES)

    async def add(first: int, names: list[str]) -> None:
        async with await Manifest.open(path) as m:
            await m.add_entries([_entry(n, name) for n, name in enumerate(names, first)])

    asyncio.run(add(1, NAMES[:half]))
    if half < len(NAMES):
        PathIndex(path).prepare()
        asyncio.run(add(half + 1, NAMES[half:]))
    return path


def _expected(pattern: str) -> set[str]:
    if any(c in pattern for c in "*?["):
        match = compile_glob(pattern).fullmatch
        return {n for n in NAMES if match(n)}
    return {n for n in NAMES if pattern in n}


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(PIECES), min_size=1, max_size=6))
@example(parts=["a", "/", "*"])
@example(parts=["a", "/", "\U0010ffff", "*"])
@example(parts=["a", "/", "\ud7ff", "*"])
@example(parts=["a", "/", os.fsdecode(b"\xff"), "*"])
@example(parts=["**", "/", "*", ".log"])
@example(parts=[os.fsdecode(b"\xe9")])
def test_find_finds_what_the_glob_engine_matches(manifest: Path, parts: list[str]) -> None:
    pattern = "".join(parts)
    assume(not pattern.startswith(("/", "./")))
    try:
        want = _expected(pattern)
    except GlobError:
        with pytest.raises(UsageError):
            asyncio.run(find(manifest, pattern, Path("/live")))
        return
    if not want:
        with pytest.raises(UsageError):  # NothingFound, or a glob the engine refuses
            asyncio.run(find(manifest, pattern, Path("/live")))
        return
    found = asyncio.run(find(manifest, pattern, Path("/live")))
    assert {v.entry.relpath for v in found.versions} == want


def test_a_piece_never_spans_a_double_star() -> None:
    assert literal_pieces("**/b.log") == ["b.log"]
    assert literal_pieces("a/**/bcd") == ["bcd", "a"]
    assert literal_pieces("x[abcdef]y") == ["x", "y"]
    assert asyncio.run(_raises(Path("/nowhere/coldkeep.db")))


async def _raises(path: Path) -> bool:
    try:
        await find(path, "**", Path("/live"))
    except NothingFound as err:
        return "no pass has run" in str(err)
    return False
