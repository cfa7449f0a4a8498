"""An attacker who can write the tree coldkeep works in (as root: the application's
own user, say) swaps a directory for a symlink to somewhere else and back, as fast
as it can, while coldkeep restores into it, archives from it, or removes legacy
copies in it. Whatever the timing, nothing outside the tree is written, renamed or
removed, and nothing is lost: once the swapping stops, the next run completes.

`COLDKEEP_RACE_ROUNDS` (default 2) sets how many times each scenario runs; a long
hunt: COLDKEEP_RACE_ROUNDS=50 pytest tests/faults/test_symlink_race.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from faults.sites import copy_site, write_site

from helpers import ck, entries, live_files, report_line
from sitecheck import Originals, Tally, check_site

SWAPPER = Path(__file__).parents[1] / "swapper.py"
ROUNDS = int(os.environ.get("COLDKEEP_RACE_ROUNDS", "2"))
UNIT = "unit-0001"  # closed in the demo: its files are archived by a pass


@pytest.fixture(scope="module")
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    t = Tally()
    yield t
    report_line(request.config, t.line("symlink race", "racing runs"))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = write_site(tmp_path_factory.mktemp("race") / "site", scale="0.02", seed=3)
    assert (site / "live" / UNIT / ".closed").exists()
    return site


@contextmanager
def swapping(directory: Path, target: Path) -> Iterator[None]:
    """``directory`` swapped for a symlink to ``target`` and back, until the block
    ends; the real directory is back in place after."""
    proc = subprocess.Popen(
        [sys.executable, str(SWAPPER), str(directory), str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert proc.stdout.readline() == "swapping\n"
    try:
        yield
    finally:
        proc.stdin.close()
        swaps = int(proc.stdout.readline() or 0)
        proc.wait(timeout=30)
        assert swaps > 0 and directory.is_dir() and not directory.is_symlink()


def everything_in(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def fresh(template: Path, tmp_path: Path, n: int) -> tuple[Path, Path, Originals]:
    site = copy_site(template, tmp_path / f"site-{n}")
    outside = tmp_path / f"outside-{n}"
    outside.mkdir()
    return site, outside, Originals.of(site)


@pytest.mark.parametrize("to", [False, True], ids=["in place", "--to"])
def test_a_restore_never_writes_through_a_swapped_directory(
    template: Path, tmp_path: Path, tally: Tally, to: bool
) -> None:
    for n in range(ROUNDS):
        site, outside, originals = fresh(template, tmp_path, n)
        ck(site, "pass")
        target = tmp_path / f"restored-{n}"
        where = ["--to", str(target)] if to else []
        unit_dir = (target if to else site / "live") / UNIT
        unit_dir.mkdir(parents=True, exist_ok=True)
        with swapping(unit_dir, outside):
            ck(site, "restore", "--unit", UNIT, *where, check=None)
        tally.faults += 1
        tally.by_kind["restore --to" if to else "restore in place"] += 1
        assert everything_in(outside) == {}, "nothing written outside the tree"
        ck(site, "recover")
        ck(site, "restore", "--unit", UNIT, *where, check=None)
        restored = everything_in(unit_dir)
        wanted = {
            rel.removeprefix(f"{UNIT}/"): digest
            for rel, digest in originals.files.items()
            if rel.startswith(f"{UNIT}/")
        }
        assert {r for r in restored if not r.startswith(".")} >= set(wanted)
        if not to:
            check_site(site, originals, tally)


def test_a_pass_never_reads_or_unlinks_through_a_swapped_directory(
    template: Path, tmp_path: Path, tally: Tally
) -> None:
    for n in range(ROUNDS):
        site, outside, originals = fresh(template, tmp_path, n)
        # Decoys: what the unit holds, under the same names, outside the tree. Read
        # through the link they would be archived; unlinked through it, lost.
        shutil.copytree(site / "live" / UNIT, outside, dirs_exist_ok=True)
        decoys = everything_in(outside)
        with swapping(site / "live" / UNIT, outside):
            ck(site, "pass", check=None)
        tally.faults += 1
        tally.by_kind["pass"] += 1
        assert everything_in(outside) == decoys, "nothing outside removed or written"
        ck(site, "pass")
        # Mid-swap the real directory is at the symlink's name, and a scan that
        # walks it then archives its files under that name (the attacker moved
        # them; their bytes are archived all the same): either name counts.
        swap = f".{UNIT}-swap/"
        elsewhere = {
            (e["relpath"].replace(swap, f"{UNIT}/", 1), e["sha256"])
            for e in entries(site)
            if e["relpath"].startswith(swap)
        }
        unit = {rel: d for rel, d in originals.files.items() if rel.startswith(f"{UNIT}/")}
        rest = Originals(
            {r: d for r, d in originals.files.items() if r not in unit}, originals.rows
        )
        check_site(site, rest, tally)
        archived = {(e["relpath"], e["sha256"]) for e in entries(site)} | elsewhere
        assert all((rel, d) in archived for rel, d in unit.items()), "every unit file archived"
        assert all(not (site / "live" / rel).exists() for rel in originals.files if UNIT in rel)


def test_legacy_copies_are_never_removed_through_a_swapped_directory(
    template: Path, tmp_path: Path, tally: Tally
) -> None:
    for n in range(ROUNDS):
        site, outside, originals = fresh(template, tmp_path, n)
        # The unit's folder with the most files: each gets a legacy copy (a prefix
        # of its bytes) there, and a decoy of the same name outside.
        folders = Counter(
            str(Path(rel).parent) for rel in originals.files if rel.startswith(f"{UNIT}/")
        )
        folder = folders.most_common(1)[0][0]
        legacy_dir = site / "archive" / "files" / folder
        legacy_dir.mkdir(parents=True, exist_ok=True)
        for rel in originals.files:
            if str(Path(rel).parent) == folder:
                data = (site / "live" / rel).read_bytes()
                (legacy_dir / Path(rel).name).write_bytes(data[: len(data) // 2])
                (outside / Path(rel).name).write_bytes(data[: len(data) // 2])
        decoys = everything_in(outside)
        assert decoys, "the unit has files for legacy copies"
        with swapping(legacy_dir, outside):
            ck(site, "pass", check=None)
        tally.faults += 1
        tally.by_kind["legacy copies"] += 1
        assert everything_in(outside) == decoys, "nothing outside removed or written"
        ck(site, "pass", check=None)
        assert (
            live_files(site)
            .keys()
            .isdisjoint(rel for rel in originals.files if rel.startswith(f"{UNIT}/"))
        )
