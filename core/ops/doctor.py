"""``coldkeep doctor``: a config and its environment checked before the first pass.

``diagnose`` returns one ``Finding`` per check (ok, warn or fail, what was found,
and for a problem what to do); it prints nothing. The checks: the config loads;
live_root and archive_root are directories, and on which filesystem; the manifest
is a SQLite database of a schema this coldkeep knows, passes ``quick_check``,
belongs to this live tree and is not lost (base/site.py); the process
can write where a pass writes (archive_root) and unlinks (the folders of the
eligible files); the free space on archive_root against the backlog (the plan's
own count, ``plan.make_plan``); the live DB is in WAL mode with an index on
(kind, ts), and which of its kinds ``events.kinds`` archives; a ``[remote]``
answers and takes a write, and an S3 bucket's versioning, Object Lock and
default encryption are read and held against what coldkeep does there; pigz and
gzip are at hand.

Each family of checks is a module of its own (``doctorroots``, ``doctormanifest``,
``doctorspace``, ``doctorlivedb``, ``doctorremote``, ``doctorbucket``,
``doctorsite``); this one runs them in the order an operator reads them, and
looks for the tools itself.

Invariants:
- It never takes the archive lock and changes nothing but its own probes: a
  temporary file created and removed in archive_root, and a probe object put to
  and deleted from the remote (from a temporary local file, removed too; plus,
  for an S3 remote, the store's own probe for conditional writes). The manifest
  and the live DB are opened read-only.
- What a check looks for is its finding, never an exception (a plan that cannot
  be counted, a remote that refuses, a database that will not open); only a
  config that does not load stops the rest (there is nothing to check without it).
- Filesystem and SQLite work runs in threads: the event loop never blocks.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from ..base.config import load_settings
from ..base.configtable import ConfigError
from .doctorbucket import check_bucket
from .doctorcold import check_cold
from .doctorfinding import Finding
from .doctorlivedb import check_live_db
from .doctormanifest import check_manifest
from .doctorremote import check_remote
from .doctorroots import check_live_write, check_open_files, check_roots
from .doctorsite import check_identity
from .doctorspace import check_space, count_backlog

TOOLS = ("pigz", "gzip")


async def diagnose(config: Path) -> list[Finding]:
    """Every check, in the order an operator reads them."""
    try:
        settings = await asyncio.to_thread(load_settings, config)
    except ConfigError as err:
        return [Finding("config", "fail", str(err))]
    said = "; ".join(settings.warnings)
    findings = [
        Finding(
            "config",
            "warn" if said else "ok",
            f"{settings.config_path}: loaded (mode {settings.mode})"
            + (f"; {said}" if said else ""),
        ),
        *await asyncio.to_thread(check_roots, settings),
        await asyncio.to_thread(check_manifest, settings),
    ]
    plan, plan_error = await count_backlog(settings)
    findings.append(await asyncio.to_thread(check_live_write, settings, plan))
    findings.append(await asyncio.to_thread(check_open_files, settings, plan))
    findings.append(await asyncio.to_thread(check_space, settings, plan, plan_error))
    if settings.state_db is None:
        findings.append(Finding("live_db", "ok", "no state_db: no event phase to check"))
    else:
        findings += await asyncio.to_thread(check_live_db, settings, settings.state_db)
    findings.append(await check_remote(settings))
    findings += await check_bucket(settings)
    findings += await check_cold(settings)
    findings += await check_identity(settings)
    findings.append(await asyncio.to_thread(_tools))
    return findings


def _tools() -> Finding:
    """The operator's own gunzip of an archived file (coldkeep needs neither)."""
    where = {tool: shutil.which(tool) for tool in TOOLS}
    missing = [tool for tool, path in where.items() if path is None]
    found = ", ".join(f"{tool} at {path}" for tool, path in where.items() if path)
    if missing:
        return Finding(
            "tools",
            "warn",
            f"not on PATH: {', '.join(missing)}" + (f" ({found})" if found else ""),
            f"install {' and '.join(missing)} to read archived gzips by hand "
            "(coldkeep itself needs neither)",
        )
    return Finding("tools", "ok", found)
