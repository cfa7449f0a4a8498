"""Filesystem primitives on a real temp dir, every path reached beneath a root."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from coldkeep.core.base import fsutil
from coldkeep.core.base.beneath import Refused, walks_kept
from coldkeep.core.base.fsutil import (
    create_unless_there,
    ensure_dir,
    identity_of,
    identity_or_none,
    open_file,
    place_noreplace,
    rename_noreplace,
    unlink_if_identity,
    unlink_if_present,
)


def test_identity_comes_from_lstat_and_never_follows(tmp_path: Path) -> None:
    target = tmp_path / "t"
    target.write_bytes(b"12345")
    link = tmp_path / "l"
    link.symlink_to(target)
    assert identity_of(target, root=tmp_path).size == 5
    assert identity_of(target, root=tmp_path).is_regular
    assert not identity_of(link, root=tmp_path).is_regular
    assert identity_of(link, root=tmp_path).ino != identity_of(target, root=tmp_path).ino


@pytest.mark.parametrize("renameat2", [True, False], ids=["renameat2", "link+unlink"])
def test_rename_without_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renameat2: bool
) -> None:
    """Where the kernel or filesystem has no RENAME_NOREPLACE (simulated at the libc
    boundary; the files are real) the link fallback never replaces either."""
    if not renameat2:
        monkeypatch.setattr(fsutil, "_renameat2", None)
    src, dst = tmp_path / "src", tmp_path / "sub" / "dst"
    dst.parent.mkdir()
    src.write_bytes(b"new")
    dst.write_bytes(b"precious")
    assert rename_noreplace(src, dst, root=tmp_path) == "exists"
    assert dst.read_bytes() == b"precious" and src.read_bytes() == b"new"

    dst.unlink()
    assert rename_noreplace(src, dst, root=tmp_path) == "renamed"
    assert dst.read_bytes() == b"new" and not src.exists()


def test_place_without_replace_gives_the_placed_files_identity(tmp_path: Path) -> None:
    src, dst = tmp_path / "d" / "f.partial", tmp_path / "d" / "f"
    src.parent.mkdir()
    src.write_bytes(b"new")
    dst.write_bytes(b"precious")
    assert place_noreplace(src, dst, root=tmp_path) is None
    assert dst.read_bytes() == b"precious" and src.read_bytes() == b"new"

    dst.unlink()
    placed = place_noreplace(src, dst, root=tmp_path)
    assert placed == identity_of(dst, root=tmp_path), "taken after the rename (its ctime)"
    assert dst.read_bytes() == b"new" and not src.exists()
    with pytest.raises(ValueError, match="not in one directory"):
        place_noreplace(dst, tmp_path / "elsewhere", root=tmp_path)


def test_create_unless_there(tmp_path: Path) -> None:
    """The new file is made (with the directories on the way) only where the
    other name is free, whatever holds it; an existing new name is refused."""
    there, new = tmp_path / "a" / "b" / "t", tmp_path / "a" / "b" / "t.partial"
    fd = create_unless_there(there, new, root=tmp_path)
    assert fd is not None
    os.write(fd, b"x")
    os.close(fd)
    assert new.read_bytes() == b"x" and oct(new.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(FileExistsError):
        create_unless_there(there, new, root=tmp_path)
    new.unlink()
    there.symlink_to(tmp_path / "nowhere")  # a dangling link holds the name too
    assert create_unless_there(there, new, root=tmp_path) is None
    assert not new.exists()
    with pytest.raises(ValueError, match="not in one directory"):
        create_unless_there(there, tmp_path / "t.partial", root=tmp_path)


def test_unlink_if_identity_refuses_any_change(tmp_path: Path) -> None:
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    ident = identity_of(p, root=tmp_path)

    with p.open("ab") as f:
        f.write(b"d")
    assert unlink_if_identity(p, ident, root=tmp_path, durably=None) == "changed" and p.exists()

    os.utime(p, ns=(ident.mtime_ns, ident.mtime_ns))
    os.truncate(p, 3)
    os.utime(p, ns=(ident.mtime_ns, ident.mtime_ns))
    now = identity_of(p, root=tmp_path)
    assert unlink_if_identity(p, now, root=tmp_path, durably=None) == "removed" and not p.exists()
    assert unlink_if_identity(p, ident, root=tmp_path, durably=None) == "gone"

    p.write_bytes(b"abc")  # same size, a new inode
    os.utime(p, ns=(ident.mtime_ns, ident.mtime_ns))
    replaced = identity_of(p, root=tmp_path)
    if replaced.ino != ident.ino:
        assert unlink_if_identity(p, ident, root=tmp_path, durably=None) == "changed" and p.exists()

    p.unlink()
    p.mkdir()
    assert unlink_if_identity(p, ident, root=tmp_path, durably=None) == "changed" and p.is_dir()


def test_ensure_dir_creates_parents(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "c"
    ensure_dir(deep, root=tmp_path)
    ensure_dir(deep, root=tmp_path)
    assert deep.is_dir()


@pytest.mark.parametrize("kept", [False, True], ids=["walked", "walks-kept"])
def test_a_symlinked_directory_under_the_root_is_refused_never_followed(
    tmp_path: Path, kept: bool
) -> None:
    """A user who can write the tree replaces a directory with a link to one
    outside it: every operation through it is refused, and nothing outside is
    read, written, renamed or removed (a batch that keeps its walks too)."""
    root, outside = tmp_path / "live", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_bytes(b"not coldkeep's")
    (root / "unit").symlink_to(outside, target_is_directory=True)
    through = root / "unit" / "secret"

    for refused in (
        lambda: identity_of(through, root=root),
        lambda: identity_or_none(through, root=root),
        lambda: open_file(through, os.O_RDONLY, root=root),
        lambda: open_file(root / "unit" / "new", os.O_WRONLY | os.O_CREAT, root=root),
        lambda: unlink_if_present(through, root=root),
        lambda: ensure_dir(root / "unit" / "deeper", root=root),
        lambda: rename_noreplace(through, root / "taken", root=root),
        lambda: rename_noreplace(through, root / "unit" / "taken", root=root),
        lambda: place_noreplace(through, root / "unit" / "taken", root=root),
        lambda: create_unless_there(through, root / "unit" / "new", root=root),
    ):
        with (
            walks_kept(root) if kept else contextlib.nullcontext(),
            pytest.raises(Refused, match=r"refused: .*unit is a symlink"),
        ):
            refused()
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]
    assert (outside / "secret").read_bytes() == b"not coldkeep's"
    assert not (root / "taken").exists()


def test_a_path_outside_its_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with pytest.raises(Refused, match="is not inside"):
        identity_of(tmp_path / "b" / "x", root=tmp_path / "a")


def test_a_root_whose_name_prefixes_the_path_is_not_its_parent(tmp_path: Path) -> None:
    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "x").write_bytes(b"x")
    (tmp_path / "a").mkdir()
    with pytest.raises(Refused, match="is not inside"):
        identity_of(tmp_path / "ab" / "x", root=tmp_path / "a")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_batch_keeps_the_directories_it_reached_and_closes_them(tmp_path: Path) -> None:
    """Inside ``walks_kept`` each directory is walked to once: swapped for a link
    to elsewhere meanwhile, the batch goes on in the directory it reached (never
    through the link), and every descriptor it kept is closed at its end."""
    root, outside = tmp_path / "live", tmp_path / "outside"
    (root / "unit").mkdir(parents=True)
    outside.mkdir()
    for name in ("a", "b"):
        (root / "unit" / name).write_bytes(name.encode())
        (outside / name).write_bytes(b"not coldkeep's")
    before = open_fds()
    with walks_kept(root):
        first = identity_of(root / "unit" / "a", root=root)
        during = open_fds()
        (root / "unit").rename(root / "moved")
        (root / "unit").symlink_to(outside, target_is_directory=True)
        assert unlink_if_identity(root / "unit" / "a", first, root=root, durably=None) == (
            "removed"
        )
        assert unlink_if_present(root / "unit" / "b", root=root)
        assert open_fds() == during  # nothing walked again
    assert open_fds() == before
    assert sorted(p.name for p in (root / "moved").iterdir()) == []
    assert sorted(p.name for p in outside.iterdir()) == ["a", "b"]
    # Outside the batch, the link is refused again.
    with pytest.raises(Refused, match="symlink"):
        identity_of(root / "unit" / "a", root=root)
