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
import contextlib
import hashlib
import os
import re
import secrets
import shutil
import sqlite3
import stat
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from ..base.config import Settings, load_settings
from ..base.configevents import EventsSettings
from ..base.configtable import ConfigError
from ..base.durable import fsync
from ..base.errors import RemoteError
from ..base.fsutil import LeaseResult, open_file, take_lease, unlink_if_present
from ..base.ioerror import describe
from ..base.layout import Layout
from ..base.site import SiteError, check_site
from ..base.space import RESERVE_BYTES, free_bytes, human_bytes, mount_of
from ..base.times import now_ms
from ..events.eventschema import (
    DeleteEffects,
    EventSchema,
    EventsError,
    KindsSeen,
    delete_effects,
    discover,
    journal_mode,
    open_live,
    q,
    table_kinds,
)
from ..files.scan import ScanError
from ..remote.bucketclock import skew
from ..remote.connect import connected
from ..remote.identity import Claim, claimed_by_other, claims, refusal
from ..remote.marker import RemoteUnmounted, check_marker
from ..remote.objectstore import BucketSettings, ObjectStore
from ..store.manifest import Manifest, ManifestError
from ..store.remoteobjects import RemoteObjects
from ..store.schema import SCHEMA_VERSION, version_problem
from .plan import Plan, make_plan
from .siteops import SiteIdentity, read_identity

Level = Literal["ok", "warn", "fail"]
MOUNTINFO = Path("/proc/self/mountinfo")
TOOLS = ("pigz", "gzip")


@dataclass(frozen=True)
class Finding:
    """One check's result. ``check`` is a stable name (the JSON key an operator's
    script matches on); ``fix`` is empty when there is nothing to do."""

    check: str
    level: Level
    found: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


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
        *await asyncio.to_thread(_roots, settings),
        await asyncio.to_thread(_manifest, settings),
    ]
    plan, plan_error = await _backlog(settings)
    findings.append(await asyncio.to_thread(_live_write, settings, plan))
    findings.append(await asyncio.to_thread(_open_files, settings, plan))
    findings.append(await asyncio.to_thread(_space, settings, plan, plan_error))
    if settings.state_db is None:
        findings.append(Finding("live_db", "ok", "no state_db: no event phase to check"))
    else:
        findings += await asyncio.to_thread(_live_db, settings, settings.state_db)
    findings.append(await _remote(settings))
    findings += await _bucket(settings)
    findings += await _identity(settings)
    findings.append(await asyncio.to_thread(_tools))
    return findings


# filesystems -----------------------------------------------------------------


@dataclass(frozen=True)
class Filesystem:
    """The mount a path is on (or would be on: its nearest existing ancestor's)."""

    mount: Path
    fstype: str  # "unknown" without /proc/self/mountinfo
    source: str
    device: int
    readonly: bool

    def describe(self) -> str:
        dev = f"device {os.major(self.device)}:{os.minor(self.device)}"
        ro = ", read-only" if self.readonly else ""
        return f"{self.fstype} ({self.source}, {dev}, mounted at {self.mount}{ro})"


def _existing(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists."""
    here = path.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    return here


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_of(path: Path) -> Filesystem:
    """The filesystem holding ``path``: the longest mount point above it in
    /proc/self/mountinfo (a bind mount is its own entry), preferring one whose
    device is the path's (an overmounted point lists both)."""
    here = _existing(path)
    st = os.stat(here)
    readonly = bool(os.statvfs(here).f_flag & os.ST_RDONLY)
    real = os.path.realpath(here)
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        lines = []
    best: tuple[bool, int, Filesystem] | None = None
    device = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 2:
            continue
        mount = _unescape(fields[4])
        if real != mount and not real.startswith(mount.rstrip("/") + "/"):
            continue
        key = (fields[2] == device, len(mount))
        fs = Filesystem(Path(mount), tail[0], _unescape(tail[1]), st.st_dev, readonly)
        if best is None or key >= best[:2]:
            best = (*key, fs)
    if best is not None:
        return best[2]
    return Filesystem(mount_of(here), "unknown", "unknown", st.st_dev, readonly)


# the roots --------------------------------------------------------------------


def _roots(settings: Settings) -> list[Finding]:
    live, archive = settings.live_root, settings.archive_root
    if not live.is_dir():
        what = "is not a directory" if live.exists() else "does not exist"
        return [
            Finding("live_root", "fail", f"{live} {what}", "fix live_root in the config"),
            _archive_root(settings, None),
            _archive_write(archive),
        ]
    live_fs = filesystem_of(live)
    return [
        Finding("live_root", "ok", f"{live}: a directory on {live_fs.describe()}"),
        _archive_root(settings, live_fs),
        _archive_write(archive),
    ]


def _archive_root(settings: Settings, live_fs: Filesystem | None) -> Finding:
    archive = settings.archive_root
    if archive.exists() and not archive.is_dir():
        return Finding(
            "archive_root",
            "fail",
            f"{archive} is not a directory",
            "fix archive_root in the config",
        )
    fs = filesystem_of(archive)
    level: Level = "ok"
    parts, fixes = [f"{archive}: a directory on {fs.describe()}"], []
    if not archive.exists():
        # Created by the first pass, as the config allows; but a missing archive is
        # as often a disk not mounted, and the pass would then fill the one below.
        level = "warn"
        parts = [f"{archive} does not exist yet: the first pass creates it on {fs.describe()}"]
        fixes.append("if it belongs on a disk of its own, mount that first")
    if fs.fstype == "tmpfs":
        level = "warn"
        parts.append("tmpfs keeps it in memory: everything archived is lost on reboot")
        fixes.append("put archive_root on a persistent disk")
    if live_fs is not None:
        parts.append(
            "the same filesystem as live_root"
            if live_fs.device == fs.device
            else f"not live_root's filesystem ({live_fs.fstype} at {live_fs.mount}): fine"
        )
    return Finding("archive_root", level, "; ".join(parts), "; ".join(fixes))


def _archive_write(archive: Path) -> Finding:
    """A pass writes gzips, the manifest and the lock in archive_root: a file is
    created, fsynced and removed there, under the root as the protocol does."""
    if not archive.exists():
        above = _existing(archive)
        if above.is_dir() and os.access(above, os.W_OK | os.X_OK, effective_ids=True):
            return Finding("archive_write", "ok", f"{above} is writable: {archive} can be created")
        return Finding(
            "archive_write",
            "fail",
            f"{archive} cannot be created: {above} is not a writable directory",
            f"create {archive} and give coldkeep's user write access to it",
        )
    if not archive.is_dir():
        return Finding("archive_write", "fail", f"{archive} is not a directory")
    tmp = Layout(archive).probe()
    try:
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, root=archive)
        try:
            os.write(fd, b"coldkeep doctor\n")
            fsync(fd, "doctor.probe_data")
        finally:
            os.close(fd)
            unlink_if_present(tmp, root=archive, durably="doctor.probe_removed")
    except OSError as err:
        return Finding(
            "archive_write",
            "fail",
            f"cannot write in {archive}: {err.strerror or err}",
            "give coldkeep's user write access to archive_root (and its filesystem mounted "
            "read-write, with room)",
        )
    return Finding("archive_write", "ok", f"a file was created, fsynced and removed in {archive}")


def _live_write(settings: Settings, plan: Plan | None) -> Finding:
    """A pass unlinks each archived source: it needs write access to the folder of
    every eligible file. In a sticky folder (like /tmp) only the owner of a file
    or of the folder may unlink it; root may anyway."""
    live = settings.live_root
    if not live.is_dir():
        return Finding("live_write", "fail", f"{live} is not a directory")
    folders = {live}
    if plan is not None and plan.scan is not None:
        folders |= {live / PurePosixPath(c.relpath).parent for c in plan.scan.eligible}
    euid = os.geteuid()
    blocked, sticky = [], []
    for folder in sorted(folders):
        try:
            st = folder.stat()
        except OSError:
            continue  # gone since the scan: the pass will find it gone too
        if not os.access(folder, os.W_OK | os.X_OK, effective_ids=True):
            blocked.append(folder)
        elif euid != 0 and st.st_mode & stat.S_ISVTX and st.st_uid != euid:
            sticky.append(folder)
    below = len(folders) - 1
    scope = f"{live} and the {below} folders below it holding eligible files"
    if blocked:
        return Finding(
            "live_write",
            "fail",
            f"{len(blocked)} of {len(folders)} folders a pass removes sources from are not "
            f"writable (first: {blocked[0]}): archived files would stay in the live tree",
            "run coldkeep as the application's user or as root",
        )
    if sticky:
        return Finding(
            "live_write",
            "warn",
            f"{len(sticky)} folders are sticky and owned by another user (first: {sticky[0]}): "
            "only files coldkeep's user owns can be removed from them",
            "run coldkeep as root or as the owner of those folders",
        )
    return Finding("live_write", "ok", f"writable: {scope}" if below else f"writable: {live}")


# the manifest ------------------------------------------------------------------


def _manifest(settings: Settings) -> Finding:
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


def _open_files(settings: Settings, plan: Plan | None) -> Finding:
    """Whether a file held open by another process is seen: a write lease taken
    (and released at once) on an eligible file, as a pass takes one on each."""
    live = settings.live_root
    eligible = [] if plan is None or plan.scan is None else plan.scan.eligible
    result: LeaseResult | None = None
    for cand in eligible[:20]:
        try:
            fd = open_file(live / cand.relpath, os.O_RDONLY | os.O_NONBLOCK, root=live)
        except OSError:
            continue  # gone, or unreadable: the pass says so
        try:
            result = take_lease(fd)
        finally:
            os.close(fd)
        if result == "held":
            break
    if result is None:
        return Finding("open_files", "ok", "no eligible file to try a write lease on yet")
    if result != "unsupported":
        return Finding(
            "open_files",
            "ok",
            "a file another process holds open is left live (a write lease is taken on each "
            "source from its read to its removal)",
        )
    fs = filesystem_of(live)
    return Finding(
        "open_files",
        "warn",
        f"no write lease on {fs.fstype} at {live} (not root, or leases unsupported there): a "
        "file held open elsewhere is guarded only by its identity (dev, ino, size, mtime, "
        "ctime); a line written after the pass to a log still open goes to the removed file",
        "run coldkeep as root (CAP_LEASE) on a local filesystem, or exclude logs that stay open",
    )


# the backlog and the room for it ----------------------------------------------


async def _backlog(settings: Settings) -> tuple[Plan | None, str | None]:
    """The plan a pass would work through, read-only; or why it could not be counted."""
    try:
        manifest = await Manifest.open(Layout(settings.archive_root).manifest, readonly=True)
    except (ManifestError, sqlite3.Error):
        # None yet (before the first pass) or not readable as it is: without its
        # holds the count only errs high, which is the safe side for free space.
        manifest = None
    try:
        if manifest is None:
            return await make_plan(settings), None
        async with manifest:
            return await make_plan(settings, manifest), None
    except (ScanError, OSError, sqlite3.Error) as err:
        return None, str(err)


def _space(settings: Settings, plan: Plan | None, error: str | None) -> Finding:
    archive = settings.archive_root
    if plan is None:
        return Finding(
            "space",
            "fail",
            f"the backlog could not be counted: {error}",
            "fix what it names (coldkeep plan says the same)",
        )
    rows = plan.events.rows if plan.events else 0
    event_bytes = plan.events.approx_bytes if plan.events else 0
    backlog = plan.bytes + event_bytes
    what = f"{plan.files} files ({human_bytes(plan.bytes)})"
    if rows:
        what += f" and {rows:,} event rows (~{human_bytes(event_bytes)})"
    free = free_bytes(archive)
    if free is None:
        return Finding("space", "warn", f"the backlog is {what}; free space on {archive} unknown")
    room = f"{human_bytes(free)} free on {mount_of(archive)}; the backlog is {what}"
    if free < RESERVE_BYTES:
        return Finding(
            "space", "fail", f"{room}: the filesystem is full", "free space on archive_root"
        )
    if free >= backlog + RESERVE_BYTES:
        return Finding("space", "ok", f"{room} before compression: it fits")
    same = filesystem_of(archive).device == os.stat(_existing(settings.live_root)).st_dev
    return Finding(
        "space",
        "warn",
        f"{room} before compression: it fits only if it compresses to "
        f"{100 * (free - RESERVE_BYTES) / backlog:.0f} % or less"
        + ("; each archived source is removed from the same filesystem" if same else ""),
        "free space on archive_root, or let the passes go in steps: a pass that fills the "
        "disk stops cleanly and says so",
    )


# the live database ------------------------------------------------------------


def _kind_ts_index(conn: sqlite3.Connection, schema: EventSchema) -> str | None:
    """An index on the events table whose leading columns are (kind, ts)."""
    want = [schema.kind.lower(), schema.ts.lower()]
    for row in conn.execute(f"PRAGMA index_list({q(schema.table)})").fetchall():
        if row[4]:  # a partial index serves only queries whose WHERE implies its own
            continue
        cols = sorted(conn.execute(f"PRAGMA index_info({q(str(row[1]))})").fetchall())
        if [str(c[2]).lower() for c in cols[:2]] == want:
            return str(row[1])
    return None


def _live_db(settings: Settings, db: Path) -> list[Finding]:
    cfg = settings.events
    try:
        conn = open_live(db, busy_timeout_s=cfg.busy_timeout_ms / 1000, readonly=True)
    except EventsError as err:
        return [Finding("live_db", "fail", str(err), "fix state_db in the config")]
    try:
        schema = discover(conn, db, cfg)
        mode = journal_mode(conn)
        index = _kind_ts_index(conn, schema)
        kinds = KindsSeen(tuple(table_kinds(conn, schema)), cfg.kinds)
        effects = delete_effects(conn, schema.table)
    except EventsError as err:
        return [Finding("live_db", "fail", str(err))]
    except sqlite3.Error as err:
        return [Finding("live_db", "fail", f"{db}: {describe(err)}")]
    finally:
        conn.close()
    if mode == "wal":
        mode_finding = Finding("live_db", "ok", f"{db}: table {schema.table}, WAL mode")
    else:
        mode_finding = Finding(
            "live_db",
            "fail",
            f"{db} is not in WAL mode ({mode}): each batch delete would block the "
            "application's readers, and no checkpoint can run",
            f"switch it once, with the application stopped: sqlite3 {db} "
            "'PRAGMA journal_mode=WAL' (it stays WAL)",
        )
    cols = f"{schema.table} ({schema.kind}, {schema.ts})"
    if index is not None:
        index_finding = Finding("events_index", "ok", f"index {index} on {cols}")
    else:
        index_finding = Finding(
            "events_index",
            "fail",
            f"no index on {cols}: counting and moving old rows scans the whole table",
            f"CREATE INDEX {schema.table}_{schema.kind}_{schema.ts} ON {cols} "
            "(it holds the write lock while it builds: at a quiet time)",
        )
    return [mode_finding, index_finding, _kinds(schema, kinds), *_effects(schema, effects, cfg)]


def _triggers(table: str, effects: DeleteEffects, cfg: EventsSettings, fix: str) -> Finding:
    """The triggers on the events table: which fire on the move's DELETE and
    which on a restore's INSERT, and what the config says of them."""
    if not effects.triggers:
        return Finding("events_triggers", "ok", f"no trigger on {table}")
    said, refused = [], []
    if effects.on_delete:
        said.append(f"{_listed(list(effects.on_delete))} fire on the move's DELETE")
        refused.append("the event phase")
    if effects.on_insert:
        said.append(f"{_listed(list(effects.on_insert))} on a restore's INSERT")
        refused.append("restore-events")
    if not said:
        found = f"{_listed(list(effects.triggers))} on {table}: none fires on the move or a restore"
        return Finding("events_triggers", "ok", found)
    found = f"on {table}, {'; '.join(said)}"
    if cfg.triggers == "refuse":
        return Finding("events_triggers", "fail", f"{found}: {' and '.join(refused)} refused", fix)
    return Finding("events_triggers", "warn", f'{found} (events.triggers = "fire")')


def _effects(schema: EventSchema, effects: DeleteEffects, cfg: EventsSettings) -> list[Finding]:
    """The triggers on the events table and the foreign keys referencing it:
    what the move's DELETE would set off, and what the config says of it."""
    table = f"table {schema.table}"
    fix = "drop them, or say how to treat them: events.triggers, events.foreign_keys"
    triggers = _triggers(table, effects, cfg, fix)
    keys = _listed(list(effects.foreign_keys))
    if not effects.foreign_keys:
        fks = Finding("events_foreign_keys", "ok", f"no foreign key references {table}")
    elif cfg.foreign_keys == "refuse":
        said = f"foreign keys {keys} reference {table}: the event phase is refused"
        fks = Finding("events_foreign_keys", "fail", said, fix)
    elif cfg.foreign_keys == "fire":
        said = f"foreign keys {keys} reference {table}; their ON DELETE actions run on the move"
        fks = Finding("events_foreign_keys", "warn", said + ' (events.foreign_keys = "fire")')
    else:
        said = f"foreign keys {keys} reference {table}; the rows that reference archived rows "
        fks = Finding(
            "events_foreign_keys",
            "warn",
            said + 'keep their values (events.foreign_keys = "ignore")',
        )
    return [triggers, fks]


def _kinds(schema: EventSchema, kinds: KindsSeen) -> Finding:
    """The kinds the events table has beside those ``events.kinds`` archives."""
    table = f"table {schema.table}"
    have = f"{len(kinds.in_table)} kinds in {table} ({_listed(list(kinds.in_table))})"
    if kinds.archived is None:
        return Finding("events_kinds", "ok", f"every kind is archived: {have}")
    if kinds.in_table and not kinds.moving:
        return Finding(
            "events_kinds",
            "warn",
            f"events.kinds names {_listed(sorted(kinds.archived))}: none of them has a row in "
            f"{table}, so no event row would move; it has {_listed(list(kinds.in_table))}",
            "name the table's kinds to archive in events.kinds, or leave the key out to "
            "archive every kind",
        )
    said = f"events.kinds archives {_listed(kinds.moving) or 'none'} of {have}"
    if kinds.staying:
        said += f"; staying live: {_listed(kinds.staying)}"
    if kinds.not_in_table:
        return Finding(
            "events_kinds",
            "warn",
            f"{said}; it also names {_listed(kinds.not_in_table)}, with no row in {table}",
            "check those names against the table's kinds (a typo archives nothing)",
        )
    return Finding("events_kinds", "ok", said)


def _listed(items: list[str], most: int = 8) -> str:
    shown = ", ".join(items[:most])
    return shown + (f", … ({len(items) - most} more)" if len(items) > most else "")


# the remote -------------------------------------------------------------------


def _remote_folder(folder: Path) -> Finding | None:
    """A ``file://`` remote's folder as a ship finds it; None when it is there.
    Its absence is said, not mended: a ship creates it, but a missing folder is
    as often a network disk not mounted, and then the copies would stay here."""
    if folder.is_dir():
        return None
    if folder.exists():
        return Finding("remote", "fail", f"{folder} is not a directory", "fix remote.url")
    above = _existing(folder)
    if not above.is_dir() or not os.access(above, os.W_OK | os.X_OK, effective_ids=True):
        return Finding(
            "remote",
            "fail",
            f"{folder} does not exist and cannot be created: {above} is not a writable directory",
            "fix remote.url, or mount the disk it names",
        )
    return Finding(
        "remote",
        "warn",
        f"{folder} does not exist yet: the first ship creates it on "
        f"{filesystem_of(folder).describe()}",
        "if it is a mounted disk, mount it first",
    )


def _probe_source() -> tuple[Path, int, str]:
    data = b"coldkeep doctor probe\n"
    fd, name = tempfile.mkstemp(prefix="coldkeep-doctor.")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return Path(name), len(data), hashlib.sha256(data).hexdigest()


async def _probe_write(store: ObjectStore) -> None:
    """A probe object put (create-only, as a ship puts) and deleted again. At the
    top of the prefix, not under the site: nothing a listing of the site shows,
    no folder left behind."""
    src, size, sha = await asyncio.to_thread(_probe_source)
    key = f".coldkeep-doctor.{secrets.token_hex(8)}"
    try:
        await store.put_new(key, src, size, sha)
        await store.delete(key)
    finally:
        await asyncio.to_thread(src.unlink, missing_ok=True)


async def _remote(settings: Settings) -> Finding:
    remote = settings.remote
    if remote is None:
        return Finding("remote", "ok", "no [remote]: nothing to check")
    if remote.folder is not None:
        missing = await asyncio.to_thread(_remote_folder, remote.folder)
        shipped = await _shipped(settings) if missing is not None else 0
        if shipped and missing is not None and missing.level == "warn":
            return Finding(
                "remote",
                "fail",
                f"the remote folder {remote.folder.as_uri()} has no marker: is its disk "
                f"mounted? ({remote.folder} does not exist, and {shipped} objects are "
                "recorded as shipped there)",
                "mount its disk, or fix remote.url",
            )
        if missing is not None:
            return missing
    async with connected(remote) as store:
        try:
            conditional = await store.refuses_overwrite()
            await _probe_write(store)
            unmounted = await _unmounted(settings, store)
        except RemoteError as err:  # RemoteAuthError too: its line says what to do
            return Finding("remote", "fail", str(err))
        except OSError as err:  # the local probe file, before any request
            return Finding("remote", "fail", f"the probe could not be prepared: {err}")
    if unmounted is not None:
        return Finding("remote", "fail", unmounted, "mount its disk, or fix remote.url")
    found = f"{store.url} answers: a probe object was written and deleted"
    if not conditional:
        return Finding(
            "remote",
            "warn",
            f"{found}; it does not refuse to overwrite an existing key (If-None-Match)",
            "nothing to do with one host per site: each upload asks with HEAD first, under "
            "the archive lock",
        )
    return Finding("remote", "ok", f"{found}; it refuses to overwrite an existing key")


async def _bucket(settings: Settings) -> list[Finding]:
    """An S3 remote's bucket as it is set up: its versioning, its Object Lock
    and its default encryption, one line each, held against what coldkeep
    does there (no lines for a folder remote)."""
    remote = settings.remote
    if remote is None or remote.folder is not None:
        return []
    async with connected(remote) as store:
        try:
            bucket = await store.bucket_settings()
        except RemoteError as err:
            return [Finding("bucket", "fail", str(err))]
    if bucket is None:
        return []
    findings = [
        _versioning(bucket),
        _lock(bucket, remote.object_lock),
        _default_encryption(bucket, remote.sse, sealed=remote.encrypt_to is not None),
    ]
    if bucket.unread:
        findings.append(
            Finding(
                "bucket",
                "warn",
                f"this host may not read {', '.join(bucket.unread)}",
                "grant it s3:GetBucketVersioning, s3:GetBucketObjectLockConfiguration and "
                "s3:GetEncryptionConfiguration to have them checked",
            )
        )
    return findings


def _versioning(bucket: BucketSettings) -> Finding:
    if bucket.versioning is None:
        return Finding("bucket_versioning", "ok", "not read (below)")
    if bucket.versioning != "Enabled" or bucket.lock:
        said = bucket.versioning.lower() or "never turned on"
        return Finding("bucket_versioning", "ok", f"versioning {said}")
    return Finding(
        "bucket_versioning",
        "warn",
        "versioning is on: what coldkeep deletes there (expire, an old manifest snapshot, "
        "a copy replaced) stays as a noncurrent version, still stored and readable",
        "add a lifecycle rule that expires noncurrent versions (or suspend versioning)",
    )


def _lock(bucket: BucketSettings, object_lock: str) -> Finding:
    if bucket.lock is None:
        return Finding("bucket_lock", "ok", "not read (below)")
    if object_lock != "off" and not bucket.lock:
        return Finding(
            "bucket_lock",
            "fail",
            f"[remote] object_lock is {object_lock!r} and the bucket has no Object Lock: "
            "every ship stops at its first upload",
            "ship to a bucket created with Object Lock (or turn it on for this one), "
            'or set object_lock = "off"',
        )
    if object_lock != "off":
        return Finding(
            "bucket_lock",
            "ok",
            f"Object Lock is {bucket.lock}; each object is locked {object_lock} until its "
            "expiry ([remote] object_lock)",
        )
    if not bucket.lock:
        return Finding("bucket_lock", "ok", "no Object Lock")
    return Finding(
        "bucket_lock",
        "warn",
        f"Object Lock is {bucket.lock}: coldkeep sets no retention of its own, and what "
        "it deletes before the bucket's retention ends stays there, locked, as a "
        "noncurrent version",
        'set [remote] object_lock = "compliance" (or "governance") to have each object '
        "locked until its own expiry",
    )


def _default_encryption(bucket: BucketSettings, sse: str | None, *, sealed: bool) -> Finding:
    """The bucket's own encryption, and what the objects are stored as: with
    ``sealed`` (``[remote] encrypt_to``) coldkeep's age streams, whatever the
    bucket does on top."""
    if bucket.encryption is None:
        return Finding("bucket_encryption", "ok", "not read (below)")
    asked = f"every upload asks for {sse} ([remote] sse)" if sse else "[remote] sse is not set"
    default = f"the bucket's default is {bucket.encryption}"
    if sealed:
        # The bucket only ever holds ciphertext of what coldkeep ships; what it
        # shipped before encrypt_to was set is for rekey (its plan counts them).
        return Finding(
            "bucket_encryption",
            "ok",
            f"{default}; {asked}; what coldkeep ships is sealed to [remote] encrypt_to's "
            "age recipients before it leaves this host, so the bucket holds no plaintext "
            "of it (coldkeep rekey seals what was shipped before encrypt_to was set)",
        )
    if sse is None and bucket.encryption.sse is None:
        return Finding(
            "bucket_encryption",
            "warn",
            f"{default} and {asked}: the objects are stored unencrypted",
            'set [remote] sse = "AES256" (or "aws:kms")',
        )
    return Finding("bucket_encryption", "ok", f"{default}; {asked}")


async def _identity(settings: Settings) -> list[Finding]:
    """The site as the bucket and this host know it: whose the prefix is, the
    site key (its fingerprint, to write down), and this host's clock against
    the bucket's (what locks and remote expiry are decided by)."""
    remote = settings.remote
    if remote is None:
        return []
    layout = Layout(settings.archive_root)
    site = None
    try:
        manifest = await Manifest.open_existing(layout.manifest)
    except (ManifestError, sqlite3.Error):
        manifest = None  # the manifest line says why
    if manifest is not None:
        async with manifest:
            site = await read_identity(manifest, layout)
    async with connected(remote) as store:
        try:
            found = await claims(store, remote.site)
            apart = await skew(store, now_ms())
        except RemoteError as err:
            return [Finding("site", "fail", str(err))]
        own_clock = store.own_clock
    return [
        _claim(remote.site, store.url, found, site),
        _site_key(site),
        _clock(apart, own_clock, remote.locks is not None),
    ]


def _claim(name: str, url: str, found: list[Claim], site: SiteIdentity | None) -> Finding:
    if site is None:
        if found:
            return Finding(
                "site_claim",
                "warn",
                f"remote.site {name!r} is already {found[0].describe()}'s, and this archive "
                "has no site id yet: its first ship will be refused",
                "give this site a remote.site of its own; if this host replaces that one, "
                "recover it instead (rebuild-manifest --from-remote)",
            )
        return Finding("site_claim", "ok", f"remote.site {name!r}: not claimed yet")
    other = claimed_by_other(found, site.site_id)
    if other is not None:
        return Finding("site_claim", "fail", refusal(name, url, other, site.site_id))
    state = "this site's" if found else "not claimed yet (the first ship claims it)"
    return Finding("site_claim", "ok", f"remote.site {name!r}: {state} (site id {site.site_id})")


def _site_key(site: SiteIdentity | None) -> Finding:
    if site is None or site.key is None:
        return Finding("site_key", "ok", "none yet: the first ship makes it")
    if site.key_problem is not None:
        return Finding("site_key", "fail", f"{site.key}: {site.key_problem}")
    return Finding(
        "site_key",
        "ok",
        f"{site.key}: write it down beside the identity file (on the day this host is gone, "
        "rebuild-manifest --from-remote --site-key takes only what it signed)",
    )


def _clock(apart: str | None, own_clock: bool, locks: bool) -> Finding:
    if not own_clock:
        return Finding("clock", "ok", "a folder remote: its clock is this host's")
    if apart is None:
        return Finding("clock", "ok", "this host's clock agrees with the bucket's")
    doing = "every ship stops (object_lock)" if locks else "remote expiry waits for the bucket's"
    return Finding(
        "clock",
        "fail" if locks else "warn",
        f"this host's clock is {apart} the bucket's: lock dates and remote expiry follow the "
        f"bucket's clock, so {doing}",
        "set this host's clock right (NTP: timedatectl set-ntp true)",
    )


async def _shipped(settings: Settings) -> int:
    """How many objects the manifest records as shipped (0 without one that opens)."""
    try:
        manifest = await Manifest.open_existing(Layout(settings.archive_root).manifest)
    except (ManifestError, sqlite3.Error):
        return 0
    if manifest is None:
        return 0
    async with manifest:
        return await RemoteObjects(manifest).count_under("")


async def _unmounted(settings: Settings, store: ObjectStore) -> str | None:
    """Why a ship would stop at the remote marker (remote/marker.py), or None;
    the manifest read-only (one that cannot be opened is the manifest line's)."""
    assert settings.remote is not None
    layout = Layout(settings.archive_root)
    try:
        manifest = await Manifest.open_existing(layout.manifest)
    except (ManifestError, sqlite3.Error):
        return None
    if manifest is None:
        return None
    async with manifest:
        try:
            await check_marker(
                store, RemoteObjects(manifest), settings.remote.site, layout, may_write=False
            )
        except RemoteUnmounted as err:
            return str(err)
    return None


# tools ------------------------------------------------------------------------


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
