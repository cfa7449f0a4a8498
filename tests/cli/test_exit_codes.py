"""Exit codes, command by command, through the real CLI: 0 done, 1 failed or
needs attention, 2 bad usage or config (a config lacking what the command
needs included), 3 the archive lock is held by another process."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from coldkeep.core.base.lock import ArchiveLock

from helpers import COLDKEEP, DAY_NS, ck


def _fresh(site: Path) -> None:
    """A site that never ran: one eligible file, no archive_root yet, no state_db."""
    path = site / "live" / "u1" / "a.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"a": 1}\n' * 100)
    old = path.stat().st_mtime_ns - 60 * DAY_NS
    os.utime(path, ns=(old, old))
    config = 'live_root = "live"\narchive_root = "archive"\nmode = "on"\n'
    (site / "coldkeep.toml").write_text(config)


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each kind of site once; a test gets its own copy."""
    base = tmp_path_factory.mktemp("templates")
    _fresh(base / "fresh")
    demo = base / "demo"
    subprocess.run(
        [*COLDKEEP, "demo", str(demo), "--scale", "0.02", "--no-console"],
        check=True,
        capture_output=True,
    )
    archived = base / "archived"
    shutil.copytree(demo, archived)
    ck(archived, "pass")
    return {"fresh": base / "fresh", "demo": demo, "archived": archived}


def without(key: str) -> Callable[[Path], None]:
    """The site's config without the line that sets ``key``."""

    def edit(site: Path) -> None:
        config = site / "coldkeep.toml"
        lines = config.read_text().splitlines(keepends=True)
        config.write_text("".join(x for x in lines if not x.startswith(f"{key} =")))

    return edit


def a_file(name: str) -> Callable[[Path], None]:
    def make(site: Path) -> None:
        (site / name).write_text("there\n")

    return make


@dataclass(frozen=True)
class Case:
    command: str  # as the exit-code table names it
    code: int
    args: tuple[str, ...]  # "{site}" in one: the site's folder
    site: str = "archived"  # fresh | demo | archived
    setup: Callable[[Path], None] | None = None
    says: str = ""  # on stdout or stderr
    locked: bool = False  # another process holds the archive lock meanwhile

    @property
    def id(self) -> str:
        return f"{self.command}-{self.code}-{'_'.join(self.args)[:40]}"


CASES = [
    Case("rebuild-manifest", 2, ("rebuild-manifest", "--out", "{site}/there.db"),
         setup=a_file("there.db"), says="there.db exists"),
    Case("rebuild-manifest", 2, ("rebuild-manifest",), says="coldkeep.db exists"),
    Case("checkpoint", 2, ("checkpoint",), setup=without("state_db"), says="no state_db"),
    Case("restore-events", 2, ("restore-events",), setup=without("state_db"), says="no state_db"),
    Case("history", 2, ("history", "--limit", "0"), says="--limit"),
    Case("history", 2, ("history", "--limit", "-5"), says="--limit"),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_exit_code(case: Case, templates: dict[str, Path], tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(templates[case.site], site)
    if case.setup is not None:
        case.setup(site)
    before = sorted(p.relative_to(site) for p in site.rglob("*"))
    args = [a.format(site=site) for a in case.args]
    if case.locked:
        with ArchiveLock.try_acquire(site / "archive", command="another coldkeep"):
            run = ck(site, *args, check=case.code)
    else:
        run = ck(site, *args, check=case.code)
    assert case.says in run.stdout + run.stderr, run.stdout + run.stderr
    if case.code == 2:
        after = sorted(p.relative_to(site) for p in site.rglob("*"))
        assert after == before, "a usage error writes nothing"


def test_demo_into_a_folder_that_is_not_empty_exits_2_before_writing(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    run = subprocess.run(
        [*COLDKEEP, "demo", str(tmp_path), "--no-console"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2 and "is not empty" in run.stderr
    assert "Writing" not in run.stdout, "nothing said of a site that is not written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.txt"]
