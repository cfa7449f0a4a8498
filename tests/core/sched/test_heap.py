"""The daemon's native heap: what a job's threads freed goes back to the system."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from coldkeep.core.sched import heap

# Eight threads each allocate 40 MB in 1 KB pieces (malloc's, not Python's
# small-object pool) and free all but one piece in fifty: what a day of jobs
# leaves in the arenas. They hold their pieces until all eight have them, or a
# loaded machine runs them one after another and each reuses what the last
# freed. RSS in MB after the frees, then after a trim.
CHILD = textwrap.dedent(
    """
    import threading
    from coldkeep.core.sched import heap

    def rss():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) // 1024

    assert heap.limit_arenas()
    kept = []
    together = threading.Barrier(8)

    def churn():
        pieces = [bytearray(1024) for _ in range(40_000)]
        kept.extend(pieces[::50])
        together.wait()

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    before = rss()
    heap.trim()
    print(before, rss())
    """
)


def test_a_trim_hands_back_what_the_jobs_threads_freed() -> None:
    if heap._LIBC is None:  # asked here, this process's arenas would change too
        pytest.skip("not glibc: its arenas cannot be limited nor trimmed")
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    before, after = (int(v) for v in out.stdout.split())
    assert before > 250, (before, after)  # the frees alone give nothing back
    assert after < before / 2, (before, after)
