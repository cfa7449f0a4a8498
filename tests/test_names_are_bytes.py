"""Names are bytes: over names drawn from every byte but ``/`` and NUL, up to
255 bytes a segment, a few segments deep, each file is archived (small ones in
a bundle, the others a gzip each), excluded and held exactly as its glob says,
restored byte for byte under its exact name with its exact mtime (before 1970
too), rebuilt into the same entry by rebuild-manifest, and shown on one safe
line.

Names that end in coldkeep's temporary suffixes (``.partial``,
``.restore-partial``) are left out: those are never archived, by design.

Bounded in the suite (a few trees: each runs a pass, a verify, two restores
and a rebuild); ``make fuzz`` runs many more (HYPOTHESIS_PROFILE=long).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
import unicodedata
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.layout import Layout, is_temp_name
from coldkeep.core.base.ratelimit import UNLIMITED
from coldkeep.core.base.stream import EventStream
from coldkeep.core.files.rebuild import rebuild_manifest
from coldkeep.core.files.restore import Selection
from coldkeep.core.files.scan import scan_files
from coldkeep.core.store.legalholds import active
from coldkeep.core.store.manifest import Manifest
from coldkeep.tui.text.fmt import shown

from helpers import write_raw

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "long"
NS = 1_000_000_000
MTIMES = [1_600_000_000 * NS + 123_456_789, -400 * 86_400 * NS + 987, -1, 86_400 * NS]

SEGMENT = (
    st.one_of(
        st.binary(min_size=1, max_size=12),
        st.binary(min_size=200, max_size=255),
        st.sampled_from([b"**", b"*", b"[!a]", b"a\nb", b"\x1b[31m", b"\xe9", b"~"]),
    )
    .map(lambda b: b.replace(b"/", b"_").replace(b"\0", b"_"))
    .filter(lambda b: b not in (b".", b"..") and not is_temp_name(os.fsdecode(b)))
)
FILE = st.tuples(
    st.lists(SEGMENT, min_size=1, max_size=3).map(b"/".join),
    st.booleans(),  # a gzip of its own, else a bundle member
    st.sampled_from(MTIMES),
)


def consistent(files: list[tuple[bytes, bool, int]]) -> dict[bytes, tuple[bytes, int]]:
    """The files as a tree can hold them: no path both a file and a folder."""
    tree: dict[bytes, tuple[bytes, int]] = {}
    folders: set[bytes] = set()
    for path, big, mtime in files:
        parts = path.split(b"/")
        parents = {b"/".join(parts[:n]) for n in range(1, len(parts))}
        if path in tree or path in folders or parents & tree.keys():
            continue
        folders |= parents
        tree[path] = ((b"B" * 3000 if big else b"s") + path, mtime)
    return tree


def glob_of(name: str) -> str:
    """A glob matching exactly ``name``: its wildcard characters in classes."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in name)


def write_tree(live: Path, tree: dict[bytes, tuple[bytes, int]]) -> None:
    for raw, (data, mtime) in tree.items():
        write_raw(live, raw, data, mtime)


def read_tree(root: Path) -> dict[bytes, tuple[bytes, int]]:
    top = os.fsencode(root)
    found: dict[bytes, tuple[bytes, int]] = {}
    for dirpath, _, names in os.walk(top):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, top)] = (f.read(), os.lstat(path).st_mtime_ns)
    return found


async def entries_of(db: Path) -> set[tuple[str, str, int]]:
    async with await Manifest.open(db, readonly=True) as m:
        return {(e.relpath, e.sha256, e.mtime_ns) for e in await m.entries()}


async def check_tree(base: Path, tree: dict[bytes, tuple[bytes, int]]) -> None:
    site = base / "site"
    write_tree(site / "live", tree)
    (site / "coldkeep.toml").write_text(
        'live_root = "live"\narchive_root = "archive"\nmode = "on"\n'
        '[files]\ninclude = ["**"]\nmin_age_days = 1\nbundle_below = 1024\n'
    )
    config = load_settings(site / "coldkeep.toml")
    names = {os.fsdecode(raw) for raw in tree}
    first = min(names)

    # Excluded exactly as its glob says (the scan only reads).
    files = dataclasses.replace(config.files, exclude=(glob_of(first),))
    scan = scan_files(dataclasses.replace(config, files=files), now_ns=10**20)
    assert {c.relpath for c in scan.eligible} == names - {first}

    def archiver() -> Archiver:
        return Archiver(config, stream=EventStream())

    summary = await archiver().run_pass()
    assert summary.status == "ok" and summary.files.archived == len(tree), summary.to_dict()
    assert read_tree(site / "live") == {}

    # Held exactly as its glob says: the names back from the manifest.
    await archiver().place_hold("path", glob_of(first), "hold one")
    manifest = Layout(config.archive_root).manifest
    async with await Manifest.open(manifest, readonly=True) as m:
        holds = await active(m, 0)
        stored = await m.entries()
    assert {e.relpath for e in stored} == names
    assert {e.relpath for e in stored if holds.for_entry(e.unit, e.relpath, e.id)} == {first}

    checked = await archiver().verify()
    assert not checked.problems and checked.ok == len(tree), checked.problems

    out = base / "out"
    assert not (await archiver().restore(Selection(glob="**"), to=out)).failed
    assert read_tree(out) == tree
    one = base / "one"
    assert not (await archiver().restore(Selection(glob=glob_of(first)), to=one)).failed
    assert read_tree(one) == {os.fsencode(first): tree[os.fsencode(first)]}

    rebuilt = base / "rebuilt.db"
    done = await rebuild_manifest(
        Layout(config.archive_root), rebuilt, EventStream(), limiter=UNLIMITED
    )
    assert not done.refused and not done.unreadable, (done.refused, done.unreadable)
    assert await entries_of(rebuilt) == await entries_of(manifest)

    for name in names:
        line = shown(name)
        line.encode("utf-8")  # a terminal can take it
        assert not any(unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") for c in line)


@settings(
    max_examples=400 if LONG else 8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(FILE, min_size=1, max_size=6))
@example([(b"legal/mail\n2026.log", False, MTIMES[0]), (b"keep/a\nb", True, MTIMES[1])])
@example([(b"u/r\xe9sum\xe9.log", False, MTIMES[0]), (b"u/" + b"\xff" * 255, True, -1)])
@example([(b"u/tab\there", False, MTIMES[1]), (b"u/del\x7f\xc2\x85", False, MTIMES[1])])
def test_every_name_is_archived_held_excluded_restored_and_rebuilt_exactly(
    files: list[tuple[bytes, bool, int]],
) -> None:
    tree = consistent(files)
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(check_tree(Path(tmp), tree))
