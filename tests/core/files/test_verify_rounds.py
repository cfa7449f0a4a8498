"""Verify reads the manifest a page at a time: a whole round, a sample and a
round spread over runs by a time budget each check every entry they should,
once, whatever the page size."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.config import load_settings
from coldkeep.core.files import verify
from coldkeep.core.ops.demo import write_demo


@pytest.fixture
def archiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Archiver:
    # Two entries a page: every round crosses many pages, and the resumed one
    # starts inside one.
    monkeypatch.setattr(verify, "PAGE", 2)
    config = write_demo(tmp_path / "demo", seed=5, scale=0.02).config
    return Archiver(load_settings(config), serve_events=False)


def kept(archiver: Archiver) -> int:
    db = archiver.settings.archive_root / "coldkeep.db"
    with sqlite3.connect(db) as conn:
        [(n,)] = conn.execute(
            "SELECT count(*) FROM entries WHERE status IN ('archived', 'stale', 'restored')"
        ).fetchall()
    return int(n)


async def test_a_round_a_sample_and_a_resumed_round_each_check_what_they_should(
    archiver: Archiver,
) -> None:
    await archiver.run_pass()
    n = kept(archiver)
    assert n > 10

    whole = await archiver.verify()
    assert (whole.checked, whole.ok, whole.complete) == (n, n, True)

    half = await archiver.verify(sample=0.5)
    assert half.checked == half.ok == round(n * 0.5)

    checked, runs = 0, 0
    while True:
        part = await archiver.verify(max_duration=1e-6)
        runs += 1
        checked += part.checked
        if part.complete:
            break
    assert runs > 1 and checked == n
