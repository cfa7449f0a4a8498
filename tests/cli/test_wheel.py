"""The wheel as a user gets it: built from the sdist of this tree (as
``python -m build`` does, so the sdist is proven to hold everything a build
needs), installed into a new venv (not editable, its dependencies from the
index), and run from outside the checkout, so nothing can be imported from the
source folders by accident.

The editable install every other test uses maps ``coldkeep.core`` -> ``core/``
through an import hook; a package left out of the wheel's package list (a new
subpackage, a ``.tcss`` file) still imports there and only a real wheel shows it.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import report_line

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"core": "coldkeep.core", "tui": "coldkeep.tui"}

# Left out of the copy the wheel is built from: what a build or a run leaves in
# the checkout (never read by the build), at the top level only.
NOT_COPIED = {
    ".git", ".venv", ".typecheck", "build", "dist", "demo", ".mypy_cache", ".ruff_cache",
    ".pytest_cache", ".hypothesis", ".import_linter_cache",
}  # fmt: skip

INSPECT = """
import coldkeep, coldkeep.core, coldkeep.tui, importlib, json, pkgutil, sys
names = sorted(
    m.name
    for root in (coldkeep.core, coldkeep.tui)
    for m in pkgutil.walk_packages(root.__path__, root.__name__ + ".")
)
for name in names:
    importlib.import_module(name)
print(json.dumps({
    "namespace": list(coldkeep.__path__),
    "core": coldkeep.core.__file__,
    "tui": coldkeep.tui.__file__,
    "modules": names,
    "sys_path": sys.path,
}))
"""


@dataclass
class Installed:
    venv: Path
    src: Path  # the copy of the checkout the sdist was built from
    sdist: Path
    wheel: Path  # built from the sdist
    work: Path  # an empty directory outside the checkout: the cwd of every run

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self) -> dict[str, str]:
        """This environment without anything that could reach the checkout."""
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
        }
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONNOUSERSITE"] = "1"
        return env

    def run(self, *args: str, check: int = 0) -> subprocess.CompletedProcess[str]:
        run = subprocess.run(
            [str(a) for a in args],
            cwd=self.work,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert run.returncode == check, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
        return run


def _timed(what: str, args: list[str], cwd: Path) -> float:
    start = time.monotonic()
    run = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    assert run.returncode == 0, f"{what} failed:\n{run.stdout}\n{run.stderr}"
    return time.monotonic() - start


def _ignore_top_level(directory: str, names: list[str]) -> set[str]:
    ignored = {n for n in names if n == "__pycache__"}
    if Path(directory) == ROOT:
        ignored |= {n for n in names if n in NOT_COPIED or n.endswith(".egg-info")}
    return ignored


@pytest.fixture(scope="module")
def installed(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    # Built from a copy: an in-place build writes build/ and *.egg-info into the
    # checkout (shared with whoever else is working in it), and a stale build/lib
    # would carry modules deleted since into the wheel.
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=_ignore_top_level, symlinks=True)
    dist, venv, work = base / "dist", base / "venv", base / "work"
    work.mkdir()
    # The sdist, then the wheel from the unpacked sdist (not from the tree): a file
    # the sdist leaves out is missing from this wheel, and the test below says so.
    # uv (in the dev extra, as build is) fills build's isolated environments and
    # the new venv from the index as pip would, four times faster; the bytecode
    # is compiled as pip compiles it.
    build_s = _timed(
        "python -m build (`build` is in the dev extra)",
        [sys.executable, "-m", "build", "--installer", "uv", "--outdir", str(dist), str(src)],
        base,
    )
    (sdist,) = dist.glob("coldkeep-*.tar.gz")
    (wheel,) = dist.glob("coldkeep-*.whl")
    install_s = _timed("venv", [sys.executable, "-m", "venv", "--without-pip", str(venv)], base)
    install_s += _timed(
        "uv pip install",
        [sys.executable, "-m", "uv", "pip", "install", "-q", "--compile-bytecode",
         "--python", str(venv / "bin" / "python"), str(wheel)],
        base,
    )  # fmt: skip
    report_line(
        request.config,
        f"wheel: sdist and a wheel from it built in {build_s:.1f} s, installed with its "
        f"dependencies into a new venv in {install_s:.1f} s",
    )
    return Installed(venv, src, sdist, wheel, work)


def _source_modules(src: Path) -> set[str]:
    """Every module and package under core/ and tui/, by its import name."""
    names = set()
    for folder, package in SOURCES.items():
        for path in (src / folder).rglob("*.py"):
            parts = path.relative_to(src / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts:
                names.add(".".join((package, *parts)))
    return names


def _package_files(src: Path) -> set[str]:
    """Every file of the packages, as a path under ``coldkeep/``: each module and
    each data file (``py.typed``, ``*.tcss``, any file a new package brings) under
    core/ and tui/, so what the wheel must hold follows the tree with no list to
    keep. Not what a checkout gathers beside them: ``__pycache__``, hidden files
    (an editor's swap files), backups ending in ``~``."""
    files = set()
    for folder in SOURCES:
        for path in (src / folder).rglob("*"):
            relative = path.relative_to(src)
            if path.is_file() and not any(
                part == "__pycache__" or part.startswith(".") or part.endswith("~")
                for part in relative.parts
            ):
                files.add(f"coldkeep/{relative.as_posix()}")
    return files


def test_the_sdist_holds_what_a_build_needs_and_builds_the_same_files(
    installed: Installed,
) -> None:
    expected = _package_files(installed.src)
    assert {"coldkeep/tui/console/app.tcss", "coldkeep/core/py.typed"} <= expected
    with tarfile.open(installed.sdist) as sdist:
        top = installed.sdist.name.removesuffix(".tar.gz")
        names = {m.name.removeprefix(f"{top}/") for m in sdist.getmembers() if m.isfile()}
    needed = {"pyproject.toml", "setup.py", "README.md", "PKG-INFO"}
    needed |= {name.removeprefix("coldkeep/") for name in expected}
    assert not needed - names, f"missing from the sdist: {sorted(needed - names)}"

    # The wheel was built from the sdist: it holds the packages' files exactly.
    with zipfile.ZipFile(installed.wheel) as wheel:
        in_wheel = set(wheel.namelist())
        entry_points = next(n for n in in_wheel if n.endswith(".dist-info/entry_points.txt"))
        assert "coldkeep = coldkeep.tui.cli.main:main" in wheel.read(entry_points).decode()
    packaged = {name for name in in_wheel if ".dist-info/" not in name}
    assert packaged == expected, (
        f"not in the wheel: {sorted(expected - packaged)} (a data file needs its pattern "
        f"in [tool.setuptools.package-data]); not in the tree: {sorted(packaged - expected)}"
    )


def test_the_wheel_holds_every_module_and_data_file_and_imports_from_the_venv(
    installed: Installed,
) -> None:
    info = json.loads(installed.run(str(installed.bin / "python"), "-c", INSPECT).stdout)
    site = installed.venv.resolve()
    for path in [*info["namespace"], info["core"], info["tui"]]:
        assert Path(path).resolve().is_relative_to(site), f"{path} is outside the new venv"
    assert not any(Path(p).resolve().is_relative_to(ROOT) for p in info["sys_path"] if p), info[
        "sys_path"
    ]
    assert set(info["modules"]) == _source_modules(installed.src)
    assert {"coldkeep.tui.console.panes.log", "coldkeep.core.files.gzfile"} <= set(info["modules"])

    # Every module and data file of the tree, installed (nothing else but the
    # bytecode compiled at install).
    namespace = Path(info["core"]).parent.parent
    assert Path(info["tui"]).parent.parent == namespace
    on_disk = {
        f"coldkeep/{path.relative_to(namespace).as_posix()}"
        for folder in SOURCES
        for path in (namespace / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    expected = _package_files(installed.src)
    assert on_disk == expected, (
        f"not installed: {sorted(expected - on_disk)}; not in the tree: "
        f"{sorted(on_disk - expected)}"
    )
    assert (namespace / "tui" / "console" / "app.tcss").is_file()


def test_the_installed_cli_writes_a_demo_and_reports_its_status(installed: Installed) -> None:
    site = installed.work / "demo"
    installed.run("coldkeep", "demo", str(site), "--no-console", "--scale", "0.05")
    status = installed.run("coldkeep", "status", "--json", "--config", str(site / "coldkeep.toml"))
    doc = json.loads(status.stdout)
    assert doc["command"] == "status" and doc["ok"] is True, doc


EXIT_MARK = "console exited: "


@dataclass
class Console:
    """One command in its own tmux server (a private socket in the test's own
    directory: no one else's sessions, no environment left by an older server,
    nothing left behind); a shell around the command prints its exit status, and
    keeps the pane (and any traceback) readable after it ends."""

    socket: Path
    env: dict[str, str]

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
        )

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "console").stdout

    def wait_for(self, *texts: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(text in screen for text in texts):
                return screen
            if EXIT_MARK in screen:
                break  # it ended before showing them
            time.sleep(0.1)
        missing = [t for t in texts if t not in self.screen()]
        raise AssertionError(f"never showed {missing!r}; the screen:\n{self.screen()}")

    def wait_exit(self, timeout: float = 30) -> str:
        """The command's exit status, as the shell around it prints it. (tmux's own
        pane_dead_status is not always filled in when the pane dies: under load it
        stayed empty once the process was gone.)"""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.screen().splitlines():
                if line.startswith(EXIT_MARK):
                    return line.removeprefix(EXIT_MARK).strip()
            time.sleep(0.1)
        raise AssertionError(f"the console is still running; the screen:\n{self.screen()}")


@pytest.fixture
def console(installed: Installed) -> Iterator[Console]:
    # Its own short folder: a socket's path holds 107 bytes, and a test's own
    # directory (under xdist's per-worker one) is longer.
    folder = Path(tempfile.mkdtemp(prefix="ck-tmux-", dir="/tmp"))
    console = Console(folder / "s", installed.env())
    try:
        yield console
    finally:
        console.tmux("kill-server", check=False)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (`make test` installs it as root)"
)
def test_the_installed_console_draws_its_first_screen_and_quits_on_q(
    installed: Installed, console: Console
) -> None:
    site = installed.work / "console"
    installed.run("coldkeep", "demo", str(site), "--no-console", "--scale", "0.05")
    command = shlex.join([str(installed.bin / "coldkeep"), "--config", str(site / "coldkeep.toml")])
    console.tmux(
        "new-session", "-d", "-s", "console", "-x", "120", "-y", "36", "-c", str(installed.work),
        f'{command}; echo "{EXIT_MARK}$?"; sleep 60',
    )  # fmt: skip
    panes = ("Backlog", "In flight", "Orphans & stale", "Checkpoint", "Jobs", "Log")
    # The header, the action bar, every pane (120 columns: side by side), the
    # footer's key hints, and "ready" in the log: the first full paint had its data.
    console.wait_for("lock free", "mode on", "Verify", "q Quit", "files ", "ready", *panes)
    console.tmux("send-keys", "-t", "console", "q")
    assert console.wait_exit() == "0", f"q did not end the console cleanly:\n{console.screen()}"
