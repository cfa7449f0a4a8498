"""The mount's tree read folder by folder from a real manifest: every folder
lists exactly the names a full read of the manifest would give (names that are
not UTF-8 too, stored as BLOBs and sorted by SQLite after every TEXT), each
file's versions, tombstones left out; a lookup never needs its folder listed;
a commit by another connection is seen at the next look."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coldkeep.core.base.names import to_db
from coldkeep.core.ops import mounttree
from coldkeep.core.ops.mounttree import Catalog, as_node, version_names
from coldkeep.core.store.manifest import Manifest
from coldkeep.core.store.pathlisting import LIST_RUN

# Names a sort by prefix gets wrong: "/" (0x2F) beside "-", "." and "0" around
# it, bytes that are not UTF-8, the last code points, a newline.
HARD = [b"a", b"a-", b"a.b", b"a0", b"ab", b"\xe9", b"a\xff", b"\xff", "é".encode(), b"\n"]
HARD += ["\U0010ffff".encode(), b"\xf4\x8f\xbf\xbf\xff", b"z"]
component = st.one_of(
    st.sampled_from(HARD),
    st.binary(min_size=1, max_size=3).filter(
        lambda b: b"/" not in b and b"\0" not in b and b not in (b".", b"..")
    ),
)
relpath = st.lists(component, min_size=1, max_size=4).map(b"/".join)
rows = st.lists(st.tuples(relpath, st.booleans()), min_size=1, max_size=25)


def _manifest(tmp: Path) -> Path:
    path = tmp / "coldkeep.db"

    async def make() -> None:
        await (await Manifest.open(path)).close()

    asyncio.run(make())
    return path


def _fill(path: Path, got: list[tuple[bytes, bool]]) -> None:
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM entries")
        for n, (raw, expired) in enumerate(got):
            db.execute(
                "INSERT INTO entries (unit, relpath, bytes, sha256, gz_path, gz_bytes, "
                "mtime_ns, mode, archived_at, status) VALUES ('u', ?, ?, 'x', ?, 1, ?, 420, ?, ?)",
                [
                    to_db(os.fsdecode(raw)),
                    n,
                    f"g{n}",
                    n % 3,
                    1000 * n,
                    "expired" if expired else "archived",
                ],
            )


def _model(got: list[tuple[bytes, bool]]) -> dict[str, dict[str, tuple[bool, list[int]]]]:
    """Every folder's names from the whole list: (a folder?, its file's version ids)."""
    folders: dict[str, dict[str, tuple[bool, list[int]]]] = {"": {}}
    for n, (raw, expired) in enumerate(got):
        if expired:
            continue
        parts = os.fsdecode(raw).split("/")
        for depth, name in enumerate(parts):
            parent = "/".join(parts[:depth])
            folder, ids = folders.setdefault(parent, {}).get(name, (False, []))
            leaf = depth == len(parts) - 1
            folders[parent][name] = (folder or not leaf, [*ids, n + 1] if leaf else ids)
    return folders


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(got=rows)
def test_every_folder_lists_what_the_whole_manifest_holds(
    tmp_path: Path, got: list[tuple[bytes, bool]]
) -> None:
    path = tmp_path / "coldkeep.db"
    if not path.exists():
        _manifest(tmp_path)
    _fill(path, got)
    _lists_as_a_whole_read(path, got)


def test_a_folder_of_many_names_lists_whole_across_reads(tmp_path: Path) -> None:
    # More names than one read of rows takes. In "big", a file's second
    # version opens each read (the first read takes one row, then LIST_RUN);
    # in "mixed", versions and subfolders fall on every side of where one ends.
    got: list[tuple[bytes, bool]] = []
    for i in range(2 * LIST_RUN):
        got.append((b"big/n%04d" % i, False))
        if len(got) in (1, 1 + LIST_RUN):
            got.append((b"big/n%04d" % i, False))
    for i in range(700):
        name = b"mixed/n%04d" % i
        got += [(name, False)] * (3 if i % 50 in (0, 49) else 1)
        if i % 100 == 99:
            got += [(name + b"/x", False), (name + b"/y/z", i % 200 == 99)]
    got.append((b"mixed/n0600", True))
    _manifest(tmp_path)
    _fill(tmp_path / "coldkeep.db", got)
    _lists_as_a_whole_read(tmp_path / "coldkeep.db", got)


def _lists_as_a_whole_read(path: Path, got: list[tuple[bytes, bool]]) -> None:
    catalog = Catalog(path)
    try:
        for rel, names in _model(got).items():
            listed = {k: as_node(v) for k, v in catalog.folder(rel).items()}
            assert {k: (v.folder, sorted(f.id for f in v.versions)) for k, v in listed.items()} == {
                k: (folder, sorted(ids)) for k, (folder, ids) in names.items()
            }, rel
            for name, (folder, ids) in names.items():
                # The same answer by lookup alone, the folder not cached.
                fresh = Catalog(path, cache_names=0)
                node = fresh.node(f"{rel}/{name}" if rel else name)
                fresh.close()
                assert node is not None
                assert (node.folder, sorted(f.id for f in node.versions)) == (folder, sorted(ids))
    finally:
        catalog.close()


def test_the_newest_version_is_the_newest_mtime_then_id_and_names_are_unique(
    tmp_path: Path,
) -> None:
    path = _manifest(tmp_path)
    _fill(path, [(b"u/v.txt", False)] * 4 + [(b"u/v.txt", True)])
    catalog = Catalog(path)
    node = catalog.node("u/v.txt")
    assert node is not None and not node.folder
    # mtime_ns = id - 1 mod 3: ids 1..4 have mtimes 0, 1, 2, 0; 5 is expired.
    assert [f.id for f in node.versions] == [1, 4, 2, 3]
    names = version_names(node.versions)
    assert len(names) == 4 and {f.id for f in names.values()} == {1, 2, 3, 4}
    catalog.close()


def test_bad_components_are_never_shown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = _manifest(tmp_path)
    _fill(path, [(b"a/../x", False), (b"a//y", False), (b"a/./z", False), (b"a/ok", False)])
    catalog = Catalog(path)
    assert set(catalog.folder("a")) == {"ok"}
    assert [r.getMessage() for r in caplog.records] == [
        "mount: archived paths with an empty, '.' or '..' component are not shown "
        "(the first under 'a'; coldkeep find lists them)"
    ]
    assert catalog.node("a/..") is None and catalog.node("a/.") is None
    catalog.close()


def test_a_commit_elsewhere_drops_the_cache_at_the_next_look(tmp_path: Path) -> None:
    path = _manifest(tmp_path)
    _fill(path, [(b"u/a", False)])
    catalog = Catalog(path)
    assert set(catalog.folder("u")) == {"a"}
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO entries (unit, relpath, bytes, sha256, gz_path, gz_bytes, mtime_ns, "
            "mode, archived_at) VALUES ('u', 'u/b', 1, 'x', 'gb', 1, 1, 420, 1)"
        )
    assert set(catalog.folder("u")) == {"a"}  # cached until the next look
    catalog.checked = time.monotonic() - mounttree.RECHECK
    assert catalog.recheck()
    assert set(catalog.folder("u")) == {"a", "b"}
    catalog.close()
