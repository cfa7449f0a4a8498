"""Demo sites for the fault tests, on filesystems that misbehave on request.

Owns what the full-disk and I/O-error tests share: a demo site written by the
real CLI (``write_site``), a template of one copied per test (``copy_site``), and
a part of a site (or all of it) moved onto another filesystem at the same path,
so that its ``coldkeep.toml`` needs no change: a small tmpfs that fills up
(``on_small_fs``), or a faultfs mount whose operations fail when told
(``on_faultfs``). ``unmount_site`` undoes the tmpfs mounts; a faultfs is stopped
by its own ``stop()``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from faultfs import FaultFS
from faultfs.fixture import start_or_skip

from helpers import cli_ok, per_file

SCALE = "0.05"


def write_site(site: Path, *, scale: str = SCALE, seed: int = 5, bundles: bool = False) -> Path:
    """``coldkeep demo``: a live tree, a state DB, an archive with planted leftovers.
    Without ``bundles``, every file takes the per-file protocol, whose steps these
    tests count file by file."""
    cli_ok("demo", str(site), "--scale", scale, "--seed", str(seed), "--no-console")
    if not bundles:
        per_file(site / "coldkeep.toml")
    return site


def copy_site(template: Path, site: Path) -> Path:
    """A copy of a template site (faster than writing a demo for every test)."""
    shutil.copytree(template, site, symlinks=True)
    return site


def unmount_site(site: Path) -> None:
    """Unmount the tmpfs mounts ``on_small_fs`` made inside ``site``."""
    for sub in ("archive", "live"):
        if os.path.ismount(site / sub):
            subprocess.run(["umount", "-l", str(site / sub)], check=True)


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")


def on_small_fs(site: Path, sub: str, size: str = "32m") -> Path:
    """``site/sub`` moved onto a tmpfs of ``size``, mounted at the same path."""
    where = site / sub
    keep = site / f"{sub}.orig"
    where.rename(keep)
    mount_tmpfs(where, size)
    shutil.copytree(keep, where, dirs_exist_ok=True, symlinks=True)
    shutil.rmtree(keep)
    return where


def on_faultfs(site: Path, sub: str, tmp_path: Path) -> FaultFS:
    """``site/sub`` (``"."``: the whole site) served through faultfs, its files in
    ``tmp_path/backing``. Rules and counts name paths relative to ``site/sub``."""
    backing = tmp_path / "backing"
    (site / sub).rename(backing)
    return start_or_skip(FaultFS(backing, site / sub))
