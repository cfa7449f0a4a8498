"""SIGKILL between every announced step of an event batch, in a real subprocess,
then a rerun: every row exists exactly once across live and the month DBs, with
the content it had, and every database passes its integrity check."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ARCHIVABLE, Roots, all_event_rows, make_events_db

pytestmark = pytest.mark.crash
DRIVER = Path(__file__).with_name("driver.py")


def site(roots: Roots) -> Path:
    import time

    make_events_db(roots.base / "state.db", 4000, now_ms=time.time_ns() // 1_000_000)
    kinds = ", ".join(f'"{k}"' for k in ARCHIVABLE)
    config = roots.base / "coldkeep.toml"
    config.write_text(
        f'live_root = "live"\narchive_root = "archive"\nstate_db = "state.db"\n'
        f"[events]\nkinds = [{kinds}]\nbatch_rows = 250\ncheckpoint_every = 2\n"
    )
    return config


def drive(roots: Roots, config: Path, kill: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            str(DRIVER),
            "events",
            str(roots.live),
            str(roots.archive),
            str(config),
            kill,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    "kill",
    ["batch_archived:1", "batch_deleted:1", "batch_archived:3", "batch_deleted:3"],
)
def test_event_phase_killed_between_steps(roots: Roots, kill: str) -> None:
    config = site(roots)
    db = roots.base / "state.db"
    before = all_event_rows(db, roots.layout.events)

    killed = drive(roots, config, kill)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    after_kill = all_event_rows(db, roots.layout.events)
    # At worst a batch is in both places; nothing is missing.
    assert set(after_kill) == set(before)
    in_both = len(after_kill) - len(before)
    assert in_both <= 250

    rerun = drive(roots, config, "none")
    assert rerun.returncode == 0, rerun.stderr
    _moved, already = map(int, rerun.stdout.split())
    if kill.startswith("batch_archived"):
        # (A batch may end before batch_rows, with its month.)
        assert already == in_both > 0, "the batch archived before the kill is only deleted"
    assert all_event_rows(db, roots.layout.events) == before
