"""Pytest fixtures for faultfs mounts, skipping (with the reason) where this
machine cannot mount FUSE.

Owns the pytest face of ``faultfs.mount``: ``faultfs`` (a plain mount) and
``volatile_faultfs`` (with the power-cut journal), each over ``tmp_path/backing``
mounted at ``tmp_path/mnt``, unmounted at teardown whatever the test did.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .mount import FaultFS, MountUnavailable


def start_or_skip(fs: FaultFS) -> FaultFS:
    """Start ``fs``; ``pytest.skip`` with the reason if the machine cannot mount."""
    try:
        fs.start()
    except MountUnavailable as exc:
        pytest.skip(f"faultfs cannot mount here: {exc}")
    return fs


@pytest.fixture
def faultfs(tmp_path: Path) -> Iterator[FaultFS]:
    fs = start_or_skip(FaultFS(tmp_path / "backing", tmp_path / "mnt"))
    try:
        yield fs
    finally:
        fs.stop()


@pytest.fixture
def volatile_faultfs(tmp_path: Path) -> Iterator[FaultFS]:
    fs = start_or_skip(FaultFS(tmp_path / "backing", tmp_path / "mnt", volatile=True))
    try:
        yield fs
    finally:
        fs.stop()
