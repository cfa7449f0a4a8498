"""base/layout.py: every name under archive_root comes from Layout."""

from __future__ import annotations

from pathlib import Path

from coldkeep.core.base.layout import Layout, is_scratch_name, is_temp_name


def test_every_name_under_the_root() -> None:
    layout = Layout(Path("/archive"))
    assert layout.manifest == Path("/archive/coldkeep.db")
    assert layout.lock == Path("/archive/.lock")
    assert layout.reserve == Path("/archive/.reserve")
    assert layout.socket == Path("/archive/.coldkeep.sock")
    assert layout.files == Path("/archive/files")
    assert layout.events == Path("/archive/events")
    assert layout.probe().parent == layout.root


def test_scratch_files_are_new_names_no_walk_takes_for_data() -> None:
    layout = Layout(Path("/archive"))
    a, b = layout.scratch("fetch-7"), layout.scratch("fetch-7")
    assert a != b and a.parent == b.parent == layout.root
    assert a.name.startswith(".remote-fetch-7-")
    assert is_scratch_name(a.name) and is_temp_name(a.name)
    assert is_scratch_name(a.name + "-journal")  # a snapshot's, killed mid-backup
    assert not is_scratch_name("files") and not is_scratch_name(".remote-notes.txt")
