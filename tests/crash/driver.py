"""A real process doing one protocol operation, killed by SIGKILL at a named step.

    python driver.py archive LIVE ARCHIVE RELPATH KILL_AT
    python driver.py restore LIVE ARCHIVE ENTRY_ID KILL_AT
    python driver.py events LIVE ARCHIVE CONFIG KILL_AT[:N]

The step hook kills the process the moment the step is announced (the step is
complete and durable, nothing after it has happened), exactly as a power cut or
an OOM kill would; ``:N`` kills at the N-th time the step is announced.
KILL_AT = "none" runs to the end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from coldkeep.core.base.codec import Codec
from coldkeep.core.base.config import load_settings
from coldkeep.core.base.layout import Layout
from coldkeep.core.base.steps import StepInfo, StepName
from coldkeep.core.events.dbmove import move_events
from coldkeep.core.files.filemove import FileMover
from coldkeep.core.store.manifest import Manifest


async def main(op: str, live: Path, archive: Path, what: str, kill_spec: str) -> None:
    kill_at, _, nth = kill_spec.partition(":")
    seen = {"n": 0}

    async def hook(name: StepName, info: StepInfo) -> None:
        if name == kill_at:
            seen["n"] += 1
            if seen["n"] >= int(nth or 1):
                os.kill(os.getpid(), signal.SIGKILL)

    if op == "events":
        report = await move_events(load_settings(Path(what)), Layout(archive).events, step=hook)
        print(report.moved, report.already_archived, flush=True)
        return

    layout = Layout(archive)
    async with await Manifest.open(layout.manifest) as manifest:
        mover = FileMover(live, layout, manifest, Codec("isal", 1), step=hook)
        if op == "archive":
            print((await mover.archive(what)).kind, flush=True)
        else:
            entry = await manifest.entry(int(what))
            assert entry is not None
            target = mover.live_path(entry)
            done = await mover.restore(entry, target, root=mover.live_root)
            print(done.kind, flush=True)


if __name__ == "__main__":
    op, live, archive, what, kill_at = sys.argv[1:6]
    asyncio.run(main(op, Path(live), Path(archive), what, kill_at))
