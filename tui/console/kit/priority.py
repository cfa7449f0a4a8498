"""Background threads at a lower CPU priority than the console's own thread.

The console's event loop draws every frame; the core's work (compression,
hashing, the event mover and its checker) runs in threads of the loop's default
executor. When they all want the two cores at once, the frames should win. On
Linux each thread has its own nice value: the executor's threads raise theirs by
BACKGROUND_NICE as they start, and the threads they start themselves (the event
mover's checker) inherit it. Elsewhere this is a plain executor.

A raised nice value cannot be lowered again without privileges, so only threads
of the console's own executor are ever niced, never a pool someone else shares.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

# The event phase with the checker beside the mover kept both cores busy; at
# nice 0 the console's loop lag p99 during it was 29-36 ms, at 10 20-24 ms.
BACKGROUND_NICE = 10


def _lower_priority(by: int) -> None:
    if sys.platform.startswith("linux"):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + by)


def background_executor(nice: int = BACKGROUND_NICE) -> ThreadPoolExecutor:
    """asyncio's default executor (as many threads), its threads niced."""
    return ThreadPoolExecutor(
        max_workers=min(32, (os.cpu_count() or 1) + 4),
        thread_name_prefix="coldkeep-background",
        initializer=_lower_priority,
        initargs=(nice,),
    )
