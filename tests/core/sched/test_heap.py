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


# A 4 MiB block freed (which, left to glibc, raises its mmap threshold to 4
# MiB), then a hundred 1 MiB buffers from a thread, one in ten kept: RSS in MB
# with all of them, then after the frees (no trim).
BIG = textwrap.dedent(
    """
    import threading
    from coldkeep.core.sched import heap

    def rss():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) // 1024

    assert heap.limit_arenas()
    del bytearray(4 << 20)[:]
    kept, seen = [], []

    def reads():
        chunks = [bytearray(1 << 20) for _ in range(100)]
        seen.append(rss())
        kept.extend(chunks[::10])

    t = threading.Thread(target=reads)
    t.start()
    t.join()
    print(seen[0], rss())
    """
)


def test_a_freed_large_buffer_goes_back_at_once_whatever_was_freed_before() -> None:
    if heap._LIBC is None:
        pytest.skip("not glibc: its mmap threshold cannot be fixed")
    out = subprocess.run([sys.executable, "-c", BIG], capture_output=True, text=True, check=True)
    full, after = (int(v) for v in out.stdout.split())
    assert full > 100, (full, after)
    assert after < full - 70, (full, after)  # the ninety freed buffers are gone
