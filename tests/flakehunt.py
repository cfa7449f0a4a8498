"""The flake hunt: the whole suite, several times back to back, with every core kept
busy by a CPU hog, the way a shared CI machine is. A test that fails even once
here is flaky, and a flaky test is a defect: fix its cause (wait for the
condition, not a longer sleep; no retries).

    make flakehunt                       (FLAKE_RUNS=5 by default)
    python tests/flakehunt.py --runs 5 [pytest args...]

Prints each run's result as it ends, then every test that failed, how often; a
failed run's output (and its snapshot report) is kept in .flakehunt/.
Exit 0 only if no run failed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)")


def hogs(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` processes that spin on a core each until killed."""
    spin = "while True: pass"
    return [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(n)]


def keep(run: int, done: subprocess.CompletedProcess[str]) -> Path:
    """A failed run's whole output (and the snapshot report, if a snapshot
    differed) kept under .flakehunt/: a flake seen once must be readable later."""
    out = ROOT / ".flakehunt"
    out.mkdir(exist_ok=True)
    log = out / f"run-{run}.log"
    log.write_text(done.stdout + done.stderr)
    report = ROOT / "snapshot_report.html"
    if report.exists():
        report.replace(out / f"run-{run}-snapshot_report.html")
    return log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args()
    failures: Counter[str] = Counter()
    spinning = hogs(os.cpu_count() or 1)
    try:
        for run in range(1, args.runs + 1):
            t0 = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
                 *args.pytest_args],
                cwd=ROOT,
                # A core's worth of hogs beside each worker: a test's minute is two.
                # Every other run waits for the console's idle in Textual's own 20 ms
                # slices (tests/consolekit.py takes 2 ms): a console test must pass
                # at either pace.
                env={
                    **os.environ,
                    "COLDKEEP_TEST_LIMIT_S": "120",
                    "COLDKEEP_TEST_IDLE_S": "0.02" if run % 2 == 0 else "0.002",
                },
                capture_output=True,
                text=True,
                check=False,
            )  # fmt: skip
            failed = [m.group(1) for line in done.stdout.splitlines() if (m := FAILED.match(line))]
            failures.update(failed)
            last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
            print(f"run {run}: {time.monotonic() - t0:.0f} s, {last}", flush=True)
            if failed or done.returncode:
                print(f"  output: {keep(run, done)}", flush=True)
            for test in failed:
                print(f"  failed: {test}", flush=True)
    finally:
        for hog in spinning:
            hog.kill()
            hog.wait()
    print(f"{args.runs} runs with {len(spinning)} CPU hogs: ", end="")
    if not failures:
        print("no test failed")
        return 0
    print(f"{len(failures)} tests failed at least once")
    for test, n in failures.most_common():
        print(f"  {n}x {test}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
