"""The settings: ``coldkeep.toml`` parsed into typed, frozen dataclasses.

Invariants:
- A bad config never half-loads: ``load_settings`` returns a complete ``Settings``
  or raises ``ConfigError`` whose message is one line naming the file, the key,
  what is wrong and how to fix it. Nothing runs on a config that did not load.
- Relative paths are relative to the config file's directory, resolved once here;
  every path in ``Settings`` is absolute.
- ``archive_root`` and ``live_root`` never nest (either way), a ``file://`` remote
  folder overlaps neither, and ``state_db`` is not inside ``archive_root``: a pass
  would otherwise archive its own archive, sweep the application's files as
  leftovers, or ship into the live tree. Overlap is judged by what the
  directories are (links resolved, (st_dev, st_ino) compared), not by their
  spelling, so a symlink or a bind mount cannot hide it.
"""

from __future__ import annotations

import difflib
import os
import re
import socket
import stat
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from .errors import UsageError
from .globs import GlobError, compile_globs
from .recipients import RecipientInvalid, RecipientSet, parse_recipients

Mode = Literal["off", "plan", "on"]
Engine = Literal["isal", "zlib-ng", "zlib"]
TsFormat = Literal["ms", "s", "iso"]
# RESTART and TRUNCATE wait on the application's readers and writers: never the default.
CheckpointMode = Literal["PASSIVE", "FULL", "RESTART", "TRUNCATE"]
# What the event move does when the application's triggers on its events table,
# or foreign keys of other tables referencing it, would act on its DELETE:
# "refuse" the event phase (the default), or "fire" them (the operator accepts
# that they run). Foreign keys may also be "ignore"d: enforcement stays off on
# coldkeep's connection and the referencing rows keep their values.
TriggerPolicy = Literal["refuse", "fire"]
ForeignKeyPolicy = Literal["refuse", "fire", "ignore"]

# Measured on the 2-core reference machine (docs/performance.md): ISA-L level 1
# compresses JSONL ~4x faster than zlib -6 at a ratio within 4 % of gzip -6's.
DEFAULT_ENGINE: Engine = "isal"
DEFAULT_LEVEL = 1
LEVEL_RANGE: Mapping[Engine, tuple[int, int]] = {"isal": (0, 3), "zlib-ng": (1, 9), "zlib": (1, 9)}

# The largest numbers a config may hold: day counts up to a century, seconds up
# to a year, integers up to 2**53 (exact as floats, far from SQLite's int64 after
# any arithmetic on them). Larger ones (and nan, inf) are typos or tests of the
# parser, and refused at load time: converted to milliseconds or dates later they
# overflow, after something was written.
MAX_DAYS = 36_500.0
MAX_SECONDS = 365 * 86_400.0
MAX_INTEGER = 2**53

CONFIG_ENV = "COLDKEEP_CONFIG"
DEFAULT_CONFIG_NAME = "coldkeep.toml"


class ConfigError(UsageError):
    """A config that cannot be used; ``str()`` is the one-line message for the operator."""

    def __init__(self, file: Path, key: str | None, problem: str, fix: str) -> None:
        where = f"{file}: {key}" if key else str(file)
        super().__init__(f"{where}: {problem} ({fix})")
        self.file = file
        self.key = key


@dataclass(frozen=True)
class UnitClosedMarker:
    """A unit is closed when this file exists directly in its folder."""

    name: str


@dataclass(frozen=True)
class UnitClosedSql:
    """A unit is closed when this query (run on ``state_db``) returns its name."""

    query: str


UnitClosed = UnitClosedMarker | UnitClosedSql


@dataclass(frozen=True)
class FilesSettings:
    include: tuple[str, ...] = ("**/*.jsonl", "**/*.log")
    exclude: tuple[str, ...] = ()
    min_age_days: float = 14.0
    unit_closed: UnitClosed | None = None
    bundle_below: int = 1 << 20  # smaller files are packed into bundles; 0 = never
    bundle_bytes: int = 64 << 20  # a bundle's size cap


@dataclass(frozen=True)
class EventsSettings:
    table: str = "events"
    kind_column: str = "kind"
    ts_column: str = "ts"
    ts_format: TsFormat = "ms"
    kinds: frozenset[str] | None = None  # the kinds archived; None: every kind
    min_age_days: float = 30.0
    batch_rows: int = 2600
    busy_timeout_ms: int = 5000
    checkpoint_every: int = 8  # batches
    checkpoint_wal_bytes: int = 16 << 20
    wal_restart_bytes: int = 32 << 20  # 0: never wait for the checkpoints
    checkpoint_timeout_s: float = 30.0
    checkpoint_mode: CheckpointMode = "PASSIVE"
    triggers: TriggerPolicy = "refuse"
    foreign_keys: ForeignKeyPolicy = "refuse"


@dataclass(frozen=True)
class GzipSettings:
    engine: Engine = DEFAULT_ENGINE
    level: int = DEFAULT_LEVEL


@dataclass(frozen=True)
class IoSettings:
    bytes_per_s: int = 0
    workers: int = 0  # files archived at once; 0 = two per core


# Storage classes a ranged GET can read at once: GLACIER and DEEP_ARCHIVE objects
# need a restore request first, which would leave a 3 a.m. restore waiting hours.
STORAGE_CLASSES = (
    "STANDARD",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "REDUCED_REDUNDANCY",
)


@dataclass(frozen=True)
class RemoteSettings:
    """The off-host tier. ``url`` is ``s3://bucket/prefix`` or ``file:///path``;
    credentials never appear here (the standard AWS chain provides them)."""

    url: str
    endpoint_url: str | None = None
    region: str | None = None  # None: from the environment
    storage_class: str = "STANDARD"
    site: str = field(default_factory=socket.gethostname)
    keep_local_days: float = 30.0  # -1: keep local copies for ever
    bytes_per_s: int = 0
    sse: str | None = None  # server-side encryption asked of every upload (SSE_MODES)
    kms_key_id: str | None = None  # with sse = "aws:kms": the key (None: the account's)
    object_lock: str = "off"  # LOCK_MODES: each object retained until its expiry
    encrypt_to: RecipientSet | None = None  # objects sealed to these age recipients first

    @property
    def locks(self) -> str | None:
        """The S3 Object Lock mode every upload asks for (``GOVERNANCE`` or
        ``COMPLIANCE``), None when ``object_lock`` is off."""
        return None if self.object_lock == "off" else self.object_lock.upper()

    @property
    def keeps_local(self) -> bool:
        return self.keep_local_days < 0

    @property
    def folder(self) -> Path | None:
        """A ``file://`` remote's directory."""
        if not self.url.startswith("file:"):
            return None
        return Path(urllib.parse.unquote(urllib.parse.urlsplit(self.url).path))


# A remote-only copy read without restoring it (``coldkeep mount``, ``cat``) goes
# through an on-disk block cache of this many bytes at most (remote/rangecache.py).
DEFAULT_CACHE_BYTES = 1 << 30
# At least this many: a few readers each holding a block in flight, with room left
# for the blocks they read next (1 MiB blocks).
MIN_CACHE_BYTES = 8 << 20


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/coldkeep/mount`` (~/.cache by default): on disk where
    /tmp is often a tmpfs (memory), private to the user, and outside any root."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG spec: a relative value is invalid and ignored.
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "coldkeep" / "mount"


@dataclass(frozen=True)
class MountSettings:
    """Reads of remote-only copies without restoring them: ``cache_dir`` holds a
    folder of cached blocks per running reader (made on open, removed on close),
    at most ``cache_bytes`` in each."""

    cache_bytes: int = DEFAULT_CACHE_BYTES
    cache_dir: Path = field(default_factory=default_cache_dir)


@dataclass(frozen=True)
class RetentionSettings:
    """How long archived data is kept; None keeps it for ever."""

    files_days: float | None = None  # from each file's mtime
    events_days: float | None = None  # from the end of each event month
    units: Mapping[str, float] = field(default_factory=dict)  # files_days per unit

    @property
    def configured(self) -> bool:
        return self.files_days is not None or self.events_days is not None or bool(self.units)

    def files_days_for(self, unit: str) -> float | None:
        return self.units.get(unit, self.files_days)


JOB_NAMES = ("pass", "verify", "ship", "expire", "stats", "alerts")


@dataclass(frozen=True)
class JobSettings:
    """One scheduled job: on a cron schedule or every ``interval_s`` seconds."""

    name: str
    enabled: bool = True
    cron: str | None = None
    interval_s: float | None = None
    timeout_s: float = 0.0  # 0: none
    run_on_boot: bool = False
    max_duration_s: float | None = None  # verify: stop and resume next time


DEFAULT_JOBS: Mapping[str, JobSettings] = {
    "pass": JobSettings("pass", cron="17 3 * * *", timeout_s=6 * 3600),
    "verify": JobSettings("verify", cron="41 4 * * 0", timeout_s=6 * 3600, max_duration_s=4 * 3600),
    "ship": JobSettings("ship", cron="47 3 * * *", timeout_s=6 * 3600),
    "expire": JobSettings("expire", cron="23 5 * * *", timeout_s=6 * 3600),
    "stats": JobSettings("stats", interval_s=3600, timeout_s=300, run_on_boot=True),
    "alerts": JobSettings("alerts", interval_s=60, timeout_s=300, run_on_boot=True),
}


@dataclass(frozen=True)
class JobsSettings:
    timezone: str | None = None  # None: the machine's local time
    retention_days: float = 90.0
    retention_rows: int = 500
    jobs: Mapping[str, JobSettings] = field(default_factory=lambda: dict(DEFAULT_JOBS))


@dataclass(frozen=True)
class AlertsSettings:
    command: tuple[str, ...] = ()  # argv; gets each alert as JSON on stdin
    webhook: str | None = None  # POSTed each alert as JSON
    timeout_s: float = 30.0

    @property
    def sinks(self) -> list[str]:
        out = []
        if self.command:
            out.append("command")
        if self.webhook:
            out.append("webhook")
        return out


@dataclass(frozen=True)
class Settings:
    live_root: Path
    archive_root: Path
    config_path: Path | None = None
    state_db: Path | None = None
    mode: Mode = "plan"
    hold_days: float = 7.0
    files: FilesSettings = field(default_factory=FilesSettings)
    events: EventsSettings = field(default_factory=EventsSettings)
    gzip: GzipSettings = field(default_factory=GzipSettings)
    io: IoSettings = field(default_factory=IoSettings)
    jobs: JobsSettings = field(default_factory=JobsSettings)
    alerts: AlertsSettings = field(default_factory=AlertsSettings)
    remote: RemoteSettings | None = None
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    mount: MountSettings = field(default_factory=MountSettings)
    warnings: tuple[str, ...] = ()  # said once by whoever loads it (CLI, console)


def default_config_path() -> Path:
    """``$COLDKEEP_CONFIG`` if set, else ``./coldkeep.toml``."""
    return Path(os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG_NAME)


def load_settings(path: Path) -> Settings:
    """Read and check ``path``; raise ``ConfigError`` on anything wrong."""
    path = path.expanduser()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            path, None, "no such file", f"pass --config or set ${CONFIG_ENV}"
        ) from None
    except OSError as err:
        raise ConfigError(
            path, None, f"cannot be read: {err.strerror}", "check its permissions"
        ) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(path, None, f"is not valid TOML: {err}", "fix the syntax") from None
    settings = parse_settings(data, path.resolve())
    return replace(settings, warnings=_guard_secrets(settings.config_path or path, settings))


def _guard_secrets(path: Path, settings: Settings) -> tuple[str, ...]:
    """A config that makes coldkeep run a command (alerts.command), or holds a
    credential (a webhook with a user, a password, a query or a token in it), is
    what a less trusted user would edit to run code as coldkeep's user (root, from
    cron) or to read the secret: refused when anyone but its owner can change it
    (the file, or its folder unless that is sticky like /tmp); a warning when
    everyone can read a credential in it."""
    alerts = settings.alerts
    key = "alerts.command" if alerts.command else None
    secret = alerts.webhook is not None and _has_credentials(alerts.webhook)
    key = key or ("alerts.webhook" if secret else None)
    if key is None:
        return ()
    for target in (path, path.parent):
        mode = target.stat().st_mode
        sticky_dir = target.is_dir() and bool(mode & stat.S_ISVTX)
        if mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_dir:
            who = "everyone" if mode & stat.S_IWOTH else "its group"
            raise ConfigError(
                path,
                key,
                f"{target} can be changed by {who}, and {key} runs as coldkeep's user",
                f"chmod go-w {target}",
            )
    if secret and path.stat().st_mode & stat.S_IROTH:
        return (
            f"{path} is readable by everyone and alerts.webhook holds a credential: "
            f"chmod o-r {path}",
        )
    return ()


def _has_credentials(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    token = any(
        len(seg) >= 20 and seg.replace("-", "").replace("_", "").isalnum()
        for seg in parts.path.split("/")
    )
    return bool(parts.username or parts.password or parts.query or token)


def parse_settings(data: Mapping[str, Any], file: Path) -> Settings:
    """Check an already-parsed TOML document; ``file`` names it in errors and
    anchors relative paths."""
    top = _Table(file, "", data)
    base = file.parent
    live_root = top.path("live_root", base, required=True, want="dir")
    archive_root = top.path("archive_root", base, required=True, want="creatable_dir")
    state_db = top.path("state_db", base, want="file")
    mode = top.choice("mode", "plan", get_args(Mode))
    hold_days = top.number("hold_days", 7.0, minimum=0, maximum=MAX_DAYS)
    assert live_root is not None and archive_root is not None

    files = _files(top.table("files"), state_db)
    events = _events(top.table("events"))
    gzip = _gzip(top.table("gzip"))
    io = _io(top.table("io"))
    jobs = _jobs(top.table("jobs"))
    alerts = _alerts(top.table("alerts"))
    remote = _remote(top.table("remote"), base)
    retention = _retention(top.table("retention"))
    mount = _mount(top.table("mount"), base)
    top.done()
    if remote is None:  # no remote tier: no ship job to schedule or show
        jobs = replace(jobs, jobs={n: j for n, j in jobs.jobs.items() if n != "ship"})
    if not retention.configured:  # everything kept for ever: nothing to expire
        jobs = replace(jobs, jobs={n: j for n, j in jobs.jobs.items() if n != "expire"})

    _check_roots_apart(file, live_root, archive_root, state_db)
    if remote is not None:
        _check_remote(file, remote, retention, (live_root, archive_root))
    _check_apart(
        file,
        "mount.cache_dir",
        mount.cache_dir,
        (live_root, archive_root),
        "put the cache elsewhere, e.g. under ~/.cache",
    )
    return Settings(
        live_root=live_root,
        archive_root=archive_root,
        config_path=file,
        state_db=state_db,
        mode=mode,
        hold_days=hold_days,
        files=files,
        events=events,
        gzip=gzip,
        io=io,
        jobs=jobs,
        alerts=alerts,
        remote=remote,
        retention=retention,
        mount=mount,
    )


def _check_remote(
    file: Path, remote: RemoteSettings, retention: RetentionSettings, roots: tuple[Path, Path]
) -> None:
    """A remote folder outside the roots; an Object Lock with an end: objects are
    locked until expiry would delete them, which a retention for files and for
    event months says."""
    if remote.folder is not None:
        _check_apart(
            file,
            "remote.url",
            remote.folder,
            roots,
            "put the remote elsewhere, ideally on another disk",
        )
    if remote.locks is None:
        return
    for key, days in (("files_days", retention.files_days), ("events_days", retention.events_days)):
        if days is None:
            raise ConfigError(
                file,
                "remote.object_lock",
                f"locks each object until its expiry, and [retention] {key} is not set",
                f'set [retention] {key}, or object_lock = "off"',
            )


def _mount(t: _Table, base: Path) -> MountSettings:
    cache_dir = t.path("cache_dir", base, want="creatable_dir")
    mount = MountSettings(
        cache_bytes=t.integer(
            "cache_bytes", DEFAULT_CACHE_BYTES, minimum=MIN_CACHE_BYTES, maximum=MAX_INTEGER
        ),
        cache_dir=cache_dir if cache_dir is not None else default_cache_dir(),
    )
    t.done()
    return mount


def _retention(t: _Table) -> RetentionSettings:
    def days(table: _Table, name: str) -> float | None:
        if name not in table.data:
            table.taken.add(name)
            return None
        return table.number(name, 0.0, minimum=1, maximum=MAX_DAYS)

    files_days = days(t, "files_days")
    events_days = days(t, "events_days")
    u = t.table("units")
    units = {}
    for unit in sorted(u.data):
        value = days(u, unit)
        assert value is not None
        units[unit] = value
    u.done()
    t.done()
    return RetentionSettings(files_days, events_days, units)


_BUNDLE_MEMBER_MAX = 64 << 20


def _files(t: _Table, state_db: Path | None) -> FilesSettings:
    include = t.globs("include", FilesSettings.include)
    exclude = t.globs("exclude", FilesSettings.exclude)
    unit_closed = _unit_closed(t, state_db)
    files = FilesSettings(
        include=include,
        exclude=exclude,
        min_age_days=t.number(
            "min_age_days", FilesSettings.min_age_days, minimum=0, maximum=MAX_DAYS
        ),
        unit_closed=unit_closed,
        bundle_below=t.integer("bundle_below", FilesSettings.bundle_below, minimum=0),
        bundle_bytes=t.integer("bundle_bytes", FilesSettings.bundle_bytes, minimum=1 << 20),
    )
    if files.bundle_below > _BUNDLE_MEMBER_MAX:
        raise ConfigError(
            t.file,
            t.key("bundle_below"),
            f"{files.bundle_below} is above {_BUNDLE_MEMBER_MAX} (members are packed in memory)",
            "bundles are for small files: keep it at a few MiB at most",
        )
    t.done()
    return files


def _kinds(t: _Table) -> frozenset[str] | None:
    """``events.kinds``: the kinds archived (every other one stays live), or None
    for every kind (the key left out)."""
    kinds = t.strings("kinds", ())
    if "kinds" in t.data and not kinds:
        raise ConfigError(
            t.file,
            t.key("kinds"),
            "an empty list archives no event row",
            "name the kinds to archive, or leave the key out to archive every kind",
        )
    return frozenset(kinds) if kinds else None


def _events(t: _Table) -> EventsSettings:
    events = EventsSettings(
        table=t.identifier("table", EventsSettings.table),
        kind_column=t.identifier("kind_column", EventsSettings.kind_column),
        ts_column=t.identifier("ts_column", EventsSettings.ts_column),
        ts_format=t.choice("ts_format", EventsSettings.ts_format, get_args(TsFormat)),
        kinds=_kinds(t),
        min_age_days=t.number(
            "min_age_days", EventsSettings.min_age_days, minimum=0, maximum=MAX_DAYS
        ),
        batch_rows=t.integer("batch_rows", EventsSettings.batch_rows, minimum=1),
        busy_timeout_ms=t.integer(
            "busy_timeout_ms", EventsSettings.busy_timeout_ms, minimum=0, maximum=86_400_000
        ),
        checkpoint_every=t.integer("checkpoint_every", EventsSettings.checkpoint_every, minimum=1),
        checkpoint_wal_bytes=t.integer(
            "checkpoint_wal_bytes", EventsSettings.checkpoint_wal_bytes, minimum=0
        ),
        wal_restart_bytes=t.integer(
            "wal_restart_bytes", EventsSettings.wal_restart_bytes, minimum=0
        ),
        checkpoint_timeout_s=t.number(
            "checkpoint_timeout_s", EventsSettings.checkpoint_timeout_s, minimum=0.1
        ),
        checkpoint_mode=t.choice(
            "checkpoint_mode", EventsSettings.checkpoint_mode, get_args(CheckpointMode)
        ),
        triggers=t.choice("triggers", EventsSettings.triggers, get_args(TriggerPolicy)),
        foreign_keys=t.choice(
            "foreign_keys", EventsSettings.foreign_keys, get_args(ForeignKeyPolicy)
        ),
    )
    t.done()
    return events


def _gzip(t: _Table) -> GzipSettings:
    engine = t.choice("engine", DEFAULT_ENGINE, get_args(Engine))
    lo, hi = LEVEL_RANGE[engine]
    level = t.integer("level", DEFAULT_LEVEL if engine == DEFAULT_ENGINE else 6, minimum=lo)
    if level > hi:
        raise ConfigError(
            t.file, "gzip.level", f"{level} is out of range for engine {engine!r}", f"use {lo}–{hi}"
        )
    t.done()
    return GzipSettings(engine=engine, level=level)


def _io(t: _Table) -> IoSettings:
    io = IoSettings(
        bytes_per_s=t.integer("bytes_per_s", 0, minimum=0),
        workers=t.integer("workers", 0, minimum=0),
    )
    t.done()
    return io


def _jobs(t: _Table) -> JobsSettings:
    timezone = t.string("timezone", None)
    if timezone is not None:
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                t.file, t.key("timezone"), f"{timezone!r} is not a time zone", 'use e.g. "UTC"'
            ) from None
    jobs: dict[str, JobSettings] = {}
    for name in JOB_NAMES:
        default = DEFAULT_JOBS[name]
        j = t.table(name)
        cron = j.string("cron", None)
        interval = j.number("interval", -1.0, minimum=1) if "interval" in j.data else None
        if cron is None and interval is None:
            cron, interval = default.cron, default.interval_s
        if cron is not None:
            if interval is not None:
                raise ConfigError(
                    t.file, j.key("cron"), "cron and interval are both set", "keep one of them"
                )
            _check_cron(t, j, cron)
        max_duration = (
            j.number("max_duration", 0, minimum=1)
            if "max_duration" in j.data
            else default.max_duration_s
        )
        jobs[name] = JobSettings(
            name,
            enabled=j.boolean("enabled", default.enabled),
            cron=cron,
            interval_s=interval,
            timeout_s=j.number("timeout", default.timeout_s, minimum=0),
            run_on_boot=j.boolean("run_on_boot", default.run_on_boot),
            max_duration_s=max_duration,
        )
        j.done()
    settings = JobsSettings(
        timezone=timezone,
        retention_days=t.number("retention_days", 90.0, minimum=0, maximum=MAX_DAYS),
        retention_rows=t.integer("retention_rows", 500, minimum=0),
        jobs=jobs,
    )
    t.done()
    return settings


def _check_cron(t: _Table, j: _Table, cron: str) -> None:
    """Five fields (or an @alias) that croniter reads AND that ever fire: it
    accepts "0 0 31 2 *" (February 31st) and fails only when asked for the time."""
    five = cron.startswith("@") or len(cron.split()) == 5
    if not five or not croniter.is_valid(cron):
        raise ConfigError(
            t.file,
            j.key("cron"),
            f"{cron!r} is not a cron expression",
            'use five fields, e.g. "17 3 * * *"',
        )
    try:
        croniter(cron).get_next(float)
    except CroniterBadDateError:
        raise ConfigError(
            t.file, j.key("cron"), f"{cron!r} never fires", "check the day and the month"
        ) from None


def _alerts(t: _Table) -> AlertsSettings:
    command = t.strings("command", ())
    webhook = t.string("webhook", None)
    if webhook is not None and not webhook.startswith(("http://", "https://")):
        raise ConfigError(t.file, t.key("webhook"), f"{webhook!r} is not an http(s) URL", "fix it")
    alerts = AlertsSettings(command, webhook, t.number("timeout", 30.0, minimum=1))
    t.done()
    return alerts


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SITE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _remote(t: _Table, base: Path) -> RemoteSettings | None:
    url = t.string("url", None)
    if url is None:
        if t.data:
            raise ConfigError(
                t.file, t.key("url"), "is required in [remote]", 'add url = "s3://bucket/prefix"'
            )
        return None
    try:
        url = remote_url(url, base)
    except RemoteUrlError as err:
        raise ConfigError(t.file, t.key("url"), err.problem, err.fix) from None
    endpoint = t.string("endpoint_url", None)
    if endpoint is not None:
        try:
            endpoint_url(endpoint)
        except RemoteUrlError as err:
            raise ConfigError(t.file, t.key("endpoint_url"), err.problem, err.fix) from None
    site = t.string("site", None) or socket.gethostname()
    if not _SITE.fullmatch(site):
        raise ConfigError(
            t.file,
            t.key("site"),
            f"{site!r} is not a plain folder name",
            "use letters, digits, '.', '_' and '-'",
        )
    keep = t.number("keep_local_days", 30.0, minimum=-1, maximum=MAX_DAYS)
    if -1 < keep < 0:
        raise ConfigError(
            t.file,
            t.key("keep_local_days"),
            f"{keep} is negative",
            "use -1 (for ever) or 0 or more",
        )
    storage_class = t.string("storage_class", "STANDARD")
    if storage_class not in STORAGE_CLASSES:
        fix = "use one of " + ", ".join(STORAGE_CLASSES)
        if storage_class in ("GLACIER", "DEEP_ARCHIVE"):
            fix = "its objects cannot be read without a restore request; use GLACIER_IR"
        raise ConfigError(
            t.file, t.key("storage_class"), f"{storage_class!r} is not supported", fix
        )
    sse, kms_key_id = _sse(t, url)
    remote = RemoteSettings(
        url=url,
        endpoint_url=endpoint,
        region=t.string("region", None),
        storage_class=str(storage_class),
        site=site,
        keep_local_days=keep,
        bytes_per_s=t.integer("bytes_per_s", 0, minimum=0),
        sse=sse,
        kms_key_id=kms_key_id,
        object_lock=_object_lock(t, url),
        encrypt_to=_encrypt_to(t),
    )
    t.done()
    return remote


LOCK_MODES = ("off", "governance", "compliance")


def _encrypt_to(t: _Table) -> RecipientSet | None:
    """``[remote] encrypt_to``: age X25519 recipients, checked; no value of it is
    ever echoed (a secret key put there by mistake stays unprinted)."""
    raw = t._get("encrypt_to")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ConfigError(
            t.file,
            t.key("encrypt_to"),
            f"expected a list of age1… recipients, got {type(raw).__name__}",
            'write encrypt_to = ["age1…"]',
        )
    try:
        return parse_recipients(raw)
    except RecipientInvalid as err:
        raise ConfigError(t.file, f"remote.{err.key}", err.problem, err.fix) from None


def _object_lock(t: _Table, url: str) -> str:
    object_lock = str(t.choice("object_lock", "off", LOCK_MODES))
    if object_lock != "off" and not url.startswith("s3:"):
        raise ConfigError(
            t.file, t.key("object_lock"), "a file:// remote has no Object Lock", 'set it to "off"'
        )
    return object_lock


SSE_MODES = ("AES256", "aws:kms")


def _sse(t: _Table, url: str) -> tuple[str | None, str | None]:
    """``[remote] sse`` and ``kms_key_id``, checked against each other and the URL."""
    sse = t.string("sse", None)
    kms_key_id = t.string("kms_key_id", None)
    if sse is not None and sse not in SSE_MODES:
        raise ConfigError(
            t.file, t.key("sse"), f"{sse!r} is not supported", 'use "AES256" or "aws:kms"'
        )
    if sse is not None and not url.startswith("s3:"):
        raise ConfigError(
            t.file, t.key("sse"), "a file:// remote has no server-side encryption", "remove it"
        )
    if kms_key_id is not None and sse != "aws:kms":
        raise ConfigError(
            t.file, t.key("kms_key_id"), 'is a KMS key: it needs sse = "aws:kms"',
            'set sse = "aws:kms", or remove kms_key_id',
        )  # fmt: skip
    return sse, kms_key_id


class RemoteUrlError(UsageError, ValueError):
    """A remote URL or endpoint that cannot be used: what is wrong and the fix,
    never the credential that may be in it."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem} ({fix})")
        self.problem = problem
        self.fix = fix


_CREDENTIALS_FIX = (
    "remove it; credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
    "~/.aws/credentials or the instance role"
)


def remote_url(url: str, base: Path) -> str:
    """``url`` as the remote tier keeps it: ``s3://bucket[/prefix]`` with a valid
    bucket name, or ``file://`` with an absolute path (a relative one is taken
    from ``base``). Raises ``RemoteUrlError``."""
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:
        raise RemoteUrlError("holds a credential", _CREDENTIALS_FIX)
    if parts.scheme == "s3":
        if not _BUCKET.fullmatch(parts.netloc):
            raise RemoteUrlError(
                f"{parts.netloc!r} is not an S3 bucket name",
                "use 3-63 lowercase letters, digits, '.' and '-'",
            )
        prefix = parts.path.strip("/")
        return f"s3://{parts.netloc}/{prefix}" if prefix else f"s3://{parts.netloc}"
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise RemoteUrlError(f"{url} names a host", "write file:///absolute/path")
        raw = urllib.parse.unquote(parts.path)
        if not raw or "\0" in raw:
            raise RemoteUrlError(f"{url!r} has no usable path", "write file:///path")
        return Path(os.path.normpath(base / raw)).as_uri()
    raise RemoteUrlError(
        f"{url} is not an s3:// or file:// URL", "write s3://bucket/prefix or file:///path"
    )


def endpoint_url(endpoint: str) -> str:
    """An S3-compatible server's address: ``http(s)://host[:port]``, no credential."""
    parts = urllib.parse.urlsplit(endpoint)
    if "@" in parts.netloc:
        raise RemoteUrlError("holds a credential", _CREDENTIALS_FIX)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteUrlError(f"{endpoint!r} is not an http(s) URL", "write http(s)://host:port")
    return endpoint


def _unit_closed(t: _Table, state_db: Path | None) -> UnitClosed | None:
    raw = t.string("unit_closed", None)
    if raw is None:
        return None
    kind, _, arg = raw.partition(":")
    arg = arg.strip()
    if kind == "marker" and arg and "/" not in arg:
        return UnitClosedMarker(arg)
    if kind == "sql" and arg:
        if state_db is None:
            raise ConfigError(
                t.file, "files.unit_closed", "a sql: rule needs a database", "set state_db"
            )
        return UnitClosedSql(arg)
    raise ConfigError(
        t.file,
        "files.unit_closed",
        f"{raw!r} is not a rule",
        'use "marker:<file name>" or "sql:SELECT unit FROM …"',
    )


def _check_apart(file: Path, key: str, path: Path, roots: tuple[Path, Path], fix: str) -> None:
    """``path`` (the folder ``key`` names) neither inside live_root or
    archive_root nor holding one. A file:// remote or the block cache in
    live_root would be archived by the next pass; in archive_root a remote would
    share the fate the remote tier exists to escape, and the cache would be
    walked as the archive's own files; the other way round, emptying the cache
    would remove a root."""
    for name, root in zip(("live_root", "archive_root"), roots, strict=True):
        if is_inside(path, root) or is_inside(root, path):
            raise ConfigError(file, key, f"{path} and {name} ({root}) overlap", fix)


def _check_roots_apart(file: Path, live: Path, archive: Path, state_db: Path | None) -> None:
    if is_inside(archive, live):
        raise ConfigError(
            file,
            "archive_root",
            f"{archive} is inside live_root {live}",
            "put the archive outside the live tree",
        )
    if is_inside(live, archive):
        raise ConfigError(
            file,
            "live_root",
            f"{live} is inside archive_root {archive}",
            "put the archive outside the live tree",
        )
    if state_db is not None and is_inside(state_db, archive):
        raise ConfigError(
            file,
            "state_db",
            f"{state_db} is inside archive_root {archive}",
            "keep the application's database outside the archive",
        )


def is_inside(inner: Path, outer: Path) -> bool:
    """Whether ``inner`` is ``outer`` or lies beneath it, by what the directories
    are rather than how they are spelled: links resolved, and each directory from
    ``inner`` (its nearest existing one, where it does not exist yet) up to ``/``
    compared with ``outer`` by (st_dev, st_ino), which a bind mount or a second
    path to the same directory cannot hide."""
    inner_r, outer_r = Path(os.path.realpath(inner)), Path(os.path.realpath(outer))
    if inner_r.is_relative_to(outer_r):
        return True
    try:
        st = os.stat(outer_r)
    except OSError:
        return False  # not there: nothing existing lies inside it yet
    target = (st.st_dev, st.st_ino)
    for folder in (inner_r, *inner_r.parents):
        try:
            here = os.stat(folder)
        except OSError:
            continue  # not created yet: its nearest existing parent decides
        if (here.st_dev, here.st_ino) == target:
            return True
    return False


def _plain(x: float) -> str:
    """A bound as an operator writes it: 36500, 0.1, 31536000."""
    return str(int(x)) if x == int(x) else f"{x:g}"


class _Table:
    """One TOML table being read: each key taken once, leftovers are unknown keys."""

    def __init__(self, file: Path, prefix: str, data: Mapping[str, Any]) -> None:
        self.file = file
        self.prefix = prefix
        self.data = data
        self.taken: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _get(self, name: str) -> Any:
        self.taken.add(name)
        return self.data.get(name)

    def _wrong(self, name: str, value: Any, want: str) -> ConfigError:
        return ConfigError(
            self.file,
            self.key(name),
            f"expected {want}, got {type(value).__name__} {value!r}",
            f"write {want}",
        )

    def table(self, name: str) -> _Table:
        value = self._get(name)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self._wrong(name, value, f"a [{self.key(name)}] table")
        return _Table(self.file, f"{self.key(name)}.", value)

    def string(self, name: str, default: str | None) -> str | None:
        value = self._get(name)
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            raise self._wrong(name, value, "a non-empty string")
        return value

    def identifier(self, name: str, default: str) -> str:
        value = self.string(name, default)
        assert value is not None
        if not value.replace("_", "a").isalnum() or value[0].isdigit():
            raise ConfigError(
                self.file,
                self.key(name),
                f"{value!r} is not a plain SQL identifier",
                "use letters, digits and _",
            )
        return value

    def choice(self, name: str, default: Any, options: tuple[Any, ...]) -> Any:
        value = self._get(name)
        if value is None:
            return default
        if value not in options:
            shown = ", ".join(repr(o) for o in options)
            raise ConfigError(
                self.file, self.key(name), f"{value!r} is not one of {shown}", "pick one of them"
            )
        return value

    def number(
        self, name: str, default: float, *, minimum: float, maximum: float = MAX_SECONDS
    ) -> float:
        value = self._get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._wrong(name, value, "a number")
        if not minimum <= value <= maximum:  # nan compares false: refused here too
            raise self._out_of_range(name, value, minimum, maximum)
        return float(value)

    def integer(self, name: str, default: int, *, minimum: int, maximum: int = MAX_INTEGER) -> int:
        value = self._get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(name, value, "an integer")
        if not minimum <= value <= maximum:
            raise self._out_of_range(name, value, minimum, maximum)
        return value

    def _out_of_range(self, name: str, value: float, lo: float, hi: float) -> ConfigError:
        said = f"below {_plain(lo)}" if value < lo else "not a number"
        said = f"above {_plain(hi)}" if value > hi else said
        return ConfigError(
            self.file, self.key(name), f"{value} is {said}", f"use {_plain(lo)} to {_plain(hi)}"
        )

    def boolean(self, name: str, default: bool) -> bool:
        value = self._get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._wrong(name, value, "true or false")
        return value

    def strings(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        value = self._get(name)
        if value is None:
            return default
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self._wrong(name, value, "a list of non-empty strings")
        return tuple(value)

    def globs(self, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        patterns = self.strings(name, default)
        try:
            compile_globs(patterns)
        except GlobError as err:
            raise ConfigError(
                self.file, self.key(name), str(err), "write globs relative to live_root"
            ) from None
        return patterns

    def path(
        self,
        name: str,
        base: Path,
        *,
        required: bool = False,
        want: Literal["dir", "file", "creatable_dir"],
    ) -> Path | None:
        raw = self.string(name, None)
        if raw is None:
            if required:
                raise ConfigError(
                    self.file, self.key(name), "is required", f'add {self.key(name)} = "<path>"'
                )
            return None
        if "\0" in raw:  # the OS cannot take it; refused here, not by a stat deep inside
            raise ConfigError(
                self.file, self.key(name), f"{raw!r} contains a NUL byte", "write a plain path"
            )
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else base / path
        path = Path(os.path.normpath(path))
        if want == "creatable_dir" and not path.exists():
            if path.parent.is_dir():
                return path  # created on first use
            want = "dir"
        ok = path.is_dir() if want in ("dir", "creatable_dir") else path.is_file()
        if not ok:
            what = "directory" if want != "file" else "file"
            problem = f"{path} is not a {what}" if path.exists() else f"{path} does not exist"
            fix = (
                f"create the {what}"
                if Path(raw).is_absolute()
                else f"create the {what}; relative paths are relative to {self.file.parent}"
            )
            raise ConfigError(self.file, self.key(name), problem, fix)
        return path

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.taken)
        if unknown:
            name = unknown[0]
            close = difflib.get_close_matches(name, sorted(self.taken), n=1)
            fix = f"did you mean {self.key(close[0])}?" if close else "remove it"
            raise ConfigError(self.file, self.key(name), "unknown key", fix)
