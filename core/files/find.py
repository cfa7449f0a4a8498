"""Finding archived files and their versions in the manifest, without reading
an archive file: ``find PATTERN`` (every version of every path it matches) and
``versions PATH`` (every version of one path), each with its size, when it was
archived, where its bytes are (``gzip``, ``bundle`` member, ``remote`` only,
``missing``, ``expired``) and the legal hold that covers it.

A PATTERN with any of ``*``, ``?`` or ``[`` is a glob of the one glob engine
(globs.py), anchored at live_root like ``restore --path`` and ``hold --path``;
one without is a substring of the path (as the restore browser's filter
words), so ``find app.log`` finds every ``app.log`` at any depth.

Invariants:
- Read-only: the manifest is opened read-only, no lock is taken, nothing is
  written; a missing manifest is said in one line.
- Fast at a million entries: the glob's literal prefix is a range of the
  relpath index, its longest literal piece an ``instr`` in SQL; only those
  candidates meet the glob's regex, and only the matches are read whole. A
  pattern without a literal prefix asks the index of paths beside the manifest
  (pathindex.py) for its longest piece when the console or the scheduler left
  one there: a tenth of the relpath index's scan at 10,000,000 entries.
- Names are bytes: a name that is not UTF-8 (a BLOB) is found like any other,
  and given back exactly (the text client escapes it, --json carries it).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..base.errors import UsageError
from ..base.globs import compile_glob
from ..base.times import now_ms
from ..store.entries import Entry
from ..store.legalholds import Hold, active
from ..store.manifest import Manifest
from ..store.remoteobjects import copies_of
from .pathindex import PathIndex

Location = Literal["gzip", "bundle", "remote", "missing", "expired"]
_GLOB_CHARS = "*?["
# Above this many paths holding the word, the relpath index is scanned instead.
FROM_INDEX_AT_MOST = 50_000


class NothingFound(UsageError, ValueError):
    """A pattern or path that names no archived file; the message says which."""


@dataclass(frozen=True)
class Version:
    """One archived version of a file, and where its bytes are."""

    entry: Entry
    location: Location
    copies: str  # local | remote | local + remote | none
    hold: Hold | None

    def to_dict(self) -> dict[str, Any]:
        e = self.entry
        hold = self.hold
        return {
            "id": e.id,
            "relpath": e.relpath,
            "unit": e.unit,
            "archived_at": e.archived_at,
            "mtime_ns": e.mtime_ns,
            "bytes": e.bytes,
            "sha256": e.sha256,
            "status": e.status,
            "location": self.location,
            "copies": self.copies,
            "gz_path": e.gz_path,
            "member_offset": e.member_offset,
            "member_length": e.member_length,
            "expired_at": e.expired_at,
            "hold": None
            if hold is None
            else {"id": hold.id, "scope": hold.scope, "target": hold.target, "reason": hold.reason},
        }


@dataclass(frozen=True)
class Found:
    """``find``: the versions of every path a pattern matches, path order, each
    path's newest first."""

    pattern: str
    match: Literal["glob", "substring"]
    versions: list[Version]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "match": self.match,
            "versions": [v.to_dict() for v in self.versions],
        }


@dataclass(frozen=True)
class FleetFound:
    """``find --fleet`` (ops/fleet.py): each site's versions a pattern matches (as of its newest
    manifest snapshot), and the sites that could not be searched, with why."""

    pattern: str
    sites: dict[str, Found]
    problems: dict[str, str]

    def to_dict(self) -> dict[str, object]:
        return {
            "pattern": self.pattern,
            "sites": {site: found.to_dict() for site, found in self.sites.items()},
            "problems": self.problems,
        }


@dataclass(frozen=True)
class Versions:
    """``versions``: every version of one path, newest first."""

    relpath: str
    versions: list[Version]

    def to_dict(self) -> dict[str, Any]:
        return {"relpath": self.relpath, "versions": [v.to_dict() for v in self.versions]}


def relative(path: str, live_root: Path | None, what: str) -> str:
    """``path`` relative to live_root: as given, or an absolute path inside it
    (None: no live_root to be inside, a site's snapshot searched from afar)."""
    if not path.startswith("/"):
        return path.removeprefix("./")
    if live_root is None:
        raise UsageError(f"{what} {path!r}: give it relative to live_root")
    root = os.fsdecode(live_root).rstrip("/") + "/"
    if not path.startswith(root) or path == root:
        raise UsageError(f"{what} {path!r} is not inside live_root ({live_root}): give it relative")
    return path[len(root) :]


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in _GLOB_CHARS)


def literal_prefix(pattern: str) -> str:
    """What every path a glob matches starts with: all before its first wildcard."""
    cut = min((i for i in map(pattern.find, _GLOB_CHARS) if i >= 0), default=len(pattern))
    return pattern[:cut]


def literal_pieces(pattern: str) -> list[str]:
    """The runs of literal characters every match contains, longest first: each
    within one segment (``**`` may match no segment at all, so never across a
    ``/``), outside ``[...]``."""
    pieces: list[str] = []
    for seg in pattern.split("/"):
        run, i = "", 0
        while i < len(seg):
            c = seg[i]
            if c in "*?[":
                pieces.append(run)
                run = ""
                if c == "[":
                    i = seg.find("]", i + 2 if seg[i + 1 : i + 2] in ("!", "]") else i + 1)
            else:
                run += c
            i += 1
        pieces.append(run)
    return sorted({p for p in pieces if p}, key=lambda p: (-len(p), p))


def _newest_first(e: Entry) -> tuple[int, int, int]:
    # Newest as restore takes it: by the file's mtime, then when it was archived.
    return (-e.mtime_ns, -e.archived_at, -e.id)


async def _described(manifest: Manifest, entries: list[Entry]) -> list[Version]:
    """Each entry with its location, its copies and the hold that covers it."""
    holds = await active(manifest, now_ms())
    remote = await copies_of(manifest, (e.gz_path for e in entries))
    out: list[Version] = []
    for e in entries:
        copies = "local" if e.gz_path not in remote else "local + remote"
        if e.gz_path in remote and not remote[e.gz_path]:
            copies = "remote"
        location: Location = "bundle" if e.member_offset is not None else "gzip"
        if e.status == "expired":
            location, copies = "expired", "none"
        elif copies == "remote":
            location = "remote"
        elif e.status == "missing":
            location = "missing"
        hold = holds.for_entry(e.unit, e.relpath, e.id) if holds else None
        out.append(Version(e, location, copies, hold))
    return out


async def _open(manifest_path: Path) -> Manifest:
    manifest = await Manifest.open_existing(manifest_path)
    if manifest is None:
        raise NothingFound(f"{manifest_path} does not exist yet (no pass has run)")
    return manifest


def _nothing(pattern: str, glob: bool) -> str:
    if not glob:
        return f"no archived file's path contains {pattern!r}"
    anywhere = (
        ""
        if pattern.startswith("**/")
        else f" (anchored at live_root: '**/{pattern}' looks at any depth)"
    )
    return f"no archived file matches the glob {pattern!r}{anywhere}"


async def _from_index(manifest: Manifest, pieces: list[str]) -> list[Entry] | None:
    """The entries whose path may hold the longest of ``pieces``, through the
    index of paths (read as it is: nothing written); None without one this
    process could check, or for a piece so common that scanning the relpath
    index costs no more."""
    index = PathIndex(manifest.path)
    word = max(pieces, key=len)

    def candidates() -> tuple[list[int], int] | None:
        try:
            usable = index.check()
        except (OSError, sqlite3.Error):
            return None  # unreadable: the manifest's own index answers
        found = index.candidates(os.fsencode(word), FROM_INDEX_AT_MOST) if usable else None
        return None if found is None or len(found[0]) > FROM_INDEX_AT_MOST else found

    found = await asyncio.to_thread(candidates)
    if found is None:
        return None
    ids, covered = found
    ids += [i for i, _ in await manifest.paths_after(covered, word)]
    return await manifest.entries_with_ids(ids) if ids else []


async def find(manifest_path: Path, pattern: str, live_root: Path | None) -> Found:
    """The versions of every archived path ``pattern`` matches (module doc)."""
    pattern = relative(pattern, live_root, "PATTERN")
    if not pattern:
        raise UsageError("PATTERN is empty: give a glob ('**/*.log') or part of a path")
    glob = is_glob(pattern)
    match = compile_glob(pattern).fullmatch if glob else None  # a bad glob: one line
    prefix, pieces = (literal_prefix(pattern), literal_pieces(pattern)) if glob else ("", [pattern])
    async with await _open(manifest_path) as manifest:
        indexed = await _from_index(manifest, pieces) if not prefix and any(pieces) else None
        if indexed is not None:
            entries = [
                e for e in indexed
                if all(p in e.relpath for p in pieces) and (match is None or match(e.relpath))
            ]  # fmt: skip
        else:
            # Every piece as a filter in SQL: a glob whose prefix spans the whole
            # archive ("logs/*/app.log") still hands Python only its candidates.
            candidates = await manifest.paths_from(prefix, [p for p in pieces if p not in prefix])
            ids = [i for i, path in candidates if match is None or match(path)]
            entries = await manifest.entries_with_ids(ids) if ids else []
        entries.sort(key=lambda e: (e.relpath, *_newest_first(e)))
        versions = await _described(manifest, entries)
    if not versions:
        raise NothingFound(_nothing(pattern, glob))
    return Found(pattern, "glob" if glob else "substring", versions)


async def versions(manifest_path: Path, path: str, live_root: Path) -> Versions:
    """Every version of the archived file at ``path``, newest first, tombstones too."""
    relpath = relative(path, live_root, "PATH").rstrip("/")
    if not relpath:
        raise UsageError("PATH is empty: give a file's path relative to live_root")
    async with await _open(manifest_path) as manifest:
        entries = sorted(await manifest.versions_of(relpath), key=_newest_first)
        found = await _described(manifest, entries)
    if not found:
        raise NothingFound(
            f"no archived version of {relpath!r} (coldkeep find PATTERN searches every path)"
        )
    return Versions(relpath, found)
