"""coldkeep.toml: good configs load into typed settings, bad ones are refused in one
line that names the file, the key and the fix."""

from __future__ import annotations

import math
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyrage import x25519

from coldkeep.core.base.config import load_settings
from coldkeep.core.base.configfiles import UnitClosedMarker, UnitClosedSql
from coldkeep.core.base.configjobs import DEFAULT_JOBS, schedule
from coldkeep.core.base.configtable import ConfigError


@pytest.fixture
def site(tmp_path: Path) -> Path:
    (tmp_path / "live").mkdir()
    (tmp_path / "state.db").write_bytes(b"")
    return tmp_path


def write(site: Path, text: str) -> Path:
    path = site / "coldkeep.toml"
    path.write_text(text)
    return path


def test_a_minimal_config_gets_the_defaults(site: Path) -> None:
    cfg = load_settings(write(site, 'live_root = "live"\narchive_root = "archive"\n'))
    assert cfg.live_root == site / "live"
    assert cfg.archive_root == site / "archive"  # created on first use
    assert cfg.mode == "plan" and cfg.state_db is None
    assert cfg.files.include == ("**/*.jsonl", "**/*.log") and cfg.files.min_age_days == 14
    # Every kind: no default list fits only one application's schema.
    assert cfg.events.kinds is None and cfg.events.batch_rows == 2600
    assert cfg.gzip.engine == "isal" and cfg.io.bytes_per_s == 0 and cfg.hold_days == 7


def test_a_full_config(site: Path) -> None:
    cfg = load_settings(
        write(
            site,
            f"""
live_root = "{site / "live"}"
archive_root = "archive"
state_db = "state.db"
mode = "on"
hold_days = 3
[files]
include = ["**/*.jsonl"]
exclude = ["keep/**"]
min_age_days = 1.5
unit_closed = "sql:SELECT unit FROM units WHERE closed"
[events]
kinds = ["a", "b"]
ts_format = "iso"
batch_rows = 500
[gzip]
engine = "zlib"
level = 9
[io]
bytes_per_s = 1048576
""",
        )
    )
    assert cfg.mode == "on" and cfg.state_db == site / "state.db"
    assert cfg.files.unit_closed == UnitClosedSql("SELECT unit FROM units WHERE closed")
    assert cfg.events.kinds == frozenset({"a", "b"}) and cfg.events.ts_format == "iso"
    assert (cfg.gzip.engine, cfg.gzip.level) == ("zlib", 9)
    assert cfg.io.bytes_per_s == 1 << 20


def test_the_mount_cache_defaults_to_the_users_cache_folder(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(site / "xdg"))
    cfg = load_settings(write(site, ROOTS))
    assert cfg.mount.cache_bytes == 1 << 30
    assert cfg.mount.cache_dir == site / "xdg" / "coldkeep" / "mount"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert load_settings(write(site, ROOTS)).mount.cache_dir == (
        Path.home() / ".cache" / "coldkeep" / "mount"
    )


@pytest.mark.parametrize(
    ("table", "files", "events", "meta"),
    [
        ("", "STANDARD", "STANDARD", "STANDARD"),
        ("storage_class = 'STANDARD_IA'\n", "STANDARD_IA", "STANDARD_IA", "STANDARD_IA"),
        ("storage_class = 'DEEP_ARCHIVE'\n", "DEEP_ARCHIVE", "STANDARD", "STANDARD"),
        (
            "storage_class = 'GLACIER'\nevents_storage_class = 'GLACIER_IR'\n",
            "GLACIER",
            "GLACIER_IR",
            "STANDARD",
        ),
    ],
)
def test_each_kind_of_object_has_its_class_and_what_is_read_at_once_stays_warm(
    site: Path, table: str, files: str, events: str, meta: str
) -> None:
    remote = load_settings(write(site, REMOTE + table)).remote
    assert remote is not None
    got = [
        remote.class_of(p)
        for p in (
            "files/u/a.gz",
            "events/2026-01.ab.db",
            "manifest/g000000000001-ab.db",
            "site/id.x.json",
        )
    ]
    assert got == [files, events, meta, meta]


@pytest.mark.parametrize(
    ("files", "storage_class", "bundle_below"),
    [
        ("", "STANDARD", 1 << 20),
        ("", "GLACIER_IR", 1 << 20),
        ("", "DEEP_ARCHIVE", 64 << 20),  # a unit's month in one object: S3's 40 KB under 1 %
        ("", "GLACIER", 64 << 20),
        ("[files]\nbundle_below = 2097152\n", "DEEP_ARCHIVE", 2 << 20),  # as the site says
    ],
)
def test_a_cold_class_bundles_every_file_a_bundle_can_hold_unless_told_otherwise(
    site: Path, files: str, storage_class: str, bundle_below: int
) -> None:
    text = f"{ROOTS}{files}[remote]\nurl = 's3://bkt/p'\nstorage_class = '{storage_class}'\n"
    assert load_settings(write(site, text)).files.bundle_below == bundle_below


def test_a_site_s_own_prices_replace_the_list_prices_it_names(site: Path) -> None:
    table = (
        "[remote.prices.storage]\nDEEP_ARCHIVE = 0.0018\n"
        "[remote.prices.thaw.DEEP_ARCHIVE]\nbulk = [0.01, 0.5]\n"
    )
    remote = load_settings(write(site, REMOTE + table)).remote
    assert remote is not None
    gb = 1024**3
    assert remote.prices.storage_usd("DEEP_ARCHIVE", 10 * gb) == pytest.approx(0.018)
    assert remote.prices.storage_usd("STANDARD", gb) == pytest.approx(0.023)  # the list's
    assert remote.prices.thaw_usd("DEEP_ARCHIVE", "bulk", gb, 2000) == pytest.approx(1.01)
    assert remote.prices.thaw_usd("DEEP_ARCHIVE", "standard", gb, 0) == pytest.approx(0.02)


def test_a_mount_cache_config(site: Path) -> None:
    text = ROOTS + "[mount]\ncache_bytes = 67108864\ncache_dir = 'cache'\n"
    cfg = load_settings(write(site, text))
    assert (cfg.mount.cache_bytes, cfg.mount.cache_dir) == (64 << 20, site / "cache")


def test_a_remote_tier_config(site: Path) -> None:
    cfg = load_settings(write(site, ROOTS + "[remote]\nurl = 's3://bkt/a/b/'\n"))
    assert cfg.remote is not None
    assert cfg.remote.url == "s3://bkt/a/b" and cfg.remote.keep_local_days == 30
    assert cfg.remote.site and cfg.remote.storage_class == "STANDARD"
    assert cfg.remote.folder is None
    cfg = load_settings(
        write(
            site,
            ROOTS
            + "[remote]\nurl = 'file:remote'\nsite = 'web-1'\nkeep_local_days = -1\n"
            + "endpoint_url = 'http://127.0.0.1:9000'\nbytes_per_s = 1000\n",
        )
    )
    assert cfg.remote is not None and cfg.remote.folder == site / "remote"
    assert cfg.remote.keeps_local and cfg.remote.site == "web-1"
    assert load_settings(write(site, ROOTS)).remote is None


def test_marker_rule(site: Path) -> None:
    cfg = load_settings(
        write(
            site,
            'live_root = "live"\narchive_root = "a"\n[files]\nunit_closed = "marker:.closed"\n',
        )
    )
    assert cfg.files.unit_closed == UnitClosedMarker(".closed")


ROOTS = 'live_root = "live"\narchive_root = "archive"\n'
REMOTE = ROOTS + "[remote]\nurl = 's3://bkt/p'\n"


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        (ROOTS + "moed = 'on'\n", "moed", "did you mean mode?"),
        (ROOTS + "[files]\ninclde = []\n", "files.inclde", "did you mean files.include?"),
        (ROOTS + "mode = 'sometimes'\n", "mode", "is not one of 'off', 'plan', 'on'"),
        (ROOTS + "hold_days = 'seven'\n", "hold_days", "expected a number"),
        (ROOTS + "[events]\nbatch_rows = 0\n", "events.batch_rows", "0 is below 1"),
        (ROOTS + "[events]\nbatch_rows = 1.5\n", "events.batch_rows", "expected an integer"),
        (ROOTS + "[events]\ntable = 'ev; drop'\n", "events.table", "plain SQL identifier"),
        (ROOTS + "[events]\nkinds = []\n", "events.kinds", "leave the key out"),
        (ROOTS + "[gzip]\nengine = 'isal'\nlevel = 6\n", "gzip.level", "use 0–3"),
        (ROOTS + "[files]\ninclude = ['/abs/*.log']\n", "files.include", "relative to live_root"),
        (ROOTS + "[files]\ninclude = ['[a']\n", "files.include", "unclosed ["),
        (ROOTS + "[files]\nunit_closed = 'sql:SELECT 1'\n", "files.unit_closed", "set state_db"),
        (ROOTS + "[files]\nunit_closed = 'closed'\n", "files.unit_closed", "marker:"),
        (ROOTS + "state_db = 'nope.db'\n", "state_db", "does not exist"),
        (ROOTS + "files = 3\n", "files", "a [files] table"),
        ('archive_root = "a"\n', "live_root", "is required"),
        ('live_root = "gone"\narchive_root = "a"\n', "live_root", "does not exist"),
        ('live_root = "live"\narchive_root = "x/y/z"\n', "archive_root", "does not exist"),
        ('live_root = "live"\narchive_root = "live/archive"\n', "archive_root", "inside"),
        ('live_root = "live"\narchive_root = "."\n', "live_root", "inside archive_root"),
        ('live_root = "live"\narchive_root = "live"\n', "archive_root", "inside"),
        (ROOTS + "[remote]\nsite = 'a'\n", "remote.url", "is required in [remote]"),
        (ROOTS + "[remote]\nurl = 'ftp://x/y'\n", "remote.url", "not an s3:// or file://"),
        (ROOTS + "[remote]\nurl = 's3://My_Bucket'\n", "remote.url", "not an S3 bucket name"),
        (ROOTS + "[remote]\nurl = 's3://AKIA:secret@bkt/p'\n", "remote.url", "AWS_ACCESS_KEY_ID"),
        (ROOTS + "[remote]\nurl = 'file://live/r'\n", "remote.url", "names a host"),
        (ROOTS + "[remote]\nurl = 'file:live/remote'\n", "remote.url", "overlap"),
        (ROOTS + "[remote]\nurl = 'file:archive/r'\n", "remote.url", "overlap"),
        (REMOTE + "endpoint_url = 'localhost:9000'\n", "remote.endpoint_url", "http(s) URL"),
        (REMOTE + "endpoint_url = 'http://k:s@h:9000'\n", "remote.endpoint_url", "credential"),
        (REMOTE + "storage_class = 'COLD'\n", "remote.storage_class", "'DEEP_ARCHIVE'"),
        (
            REMOTE + "[remote.prices.storage]\nCOLD = 1\n",
            "remote.prices.storage.COLD",
            "not a storage class",
        ),
        (
            REMOTE + "[remote.prices.storage]\nGLACIER = -1\n",
            "remote.prices.storage.GLACIER",
            "0 or more",
        ),
        (
            REMOTE + "[remote.prices.thaw.GLACIER]\nfast = [1, 2]\n",
            "remote.prices.thaw.GLACIER.fast",
            "bulk, standard, expedited",
        ),
        (
            REMOTE + "[remote.prices.thaw.GLACIER]\nbulk = 1\n",
            "remote.prices.thaw.GLACIER.bulk",
            "per 1,000 requests",
        ),
        (REMOTE + "[remote.prices]\nstorge = 1\n", "remote.prices.storge", "storage"),
        (
            REMOTE + "events_storage_class = 'GLACIER'\n",
            "remote.events_storage_class",
            "read at once by query",
        ),
        (
            ROOTS + "[remote]\nurl = 'file:r'\nstorage_class = 'DEEP_ARCHIVE'\n",
            "remote.storage_class",
            "no cold storage",
        ),
        (REMOTE + "sse = 'aws:kms:dsse'\n", "remote.sse", 'use "AES256" or "aws:kms"'),
        (REMOTE + "kms_key_id = 'k1'\n", "remote.kms_key_id", 'needs sse = "aws:kms"'),
        (REMOTE + "sse = 'AES256'\nkms_key_id = 'k1'\n", "remote.kms_key_id", "remove kms_key_id"),
        (ROOTS + "[remote]\nurl = 'file:r'\nsse = 'AES256'\n", "remote.sse", "file:// remote"),
        (REMOTE + "encrypt_to = 'age1x'\n", "remote.encrypt_to", "expected a list of age1"),
        (REMOTE + "encrypt_to = []\n", "remote.encrypt_to[0]", "the list is empty"),
        (
            REMOTE + "encrypt_to = ['AGE-SECRET-KEY-1QQQ']\n",
            "remote.encrypt_to[0]",
            "is a secret key",
        ),
        (REMOTE + "encrypt_to = ['ssh-ed25519 AAAA']\n", "remote.encrypt_to[0]", "SSH key"),
        (REMOTE + "object_lock = 'on'\n", "remote.object_lock", "is not one of 'off', 'gov"),
        (
            ROOTS + "[remote]\nurl = 'file:r'\nobject_lock = 'compliance'\n",
            "remote.object_lock",
            "a file:// remote has no Object Lock",
        ),
        (
            REMOTE + "object_lock = 'compliance'\n",
            "remote.object_lock",
            "[retention] files_days is not set",
        ),
        (
            REMOTE + "object_lock = 'governance'\n[retention]\nfiles_days = 30\n",
            "remote.object_lock",
            "set [retention] events_days, or object_lock",
        ),
        (REMOTE + "keep_local_days = -0.5\n", "remote.keep_local_days", "use -1"),
        (REMOTE + "keep_local_days = -2\n", "remote.keep_local_days", "below -1"),
        (REMOTE + "site = 'a/b'\n", "remote.site", "plain folder name"),
        (REMOTE + "bytes_per_sec = 1\n", "remote.bytes_per_sec", "did you mean remote.bytes_per_s"),
        (ROOTS + "[retention]\nfiles_days = 0\n", "retention.files_days", "use 1 to 36500"),
        (ROOTS + "hold_days = nan\n", "hold_days", "nan is not a number (use 0 to 36500)"),
        (ROOTS + "hold_days = 1e15\n", "hold_days", "is above 36500"),
        (ROOTS + "[files]\nmin_age_days = inf\n", "files.min_age_days", "inf is above 36500"),
        (
            ROOTS + "[events]\nbusy_timeout_ms = 9223372036854775807\n",
            "events.busy_timeout_ms",
            "use 0 to 86400000",
        ),
        (ROOTS + "[retention]\nevent_days = 9\n", "retention.event_days", "retention.events_days"),
        (ROOTS + "[retention.units]\nlogs = '7d'\n", "retention.units.logs", "a number"),
        (ROOTS + "[mount]\ncache_bytes = 1024\n", "mount.cache_bytes", "1024 is below 8388608"),
        (ROOTS + "[mount]\ncache_bytes = '1G'\n", "mount.cache_bytes", "expected an integer"),
        (ROOTS + "[mount]\ncache_dir = 'live/cache'\n", "mount.cache_dir", "overlap"),
        (ROOTS + "[mount]\ncache_dir = 'archive'\n", "mount.cache_dir", "overlap"),
        (ROOTS + "[mount]\ncache_dir = '.'\n", "mount.cache_dir", "overlap"),
        (ROOTS + "[mount]\ncache_dir = 'x/y'\n", "mount.cache_dir", "does not exist"),
        (ROOTS + "[mount]\ncache_size = 1\n", "mount.cache_size", "did you mean mount.cache_"),
    ],
)
def test_bad_configs_are_refused_in_one_line(site: Path, text: str, key: str, says: str) -> None:
    path = write(site, text)
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {key}: "), message
    assert says in message


def test_not_toml_and_missing_file(site: Path) -> None:
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_settings(write(site, "live_root = \n"))
    with pytest.raises(ConfigError, match=r"no such file.*COLDKEEP_CONFIG"):
        load_settings(site / "absent.toml")


def test_the_readme_example_is_a_valid_config(site: Path) -> None:
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    example = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    cfg = load_settings(write(site, example))
    assert cfg.mode == "plan" and cfg.jobs.jobs["pass"].cron == "17 3 * * *"
    assert cfg.alerts.sinks == ["command", "webhook"]
    assert cfg.retention.files_days_for("debug-logs") == 30
    assert cfg.retention.files_days_for("web") == 365 and "expire" in cfg.jobs.jobs
    assert cfg.events.kinds == frozenset({"webhook_event", "ci_completed"}), "it shows kinds"


ALERTING = 'live_root = "live"\narchive_root = "archive"\n'


@pytest.mark.parametrize(
    "alerts",
    [
        '[alerts]\ncommand = ["/usr/local/bin/page-oncall"]\n',
        '[alerts]\nwebhook = "https://ops:hunter2@hooks.example.com/coldkeep"\n',
        '[alerts]\nwebhook = "https://hooks.example.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX"\n',
    ],
)
def test_a_config_others_can_change_is_refused_when_it_runs_a_command_or_holds_a_secret(
    site: Path, alerts: str
) -> None:
    path = write(site, ALERTING + alerts)
    path.chmod(0o620)  # the group may write it: a group member could page as root
    with pytest.raises(ConfigError, match=r"can be changed by its group.*chmod go-w"):
        load_settings(path)
    path.chmod(0o602)
    with pytest.raises(ConfigError, match="can be changed by everyone"):
        load_settings(path)
    path.chmod(0o600)
    site.chmod(0o777)  # a folder anyone can write: they could swap the file
    try:
        with pytest.raises(ConfigError, match=f"{site} can be changed by everyone"):
            load_settings(path)
        site.chmod(0o1777)  # sticky, like /tmp: nobody can replace our file
        assert load_settings(path).warnings == ()
    finally:
        site.chmod(0o755)


def test_a_world_readable_credential_is_warned_about_and_plain_configs_are_left_alone(
    site: Path,
) -> None:
    path = write(site, ALERTING + '[alerts]\nwebhook = "https://hooks.example.com/x?token=abc"\n')
    path.chmod(0o644)
    [warning] = load_settings(path).warnings
    assert "readable by everyone" in warning and f"chmod o-r {path}" in warning
    path.chmod(0o640)
    assert load_settings(path).warnings == ()
    plain = write(site, ALERTING + '[alerts]\nwebhook = "https://hooks.example.com/coldkeep"\n')
    plain.chmod(0o666)  # nothing to run and nothing secret: not coldkeep's business
    assert load_settings(plain).warnings == ()


def test_the_verify_job_reads_the_remote_copies_unless_told_not_to(site: Path) -> None:
    assert load_settings(write(site, ROOTS)).jobs.jobs["verify"].remote
    cfg = load_settings(write(site, ROOTS + "[jobs.verify]\nremote = false\nremote_sample = 0.5\n"))
    verify = cfg.jobs.jobs["verify"]
    assert (verify.remote, verify.remote_sample) == (False, 0.5)
    path = write(site, ROOTS + "[jobs.verify]\nremote_sample = 0\n")
    with pytest.raises(ConfigError, match=r"jobs\.verify\.remote_sample: .*below 1e-06"):
        load_settings(path)
    path = write(site, ROOTS + "[jobs.ship]\nremote = true\n")
    with pytest.raises(ConfigError, match=r"jobs\.ship\.remote"):
        load_settings(path)


def test_a_cron_schedule_is_refused_by_its_key_unless_it_ever_fires(site: Path) -> None:
    """A config's own schedule is checked as it is read: one croniter cannot
    read, and one it reads that never comes ("0 0 31 2 *": February 31st).
    The defaults are not read from the config; each of them fires."""
    for cron, said in (("17 3 * *", "is not a cron expression"), ("0 0 31 2 *", "never fires")):
        path = write(site, ROOTS + f'[jobs.ship]\ncron = "{cron}"\n')
        with pytest.raises(ConfigError, match=rf"jobs\.ship\.cron: .*{said}"):
            load_settings(path)
    start = datetime(2026, 12, 7, tzinfo=UTC)
    for job in DEFAULT_JOBS.values():
        assert job.interval_s or schedule(job.cron or "", start).get_next(float) > start.timestamp()


# Every number the config holds, as TOML can write it: a key and the table it is in.
NUMBERS = {
    "hold_days": "",
    "files.min_age_days": "",
    "events.min_age_days": "",
    "events.checkpoint_timeout_s": "",
    "retention.files_days": "",
    "retention.events_days": "",
    "retention.units.logs": "",
    "jobs.retention_days": "",
    "jobs.stats.interval": "",
    "jobs.verify.max_duration": "",
    "jobs.verify.remote_sample": "",
    "jobs.pass.timeout": "",
    "alerts.timeout": "",
    "remote.keep_local_days": "url = 'file:remote'\n",
}
INTEGERS = {
    "files.bundle_below": "",
    "files.bundle_bytes": "",
    "events.batch_rows": "",
    "events.busy_timeout_ms": "",
    "events.checkpoint_every": "",
    "events.checkpoint_wal_bytes": "",
    "events.wal_restart_bytes": "",
    "io.bytes_per_s": "",
    "io.workers": "",
    "jobs.retention_rows": "",
    "remote.bytes_per_s": "url = 'file:remote'\n",
    "mount.cache_bytes": "",
}


def _with(key: str, value: str, extra: str) -> str:
    table, _, name = key.rpartition(".")
    head = f"[{table}]\n{extra}" if table else ""
    return f'live_root = "live"\narchive_root = "archive"\n{head}{name} = {value}\n'


def _toml(value: float) -> str:
    return "nan" if math.isnan(value) else repr(value)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(sorted(NUMBERS)), value=st.floats() | st.floats(1e5, 1e308))
@example(key="hold_days", value=1e15)
@example(key="remote.keep_local_days", value=math.nan)
def test_every_number_is_finite_and_bounded_or_refused_in_one_line(
    site: Path, key: str, value: float
) -> None:
    path = write(site, _with(key, _toml(value), NUMBERS[key]))
    try:
        cfg = load_settings(path)
    except ConfigError as err:
        said = str(err)
        assert "\n" not in said and said.startswith(f"{path}: {key}: "), said
        if not math.isfinite(value) or abs(value) > 36_500:
            # the range: days, seconds, or a share
            assert any(f" to {top})" in said for top in ("36500", "31536000", "1")), said
        return
    assert math.isfinite(value)
    days = abs(value) if key.endswith(("_days", ".logs")) else abs(value) / 86_400
    assert days <= 36_500, f"{key} = {value} accepted"
    # What it is turned into later: milliseconds in SQLite, a date.
    assert days * 86_400_000 < 2**62
    assert (datetime.now(UTC) + timedelta(days=days)).year <= 9999
    assert cfg is not None


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.sampled_from(sorted(INTEGERS)),
    value=st.integers(-(2**63), 2**63 - 1) | st.integers(2**53, 2**63 - 1),
)
@example(key="events.batch_rows", value=2**60)
def test_every_integer_is_bounded_or_refused_in_one_line(site: Path, key: str, value: int) -> None:
    path = write(site, _with(key, str(value), INTEGERS[key]))
    try:
        load_settings(path)
    except ConfigError as err:
        said = str(err)
        assert "\n" not in said and said.startswith(f"{path}: {key}: "), said
        return
    assert 0 <= value <= 2**53, f"{key} = {value} accepted"


# roots that overlap through links and mounts ------------------------------------


def test_a_file_remote_reached_through_a_symlink_into_live_root_is_refused(site: Path) -> None:
    (site / "into-live").symlink_to(site / "live")
    path = write(site, ROOTS + "[remote]\nurl = 'file:into-live/remote'\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    message = str(err.value)
    assert message.startswith(f"{path}: remote.url: ") and "\n" not in message
    assert f"{site / 'into-live' / 'remote'}" in message and f"{site / 'live'}" in message


def test_roots_reached_through_symlinks_are_refused_both_ways(site: Path) -> None:
    (site / "archive").mkdir()
    (site / "to-live").symlink_to(site / "live")
    (site / "to-archive").symlink_to(site / "archive")
    with pytest.raises(ConfigError, match=r"archive_root: .* is inside live_root"):
        load_settings(write(site, 'live_root = "live"\narchive_root = "to-live/a"\n'))
    (site / "archive" / "live").mkdir()
    with pytest.raises(ConfigError, match=r"live_root: .* is inside archive_root"):
        load_settings(write(site, 'live_root = "to-archive/live"\narchive_root = "archive"\n'))
    with pytest.raises(ConfigError, match=r"remote\.url: .* overlap"):
        load_settings(write(site, ROOTS + "[remote]\nurl = 'file:to-archive/r'\n"))


def test_a_state_db_inside_archive_root_is_refused(site: Path) -> None:
    (site / "archive").mkdir()
    (site / "archive" / "app.db").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"state_db: .* is inside archive_root"):
        load_settings(write(site, ROOTS + 'state_db = "archive/app.db"\n'))


def _can_bind_mount() -> str | None:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare or mount is not installed"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return None if probe.returncode == 0 else "no private mount namespace here (needs root)"


def _load_in_namespace(site: Path, mounts: str, path: Path) -> subprocess.CompletedProcess[str]:
    """``load_settings(path)`` in a child with its own mount namespace, after
    ``mounts`` (shell commands); the mounts end with the child."""
    code = (
        "import sys\nfrom pathlib import Path\n"
        "from coldkeep.core.base.config import load_settings\n"
        "from coldkeep.core.base.configtable import ConfigError\n"
        "try:\n    load_settings(Path(sys.argv[1]))\n"
        "except ConfigError as err:\n    print(err)\n    sys.exit(2)\n"
    )
    argv = shlex.join([sys.executable, "-c", code, str(path)])
    return subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", f"{mounts} && exec {argv}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_an_archive_root_on_a_bind_mount_of_live_root_is_refused(site: Path) -> None:
    """The same directory under two paths: only (st_dev, st_ino) tell."""
    why = _can_bind_mount()
    if why:
        pytest.skip(why)
    (site / "alias").mkdir()
    (site / "remote-disk").mkdir()
    mounts = f"mount --bind {site / 'live'} {site / 'alias'}"
    path = write(site, 'live_root = "live"\narchive_root = "alias/archive"\n')
    run = _load_in_namespace(site, mounts, path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"{path}: archive_root: " in run.stdout and "is inside live_root" in run.stdout
    path = write(site, ROOTS + "[remote]\nurl = 'file:alias/remote'\n")
    run = _load_in_namespace(site, mounts, path)
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"{path}: remote.url: " in run.stdout and "overlap" in run.stdout
    # The same config without the mount: alias is a plain folder beside live.
    run = _load_in_namespace(site, "true", path)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("shape", ["in the list", "as the value"])
def test_a_secret_key_in_encrypt_to_is_refused_and_never_echoed(site: Path, shape: str) -> None:
    key = x25519.Identity.generate()
    secret = str(key)
    value = f"['{key.to_public()}', '{secret}']" if shape == "in the list" else f"'{secret}'"
    with pytest.raises(ConfigError) as err:
        load_settings(write(site, REMOTE + f"encrypt_to = {value}\n"))
    assert "remote.encrypt_to" in str(err.value) and secret not in str(err.value)
    assert secret[20:40] not in str(err.value)


def test_encrypt_to_is_a_set_whatever_its_order(site: Path) -> None:
    a, b = (str(x25519.Identity.generate().to_public()) for _ in range(2))
    one = load_settings(write(site, REMOTE + f"encrypt_to = ['{a}', '{b}']\n")).remote
    two = load_settings(write(site, REMOTE + f"encrypt_to = ['{b}', '{a}']\n")).remote
    assert one is not None and two is not None and one.encrypt_to and two.encrypt_to
    assert one.encrypt_to.fingerprint == two.encrypt_to.fingerprint


def test_the_lake_needs_a_remote_and_says_plaintext_beside_sealed_objects(site: Path) -> None:
    base = 'live_root = "live"\narchive_root = "archive"\n'
    with pytest.raises(ConfigError) as err:
        load_settings(write(site, base + "[lake]\nenabled = true\n"))
    assert "lake.enabled" in str(err.value) and "no [remote]" in str(err.value)
    recipient = x25519.Identity.generate().to_public()
    sealed = REMOTE + f"encrypt_to = ['{recipient}']\n"
    with pytest.raises(ConfigError) as err:
        load_settings(write(site, sealed + "[lake]\nenabled = true\n"))
    assert "lake.enabled" in str(err.value) and "plaintext = true" in str(err.value)
    said = load_settings(write(site, sealed + "[lake]\nenabled = true\nplaintext = true\n"))
    assert said.lake.enabled and said.lake.plaintext
    assert not load_settings(write(site, REMOTE)).lake.enabled


def test_no_site_may_be_named_for_the_lakes_folder(site: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(site, REMOTE + 'site = "lake"\n'))
    assert "remote.site" in str(err.value) and "lake" in str(err.value)
