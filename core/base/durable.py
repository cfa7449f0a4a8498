"""Every fsync coldkeep makes, by name: the one place that calls ``os.fsync``.

Each call site in the protocols (a file's bytes, a directory's names) passes its
name, one of ``SITES``; ``Site`` makes mypy refuse any other. The names exist so
that the tests can prove each fsync is needed: ``make fsync-mutants`` runs the
power-loss matrix once per site with that one fsync skipped, and the matrix must
then fail (tests/fsync_mutants.py). A house test fails on any ``os.fsync`` in
``coldkeep.core`` outside this module.

Invariants:
- Outside a test, ``fsync`` is exactly ``os.fsync``: nothing here acts unless
  ``COLDKEEP_TEST_FSYNC_MUTANT`` is set to ``lose-data`` (a test-only name no
  deployment sets by accident). With it, ``COLDKEEP_TEST_SKIP_FSYNC`` names the
  one site skipped (a name that is no site is an error: a typo must not pass
  for a mutant that survived), and ``COLDKEEP_TEST_FSYNC_TRACE`` names a file
  that records each site reached, one name a line (the mutant run learns which
  sites the matrix reaches at all). Either of those alone does nothing.
"""

from __future__ import annotations

import os
from typing import Literal, get_args

Site = Literal[
    # directories made on the way (beneath): each new name, in its parent
    "dir.created",  # a directory made under a root (files/<unit>/..., a live dir restored)
    "root.created",  # a root made where it is missing (archive_root on first use)
    # archiving one file (codec, gzfile, filemove)
    "gzip.partial",  # <dest>.partial's bytes, before it is verified and renamed
    "gzip.placed",  # the gzip's directory once the partial is renamed into place
    "source.unlinked",  # the live source's directory once it is unlinked
    "source.put_back",  # a source set aside that was not the archived inode, put back
    "legacy.unlinked",  # a legacy plain copy's directory once it is unlinked
    # bundles of small files (bundle, bundlemove)
    "bundle.partial",  # <bundle>.partial's bytes
    "bundle.placed",  # the bundle's directory once it is renamed into place
    "bundle.sources_unlinked",  # each directory that lost a source of the bundle
    # restoring one file (gzfile)
    "restore.partial",  # <target>.restore-partial's bytes
    "restore.placed",  # the target's directory once the partial is renamed
    "restore.partial_removed",  # a partial removed (mismatch, or the target exists)
    "restore.partial_discarded",  # a partial removed after an error
    # recovery (recovery, orphanbundle, gzfile.adopt_orphan)
    "recovery.restore_partial_removed",  # a restore partial an intent names, removed
    "recovery.orphan_data",  # an orphan gzip or bundle about to be adopted: its bytes
    "recovery.orphan_dir",  # ... and its name in its directory
    "recovery.source_unlinked",  # a pending source unlinked by recovery
    "recovery.bundle_source_unlinked",  # a pending bundle member's source unlinked
    "recovery.aside_settled",  # a source a crash left set aside: unlinked or put back
    # which live tree the archive belongs to (site)
    "site.manifest_named",  # archive_root before the record: the manifest's name
    "site.data",  # coldkeep.site's bytes
    "site.placed",  # archive_root once the record is renamed into place
    # the site's signing key (signing)
    "sitekey.data",  # coldkeep.sitekey's bytes
    "sitekey.placed",  # archive_root once the key is renamed into place
    # the space reserve (space)
    "reserve.data",  # the reserve file's bytes
    "reserve.placed",  # archive_root once the reserve is renamed into place
    # the remote tier (ship, fetch, rebuild, filestore, months)
    "fetch.scratch",  # a downloaded object in its scratch file
    "rebuild.placed",  # a file fetched back into the archive, its directory
    "rebuild.manifest_placed",  # the manifest fetched back, its directory
    "remote.object_data",  # a file:// remote's object bytes
    "remote.object_placed",  # its directory once renamed into place
    "remote.object_deleted",  # a file:// remote's object deleted, its directory
    "local.dropped",  # a shipped file's local copy unlinked, its directory
    "local.settled",  # a drop a crash interrupted: the directory, once more
    # the event mover (dbmove): a batch's copy, before its rows leave live
    "events.month_copied",  # a month DB's WAL once step 2 committed into it
    "events.month_wal_named",  # the events folder when a month DB's WAL may be new
    # expire, fleet, doctor, metrics
    "expire.unlinked",  # an expired file's directory once it (and its -wal, -shm) is gone
    "fleet.cached",  # a site's manifest snapshot placed in the fleet view's cache
    "export.data",  # rows the console's Events screen exports: the file's bytes
    "export.placed",  # ... and its directory once renamed into place
    "doctor.probe_data",  # doctor's write probe
    "doctor.probe_removed",  # doctor's probe removed
    "metrics.data",  # the metrics textfile's bytes
    "metrics.placed",  # its directory once renamed over
]
SITES: tuple[Site, ...] = get_args(Site)

SKIP_ENV = "COLDKEEP_TEST_SKIP_FSYNC"
MUTANT_ENV = "COLDKEEP_TEST_FSYNC_MUTANT"
MUTANT_ACK = "lose-data"
TRACE_ENV = "COLDKEEP_TEST_FSYNC_TRACE"


def _armed() -> bool:
    return os.environ.get(MUTANT_ENV) == MUTANT_ACK


def skipped() -> str | None:
    """The site a mutant run skips, or None (always None outside a test)."""
    site = os.environ.get(SKIP_ENV)
    if not site or not _armed():
        return None
    if site not in SITES:
        raise ValueError(f"{SKIP_ENV}={site!r} names no fsync site (see core/base/durable.py)")
    return site


def fsync(fd: int, site: Site) -> None:
    """``os.fsync(fd)``, the fsync of ``site``. Read per call (cheap) rather than
    once: the matrix's commands are forked from one process that imported
    coldkeep before the test set its environment."""
    if _armed():
        trace = os.environ.get(TRACE_ENV)
        if trace:
            _trace(trace, site)
        if site == skipped():
            return
    os.fsync(fd)


def _trace(path: str, site: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, f"{site}\n".encode())
    finally:
        os.close(fd)
