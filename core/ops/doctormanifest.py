"""Doctor's check of the manifest, opened read-only: a SQLite database of a schema
this coldkeep knows, passing ``quick_check``, of this live tree and not lost
(base/site.py).
"""

from __future__ import annotations

import contextlib
import sqlite3

from ..base.config import Settings
from ..base.layout import Layout
from ..base.site import SiteError, check_site
from ..store.schema import SCHEMA_VERSION, version_problem
from .doctorfinding import Finding


def check_manifest(settings: Settings) -> Finding:
    """The manifest a pass would open: one this coldkeep can use (SQLite, a
    schema it knows, ``PRAGMA quick_check`` clean), the archive's own live tree,
    and not lost (base/site.py). Read-only: the file is opened ``mode=ro``."""
    layout = Layout(settings.archive_root)
    try:
        check_site(layout, settings.live_root)
    except SiteError as err:
        return Finding("manifest", "fail", str(err))
    except OSError as err:
        return Finding("manifest", "fail", f"{layout.root} cannot be read: {err}")
    path = layout.manifest
    if not path.exists():
        return Finding("manifest", "ok", f"{path}: none yet (the first pass creates it)")
    try:
        with contextlib.closing(
            sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        ) as conn:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            newer = version_problem(path, version, readonly=False)
            if newer is not None:
                return Finding("manifest", "fail", newer)
            said = [str(row[0]) for row in conn.execute("PRAGMA quick_check(5)")]
    except sqlite3.Error as err:
        return Finding(
            "manifest",
            "fail",
            f"{path} cannot be read as a SQLite database: {err}",
            "move it aside and run coldkeep rebuild-manifest (or rebuild-manifest --from-remote)",
        )
    if said != ["ok"]:
        return Finding(
            "manifest",
            "fail",
            f"{path} is damaged: PRAGMA quick_check says {'; '.join(said)}",
            "move it aside and run coldkeep rebuild-manifest (or rebuild-manifest --from-remote)",
        )
    older = "" if version == SCHEMA_VERSION else "; the next pass migrates it"
    return Finding("manifest", "ok", f"{path}: schema version {version}, quick_check ok{older}")
