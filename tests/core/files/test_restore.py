"""Restoring many files at once: ``io.workers`` files in flight, bundle members
and files of their own alike, each back byte for byte with its mtime and mode;
a restore stopped mid-way leaves no partial and no intent."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.layout import RESTORE_PARTIAL_SUFFIX
from coldkeep.core.base.steps import StepHook, StepInfo, StepName
from coldkeep.core.base.stream import EventStream, FileDone, FileStep, Phase
from coldkeep.core.files.restore import Selection

from helpers import JSONL_SITE, Roots, jsonl

CONFIG = JSONL_SITE + "bundle_below = 8192\n\n[io]\nworkers = 4\n"


def tree(roots: Roots) -> dict[str, tuple[bytes, int, int]]:
    """Small files (bundled) and larger ones (their own gzips) in four units, of
    several modes: relpath -> (bytes, mtime_ns, permission bits)."""
    made: dict[str, tuple[bytes, int, int]] = {}
    for n in range(40):
        small = n % 3 != 0
        data = jsonl(8 if small else 200 + n, seed=n)
        path = roots.write(f"u{n % 4}/f{n:02d}.jsonl", data, age_days=20 + n)
        mode = (0o600, 0o640, 0o644, 0o444)[n % 4]
        os.chmod(path, mode)
        made[f"u{n % 4}/f{n:02d}.jsonl"] = (data, path.stat().st_mtime_ns, mode)
    (roots.base / "coldkeep.toml").write_text(CONFIG)
    return made


def back(root: Path) -> dict[str, tuple[bytes, int, int]]:
    return {
        p.relative_to(root).as_posix(): (
            p.read_bytes(),
            p.stat().st_mtime_ns,
            stat.S_IMODE(p.stat().st_mode),
        )
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.fixture
async def archived(roots: Roots) -> tuple[Archiver, dict[str, tuple[bytes, int, int]]]:
    made = tree(roots)
    archiver = Archiver(load_settings(roots.base / "coldkeep.toml"), stream=EventStream())
    summary = await archiver.run_pass()
    assert summary.files.archived == len(made)
    members = [e for e in await archiver.select(Selection(glob="**")) if e.span is not None]
    assert 0 < len(members) < len(made), "both bundle members and gzips of their own"
    assert archiver.workers == 4
    return archiver, made


async def test_a_parallel_restore_gives_every_file_back_whole(
    archived: tuple[Archiver, dict[str, tuple[bytes, int, int]]], roots: Roots, tmp_path: Path
) -> None:
    archiver, made = archived
    events = archiver.stream.subscribe()
    to = tmp_path / "elsewhere"
    report = await archiver.restore(Selection(glob="**"), to=to)
    assert report.counts == {"restored": len(made)}
    assert back(to) == made
    # The report lists the files in the selection's order; the stream has one
    # FileDone per file, after the phase that counts them.
    assert [f.relpath for f in report.files] == [
        e.relpath for e in await archiver.select(Selection(glob="**"))
    ]
    seen = events.pending()
    phase = next(i for i, e in enumerate(seen) if isinstance(e, Phase) and e.phase == "restore")
    done = [e for e in seen if isinstance(e, FileDone) and e.op == "restore"]
    assert sorted(e.relpath for e in done) == sorted(made)
    assert all(seen.index(e) > phase for e in done)

    # In place too: every file back at its live path, and held.
    report = await archiver.restore(Selection(glob="**"))
    assert report.counts == {"restored": len(made)}
    assert back(roots.live) == made
    status = await archiver.status()
    assert status.restore_intents == 0
    assert set(status.entries) == {"restored"}


def stop_at_partial(token: CancelToken, n: int) -> StepHook:
    """A step hook that stops the restore once its ``n``-th partial is written."""
    written = 0

    async def step(name: StepName, info: StepInfo) -> None:
        nonlocal written
        if name == "restore_partial_written":
            written += 1
            if written == n:
                token.cancel("stopped by the test")

    return step


async def test_a_restore_stopped_mid_way_leaves_no_partial_and_no_intent(
    archived: tuple[Archiver, dict[str, tuple[bytes, int, int]]], roots: Roots, tmp_path: Path
) -> None:
    archiver, made = archived
    token = CancelToken()
    archiver.steps.user_step = stop_at_partial(token, 5)  # other workers are mid-file then
    events = archiver.stream.subscribe()
    to = tmp_path / "elsewhere"
    with pytest.raises(Cancelled, match="stopped by the test"):
        await archiver.restore(Selection(glob="**"), to=to, cancel=token)
    left = back(to)
    assert not [p for p in left if p.endswith(RESTORE_PARTIAL_SUFFIX)]
    assert 5 <= len(left) < len(made)
    assert all(made[rel] == got for rel, got in left.items()), "what was placed is whole"
    assert (await archiver.status()).restore_intents == 0
    # Every file placed was told, each once, its intent cleared before.
    seen = events.pending()
    told = [e.relpath for e in seen if isinstance(e, FileDone) and e.result == "restored"]
    assert sorted(told) == sorted(left)
    for rel in told:
        steps = [
            e.step if isinstance(e, FileStep) else "done"
            for e in seen
            if isinstance(e, FileStep | FileDone) and e.op == "restore" and e.relpath.endswith(rel)
        ]
        assert steps[-2:] == ["intent_cleared", "done"], (rel, steps)

    # The rest comes back on the next restore; the files placed are "exists".
    archiver.steps.user_step = Archiver(archiver.settings).steps.user_step
    report = await archiver.restore(Selection(glob="**"), to=to)
    assert report.counts == {"exists": len(left), "restored": len(made) - len(left)}
    assert back(to) == made


async def test_a_restore_in_place_stopped_mid_way_gives_back_the_graces_it_did_not_use(
    archived: tuple[Archiver, dict[str, tuple[bytes, int, int]]], roots: Roots
) -> None:
    """The intents (and in place, the graces) are recorded a chunk ahead of the
    workers: those of files never written go when the restore stops, and their
    entries are as they were."""
    archiver, made = archived
    token = CancelToken()
    # The intents of two chunks are recorded by the third partial.
    archiver.steps.user_step = stop_at_partial(token, 3)
    with pytest.raises(Cancelled, match="stopped by the test"):
        await archiver.restore(Selection(glob="**"), cancel=token)
    left = back(roots.live)
    assert 1 <= len(left) < len(made) // 2
    status = await archiver.status()
    assert status.restore_intents == 0
    assert status.entries["restored"][0] == len(left)
    assert status.entries["archived"][0] == len(made) - len(left)
