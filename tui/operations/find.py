"""The operations that look archived files up in the manifest and read nothing
else: ``find PATTERN`` and ``versions PATH`` (no lock, nothing written).

Text: one line per version, ``id  archived-at (UTC)  size  location  sha256
prefix  hold  path`` (the path escaped by ``shown``), then a count; --json
carries the exact names and every field (docs/json.md). Nothing found is one
line and exit 2, as a restore selection that matches nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from coldkeep.core.files.find import FleetFound, Found, Version, Versions

from ..text.fmt import human, plural, shown
from .spec import Operation, Options, Run, Words


def utc(ms: int) -> str:
    """``2026-03-14T02:11:05Z``: one zone for every site and every operator."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def version_line(v: Version) -> str:
    e = v.entry
    hold = f"held:{v.hold.id}" if v.hold is not None else "-"
    return (
        f"{e.id:>8}  {utc(e.archived_at)}  {human(e.bytes):>10}  {v.location:<7}  "
        f"{e.sha256[:12]}  {hold:<8} {shown(e.relpath)}"
    )


def _counted(versions: list[Version]) -> str:
    said = [
        f"{n} {word}"
        for word, n in (
            ("expired", sum(v.location == "expired" for v in versions)),
            ("remote only", sum(v.location == "remote" for v in versions)),
            ("missing", sum(v.location == "missing" for v in versions)),
            ("held", sum(v.hold is not None for v in versions)),
        )
        if n
    ]
    return f" ({', '.join(said)})" if said else ""


def _found(f: Found) -> str:
    paths = len({v.entry.relpath for v in f.versions})
    versions = plural(len(f.versions), "version")
    return f"{versions} of {plural(paths, 'file')}{_counted(f.versions)}"


def _versions(v: Versions) -> str:
    return f"{plural(len(v.versions), 'version')} of {shown(v.relpath)}{_counted(v.versions)}"


def _text(lines: list[Version], last: str) -> str:
    return "\n".join([*map(version_line, lines), last])


def _fleet_found(f: FleetFound) -> str:
    versions = [v for found in f.sites.values() for v in found.versions]
    paths = len(
        {(site, v.entry.relpath) for site, found in f.sites.items() for v in found.versions}
    )
    said = f"{plural(len(versions), 'version')} of {plural(paths, 'file')} at "
    said += f"{plural(len(f.sites), 'site')}{_counted(versions)}"
    return said + (f"; {plural(len(f.problems), 'site')} not searched" if f.problems else "")


def _fleet_text(f: FleetFound) -> str:
    width = max(map(len, f.sites), default=0)
    lines = [
        f"{shown(site):<{width}}  {version_line(v)}"
        for site, found in sorted(f.sites.items())
        for v in found.versions
    ]
    lines += [f"not searched: {shown(site)}: {why}" for site, why in sorted(f.problems.items())]
    return "\n".join([*lines, _fleet_found(f)])


def _find(options: Options) -> Run:
    pattern = str(options["pattern"])
    if options["fleet"]:
        return lambda archiver, cancel: archiver.find_fleet(pattern)
    return lambda archiver, cancel: archiver.find(pattern)


def _versions_of(options: Options) -> Run:
    path = str(options["path"])
    return lambda archiver, cancel: archiver.versions(path)


_COLUMNS = (
    "One line per version: entry id, archived at (UTC), size, location (gzip, bundle,\n"
    "remote = only the remote copy is left, missing, expired = retention deleted it),\n"
    "sha256 prefix, the legal hold on it (held:ID), path."
)

FIND = Operation(
    "find",
    "Find archived files: every version of every path PATTERN matches.\n\n"
    "PATTERN with * ? or [ is a glob anchored at live_root (as restore --path);\n"
    "without, it is a part of the path ('app.log' finds it at any depth). Reads\n"
    "the manifest only: takes no lock, writes nothing.\n\n" + _COLUMNS,
    bind=_find,
    params=(
        click.Argument(["pattern"]),
        click.Option(
            ["--fleet"],
            is_flag=True,
            help="Every site under [remote]'s prefix, from each one's newest manifest "
            "snapshot (as the fleet view reads them; each line starts with its site).",
        ),
    ),
    words=(
        Words(Found, _found, text=lambda f: _text(f.versions, _found(f))),
        Words(FleetFound, _fleet_found, text=_fleet_text),
    ),
    locks=False,
)

VERSIONS = Operation(
    "versions",
    "Every archived version of one file, newest first (expired ones too).\n\n"
    "PATH is relative to live_root (or absolute inside it). Reads the manifest\n"
    "only: takes no lock, writes nothing.\n\n" + _COLUMNS,
    bind=_versions_of,
    params=(click.Argument(["path"]),),
    words=(Words(Versions, _versions, text=lambda v: _text(v.versions, _versions(v))),),
    locks=False,
)

OPERATIONS = (FIND, VERSIONS)
