"""What retention lets go, decided in the manifest's SQL: held to a plain
reading of the rule over generated archives (units with and without their own
retention, bundles whose members differ in age, entries already expired)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from coldkeep.core.store.manifest import Manifest

_UNITS = ("a", "b", "c")
_STATUSES = ("archived", "stale", "restored", "missing", "expired")
# (unit, archive file, mtime in ns, status)
_entry = st.tuples(
    st.sampled_from(_UNITS),
    st.integers(0, 5),
    st.integers(0, 30),
    st.sampled_from(_STATUSES),
)


def _expected(
    entries: list[tuple[str, int, int, str]], cutoffs: dict[str, int], otherwise: int | None
) -> list[str]:
    files: dict[str, list[tuple[str, int]]] = {}
    for unit, gz, mtime, status in entries:
        if status != "expired":
            files.setdefault(f"files/{gz}.gz", []).append((unit, mtime))
    due = []
    for path, members in sorted(files.items()):
        limits = [cutoffs.get(unit, otherwise) for unit, _ in members]
        if all(lim is not None and m <= lim for (_, m), lim in zip(members, limits, strict=True)):
            due.append(path)
    return due


async def _found(
    db: Path,
    entries: list[tuple[str, int, int, str]],
    cutoffs: dict[str, int],
    otherwise: int | None,
) -> list[str]:
    async with await Manifest.open(db) as m:
        for n, (unit, gz, mtime, status) in enumerate(entries):
            await m.run(
                "INSERT INTO entries (unit, relpath, bytes, sha256, gz_path, gz_bytes, mtime_ns, "
                "dev, ino, mode, archived_at, status, member_offset) "
                "VALUES (?, ?, 1, 'x', ?, 1, ?, 0, 0, 33188, 0, ?, ?)",
                [unit, f"r{n}", f"files/{gz}.gz", mtime, status, n],
            )
        return [f.gz_path for f in await m.past_retention(cutoffs, otherwise)]


@settings(max_examples=60, deadline=None)
@given(
    entries=st.lists(_entry, max_size=25),
    cutoffs=st.dictionaries(st.sampled_from(_UNITS), st.integers(0, 30), max_size=2),
    otherwise=st.none() | st.integers(0, 30),
)
@example(
    entries=[("a", 0, 5, "archived"), ("b", 0, 5, "archived")], cutoffs={"a": 9}, otherwise=None
)
def test_a_file_is_due_when_every_live_entry_is_past_its_units_cutoff(
    entries: list[tuple[str, int, int, str]], cutoffs: dict[str, int], otherwise: int | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        found = asyncio.run(_found(Path(tmp) / "coldkeep.db", entries, cutoffs, otherwise))
    assert found == _expected(entries, cutoffs, otherwise)
