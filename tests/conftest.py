"""Shared fixtures: real temporary trees, never a mocked filesystem."""

from __future__ import annotations

import fcntl
import gc
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from coldkeep.core.base.codec import Codec

from helpers import Roots

# pytest's rewritten test modules are cached even where PYTHONDONTWRITEBYTECODE
# is set (this project's machines set it): rewriting them all took each worker
# 6 of its 9 s of collection, on every run. A stale one is never used (pytest
# checks it against the source).
sys.dont_write_bytecode = False

# The S3 test server and its fault proxy (s3kit): fixtures s3, s3_server, s3_proxy.
pytest_plugins = ["s3kit"]

# xdist's workers set these (80x24): a console a test starts in a terminal of its
# own (tmux) would take them over the terminal's real size.
for _size in ("COLUMNS", "LINES"):
    os.environ.pop(_size, None)


# The tests' temporary trees on a tmpfs of their own, where this user may mount
# one (root; COLDKEEP_TEST_TMPFS=0 keeps them on disk): every step of coldkeep's
# protocol fsyncs, and on the disk those fsyncs were a sixth of the time of the
# tests that archive and restore (42 s to 35 s on two cores). No test relies on
# the disk's durability: a power cut is faultfs's model, a crash is a SIGKILL.
# A test's tree goes once it has passed (``tmp_path_retention_policy``): a full
# run on three workers held 600 MB of it at most, in memory.
TMPFS = Path(tempfile.gettempdir()) / f"coldkeep-tests-{os.getuid()}"


def _on_tmpfs() -> Path | None:
    """A new directory for this run on the tests' tmpfs (mounted if it is not;
    the trees of earlier runs whose pytest has ended are removed), or None."""
    if os.environ.get("COLDKEEP_TEST_TMPFS") == "0" or os.geteuid() != 0:
        return None
    TMPFS.mkdir(mode=0o700, exist_ok=True)
    # Two runs starting at once must not both mount it (the second would hide
    # the first's trees).
    with open(f"{TMPFS}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.ismount(TMPFS):
            mount = ["mount", "-t", "tmpfs", "-o", "mode=0700", "coldkeep-tests", str(TMPFS)]
            if subprocess.run(mount, capture_output=True, check=False).returncode != 0:
                return None
    for old in TMPFS.glob("run-*"):
        pid = old.name.removeprefix("run-")
        if not (pid.isdigit() and Path(f"/proc/{pid}").exists()):
            shutil.rmtree(old, ignore_errors=True)
    return TMPFS / f"run-{os.getpid()}"


@pytest.hookimpl(tryfirst=True)  # before pytest makes its temporary directory
def pytest_configure(config: pytest.Config) -> None:
    # xdist's workers are given their part of the controller's directory.
    if hasattr(config, "workerinput") or config.option.basetemp is not None:
        return
    run = _on_tmpfs()
    if run is not None:
        config.option.basetemp = str(run)


@pytest.fixture
def disk_path() -> Iterator[Path]:
    """A temporary directory on the machine's own disk, not on the tests' tmpfs:
    for what coldkeep tells apart by filesystem (doctor warns of an archive on
    a tmpfs)."""
    path = Path(tempfile.mkdtemp(prefix="coldkeep-disk-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def roots(tmp_path: Path) -> Roots:
    live = tmp_path / "live"
    archive = tmp_path / "archive"
    live.mkdir()
    archive.mkdir()
    return Roots(tmp_path, live, archive)


@pytest.fixture(params=["isal", "zlib-ng", "zlib"])
def codec(request: pytest.FixtureRequest) -> Codec:
    engine = request.param
    return Codec(engine, 1 if engine == "isal" else 6)


# The files that mount filesystems (faultfs and coldkeep mount over FUSE, tmpfs,
# the benchmark's read path). They share one xdist worker: a power cut's remount
# must come back under a new device number, and another worker mounting and
# unmounting at the same moment takes and frees the numbers that relies on.
# Every other file is a group of its own, so `--dist loadgroup` hands out files
# whole, as `--dist loadfile` would (but the benchmark's parts, a minute each).
MOUNTING = (
    "faults/",
    "faultfs/",
    "core/ops/test_mount.py",
    "core/ops/test_mount_remote.py",
    "core/ops/test_libfuse.py",
    "cli/test_cli_mount.py",
    "cli/test_cli_mount_user.py",
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    tests = config.rootpath / "tests"
    for item in items:
        rel = item.path.relative_to(tests).as_posix()
        group = "mounting" if rel.startswith(MOUNTING) else rel
        if rel == "test_bench.py":  # a part a group; the read path's mounts the archive
            group = "mounting" if "readpath" in item.name else item.name
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # What collecting imported (every test module, coldkeep, Textual, moto, the
    # items) lives as long as the worker: frozen, the collector's full passes
    # never walk it again. Each of them walked it all, for every test that
    # allocates much (a console test does): a sixth of the console tests' CPU.
    gc.collect()
    gc.freeze()
    # And a young collection every 10,000 allocations rather than every 700: a
    # console test makes and drops objects by the million, and the collector
    # still took 17 % of the console tests' CPU after the freeze (10 s of 58 a
    # worker); at 10,000 it takes 3.5 s. Garbage in a cycle lives a few
    # thousand allocations longer, no more.
    gc.set_threshold(10_000, 10, 10)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # Under xdist a worker's lines go back to the controller with its output.
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["coldkeep_summary"] = getattr(session.config, "coldkeep_summary", [])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    lines = node.workeroutput.get("coldkeep_summary", [])
    node.config.coldkeep_summary = [*getattr(node.config, "coldkeep_summary", []), *lines]


# No test may take more than a minute (its set-up, run and tear-down together):
# the suite has six minutes on two cores, and one long test holds a worker for
# all of them. Split it, build its fixture once, or wait on an event instead of a
# poll. The flake hunt, which keeps every core busy, doubles it.
LIMIT_S = float(os.environ.get("COLDKEEP_TEST_LIMIT_S", "60"))
_SPENT = pytest.StashKey[float]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    spent = item.stash.get(_SPENT, 0.0) + report.duration
    item.stash[_SPENT] = spent
    if report.when == "teardown" and LIMIT_S and spent > LIMIT_S and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} took {spent:.0f} s, over the {LIMIT_S:g} s a test may take "
            "(COLDKEEP_TEST_LIMIT_S): split it, share its fixture, or wait on an event"
        )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    for line in getattr(config, "coldkeep_summary", []):
        terminalreporter.write_line(line)


# Generated inputs: bounded in the suite, long with HYPOTHESIS_PROFILE=long (make fuzz).
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True)
settings.register_profile("long", max_examples=20_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
