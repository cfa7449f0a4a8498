"""Filesystem primitives on a real temp dir."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from coldkeep.core import fsutil
from coldkeep.core.fsutil import (
    ensure_dir,
    identity_of,
    link_noreplace,
    rename_noreplace,
    renameat2_noreplace,
    unlink_if_identity,
)


def test_identity_comes_from_lstat_and_never_follows(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.write_bytes(b"12345")
    link = tmp_path / "l"
    link.symlink_to(target)
    assert identity_of(target).size == 5 and identity_of(target).is_regular
    assert not identity_of(link).is_regular
    assert identity_of(link).ino != identity_of(target).ino


@pytest.mark.parametrize("rename", [rename_noreplace, renameat2_noreplace, link_noreplace])
def test_rename_without_replace(tmp_path: Path, rename: Callable[[Path, Path], str]) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(b"new")
    dst.write_bytes(b"precious")
    assert rename(src, dst) == "exists"
    assert dst.read_bytes() == b"precious" and src.read_bytes() == b"new"

    dst.unlink()
    assert rename(src, dst) == "renamed"
    assert dst.read_bytes() == b"new" and not src.exists()


def test_rename_falls_back_to_link_where_renameat2_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem without RENAME_NOREPLACE answers EINVAL; the fallback still never
    replaces. (The refusal is simulated at the libc boundary; the files are real.)"""
    monkeypatch.setattr(fsutil, "_renameat2", None)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(b"new")
    dst.write_bytes(b"precious")
    with pytest.raises(fsutil.NoReplaceUnsupported):
        renameat2_noreplace(src, dst)
    assert rename_noreplace(src, dst) == "exists"
    assert dst.read_bytes() == b"precious"
    dst.unlink()
    assert rename_noreplace(src, dst) == "renamed"
    assert dst.read_bytes() == b"new" and not src.exists()


def test_unlink_if_identity_refuses_any_change(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    ident = identity_of(p)

    with p.open("ab") as f:
        f.write(b"d")
    assert unlink_if_identity(p, ident) == "changed" and p.exists()

    os.utime(p, ns=(ident.mtime_ns, ident.mtime_ns))
    os.truncate(p, 3)
    os.utime(p, ns=(ident.mtime_ns, ident.mtime_ns))
    assert unlink_if_identity(p, identity_of(p)) == "removed" and not p.exists()
    assert unlink_if_identity(p, ident) == "gone"

    p.write_bytes(b"abc")  # same size, a new inode
    os.utime(p, ns=(ident.mtime_ns, ident.mtime_ns))
    replaced = identity_of(p)
    if replaced.ino != ident.ino:
        assert unlink_if_identity(p, ident) == "changed" and p.exists()

    p.unlink()
    p.mkdir()
    assert unlink_if_identity(p, ident) == "changed" and p.is_dir()


def test_ensure_dir_creates_parents(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    ensure_dir(deep)
    ensure_dir(deep)
    assert deep.is_dir()
