"""The settings: ``coldkeep.toml`` parsed into typed, frozen dataclasses. This
module owns the file and its top-level keys; each section is read by its own
module (``configfiles``, ``configevents``, ``configio``, ``configjobs``,
``configalerts``, ``configremote``, ``configretention``, ``configmount``,
``configlake``), each
key through ``configtable.Table``.

Invariants:
- A bad config never half-loads: ``load_settings`` returns a complete ``Settings``
  or raises ``ConfigError`` whose message is one line naming the file, the key,
  what is wrong and how to fix it. Nothing runs on a config that did not load.
- Relative paths are relative to the config file's directory, resolved once here;
  every path in ``Settings`` is absolute.
- ``archive_root`` and ``live_root`` never nest, a ``file://`` remote folder and
  the block cache overlap neither, and ``state_db`` is not inside
  ``archive_root`` (configroots.py judges it by what the directories are).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from .configalerts import AlertsSettings, guard_secrets, read_alerts
from .configevents import EventsSettings, read_events
from .configfiles import FilesSettings, read_files
from .configio import GzipSettings, IoSettings, read_gzip, read_io
from .configjobs import JobsSettings, read_jobs
from .configlake import LakeSettings, read_lake
from .configmount import MountSettings, read_mount
from .configremote import RemoteSettings, read_remote
from .configretention import RetentionSettings, read_retention
from .configroots import check_apart, check_roots_apart
from .configtable import MAX_DAYS, ConfigError, Table

Mode = Literal["off", "plan", "on"]

CONFIG_ENV = "COLDKEEP_CONFIG"
DEFAULT_CONFIG_NAME = "coldkeep.toml"


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
    lake: LakeSettings = field(default_factory=LakeSettings)
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
    return replace(settings, warnings=guard_secrets(settings.config_path or path, settings.alerts))


def parse_settings(data: Mapping[str, Any], file: Path) -> Settings:
    """Check an already-parsed TOML document; ``file`` names it in errors and
    anchors relative paths."""
    top = Table(file, "", data)
    base = file.parent
    live_root = top.path("live_root", base, required=True, want="dir")
    archive_root = top.path("archive_root", base, required=True, want="creatable_dir")
    state_db = top.path("state_db", base, want="file")
    mode = top.choice("mode", "plan", get_args(Mode))
    hold_days = top.number("hold_days", 7.0, minimum=0, maximum=MAX_DAYS)
    assert live_root is not None and archive_root is not None

    remote = read_remote(top.table("remote"), base)
    files = read_files(top.table("files"), state_db, cold=remote is not None and remote.cold)
    events = read_events(top.table("events"))
    gzip = read_gzip(top.table("gzip"))
    io = read_io(top.table("io"))
    jobs = read_jobs(top.table("jobs"))
    alerts = read_alerts(top.table("alerts"))
    retention = read_retention(top.table("retention"))
    mount = read_mount(top.table("mount"), base)
    lake = read_lake(top.table("lake"), remote)
    top.done()
    jobs = _without_absent(jobs, remote, retention)

    check_roots_apart(file, live_root, archive_root, state_db)
    if remote is not None:
        _check_remote(file, remote, retention, (live_root, archive_root))
    check_apart(
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
        lake=lake,
    )


def _without_absent(
    jobs: JobsSettings, remote: RemoteSettings | None, retention: RetentionSettings
) -> JobsSettings:
    """The jobs but those this config has nothing for, neither scheduled nor shown."""
    absent = set()
    if remote is None:  # no remote tier: nothing to ship, no heartbeat
        absent |= {"ship", "heartbeat"}
    if remote is None or not remote.url.startswith("s3:"):  # only a bucket has cold classes
        absent.add("thaws")
    if not retention.configured:  # everything kept for ever: nothing to expire
        absent.add("expire")
    return replace(jobs, jobs={n: j for n, j in jobs.jobs.items() if n not in absent})


def _check_remote(
    file: Path, remote: RemoteSettings, retention: RetentionSettings, roots: tuple[Path, Path]
) -> None:
    """A remote folder outside the roots; an Object Lock with an end: objects are
    locked until expiry would delete them, which a retention for files and for
    event months says."""
    if remote.folder is not None:
        check_apart(
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
