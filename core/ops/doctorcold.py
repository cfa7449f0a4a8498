"""Doctor's check of a cold ``storage_class`` (GLACIER, DEEP_ARCHIVE): what the
config will cost that an operator would not choose. S3 bills each cold object
for a minimum stay (an object expired sooner is charged for the rest) and adds
about 40 KB to each; a retention shorter than the stay, or objects so small that
the 40 KB is over 1 % of what they hold, are warned of with the setting that
fixes them. Reads the manifest read-only; sends nothing.
"""

from __future__ import annotations

import sqlite3

from ..base.config import Settings
from ..base.layout import Layout
from ..remote.cold import MIN_DAYS
from ..store.connection import ManifestError
from ..store.manifest import Manifest
from ..store.remoteobjects import RemoteObjects
from .doctorfinding import Finding

# What S3 adds to each object in GLACIER or DEEP_ARCHIVE (8 KB billed as
# STANDARD, 32 KB at the class's price), and the share of it a config may pay.
OVERHEAD_BYTES = 40 * 1024
OVERHEAD_MAX = 0.01
# Objects at least this large keep the overhead under OVERHEAD_MAX.
SMALLEST_GOOD = int(OVERHEAD_BYTES / OVERHEAD_MAX)


async def check_cold(settings: Settings) -> list[Finding]:
    """One finding for a cold class (none for any other)."""
    remote = settings.remote
    if remote is None or not remote.cold:
        return []
    cls, stay = remote.storage_class, MIN_DAYS[remote.storage_class]
    problems, fixes = [], []
    retention = settings.retention
    shortest = min(
        (d for d in (retention.files_days, *retention.units.values()) if d is not None),
        default=None,
    )
    if shortest is not None and shortest < stay:
        problems.append(
            f"files expire after {shortest:g} days, and S3 bills a {cls} object for "
            f"{stay} days at least (an early deletion is charged for the rest)"
        )
        fixes.append(f"keep files {stay} days or more, or use another storage_class")
    files = settings.files
    if files.bundle_below and files.bundle_below < SMALLEST_GOOD:
        problems.append(
            f"files from bundle_below ({files.bundle_below:,} bytes) up ship as gzips of "
            f"their own, each paying S3's {OVERHEAD_BYTES // 1024} KB a {cls} object: over "
            f"{OVERHEAD_MAX:.0%} of a gzip under {SMALLEST_GOOD:,} bytes"
        )
        fixes.append(
            "raise [files] bundle_below (to 64 MiB at most): the files under it are bundled"
        )
    average = await _average_object(settings)
    if average is not None and average < SMALLEST_GOOD:
        share = OVERHEAD_BYTES / average
        problems.append(
            f"the archive files shipped so far average {average:,.0f} bytes: S3's "
            f"{OVERHEAD_BYTES // 1024} KB an object adds {share:.0%}"
        )
    if not problems:
        return [Finding("cold_class", "ok", f"{cls}: retention and object sizes suit it")]
    fix = "; ".join(fixes) or "raise [files] bundle_below: the files under it are bundled"
    return [Finding("cold_class", "warn", f"{cls}: " + "; ".join(problems), fix)]


async def _average_object(settings: Settings) -> float | None:
    """The shipped archive files' average size (None: none shipped, or no
    manifest that opens; the manifest line says why)."""
    try:
        manifest = await Manifest.open_existing(Layout(settings.archive_root).manifest)
    except (ManifestError, sqlite3.Error):
        return None
    if manifest is None:
        return None
    async with manifest:
        count, total = await RemoteObjects(manifest).size_under("files/")
    return total / count if count else None
