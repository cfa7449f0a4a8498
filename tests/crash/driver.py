"""A real process doing one protocol operation, killed by SIGKILL at a named step.

    python driver.py archive LIVE ARCHIVE RELPATH KILL_AT
    python driver.py restore LIVE ARCHIVE ENTRY_ID KILL_AT

The step hook kills the process the moment the step is announced (the step is
complete and durable, nothing after it has happened), exactly as a power cut or
an OOM kill would. KILL_AT = "none" runs to the end.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from coldkeep.core.codec import Codec
from coldkeep.core.filemove import FileMover
from coldkeep.core.layout import Layout
from coldkeep.core.manifest import Manifest
from coldkeep.core.steps import StepInfo, StepName


async def main(op: str, live: Path, archive: Path, what: str, kill_at: str) -> None:
    async def hook(name: StepName, info: StepInfo) -> None:
        if name == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    layout = Layout(archive)
    async with await Manifest.open(layout.manifest) as manifest:
        mover = FileMover(live, layout, manifest, Codec("isal", 1), step=hook)
        if op == "archive":
            print((await mover.archive(what)).kind, flush=True)
        else:
            entry = await manifest.entry(int(what))
            assert entry is not None
            print((await mover.restore(entry, mover.live_path(entry))).kind, flush=True)


if __name__ == "__main__":
    op, live, archive, what, kill_at = sys.argv[1:6]
    asyncio.run(main(op, Path(live), Path(archive), what, kill_at))
