"""The fsync mutants: would the tests catch a missing fsync?

    python tests/fsync_mutants.py [SITE ...]      (make fsync-mutants)

Every fsync coldkeep makes is a named site (core/base/durable.py). This runs
the power-loss matrix (tests/faults/test_power_loss.py: a FUSE filesystem that
drops, at a cut, every write and every directory entry change not yet fsynced)
once as it is, recording which sites its commands reach, then once per reached
site with that one fsync skipped (``COLDKEEP_TEST_SKIP_FSYNC`` and
``COLDKEEP_TEST_FSYNC_MUTANT``), stopping at the first failed test. It prints
the table: each site, ``killed`` (a test failed: it names the first) or
``survived`` (the matrix passed without that fsync), or ``not reached`` (no
command of the matrix makes that fsync: no cut can tell). A survivor is a test
gap to close or an fsync docs/architecture.md explains ("Every fsync is
tested").

Each run is one pytest at a time without xdist workers (about a minute each;
a killed mutant stops at its first failure); the logs go to
``$TMPDIR/coldkeep-fsync-mutants/<site>.log``. Not part of the suite.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from coldkeep.core.base.durable import MUTANT_ACK, MUTANT_ENV, SITES, SKIP_ENV, TRACE_ENV

ROOT = Path(__file__).resolve().parents[1]
MATRIX = "tests/faults/test_power_loss.py"
LOGS = Path(tempfile.gettempdir()) / "coldkeep-fsync-mutants"
FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


@dataclass
class Outcome:
    site: str
    verdict: str  # killed | survived | not reached
    detail: str
    seconds: float = 0.0


def matrix(env: dict[str, str], log: Path) -> tuple[int, str]:
    """The power-loss matrix in a pytest of its own, stopped at its first failed
    test: its exit code and that test (or "")."""
    args = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider"]
    args.append(MATRIX)
    with log.open("wb") as out:
        done = subprocess.run(
            args,
            check=False,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    failed = FAILED.findall(log.read_text(errors="replace"))
    return done.returncode, failed[0] if failed else ""


def reached_sites() -> set[str]:
    """The unmutated matrix (it must pass), and the sites its commands reach."""
    trace = LOGS / "reached.trace"
    trace.unlink(missing_ok=True)
    code, first = matrix({TRACE_ENV: str(trace), MUTANT_ENV: MUTANT_ACK}, LOGS / "unmutated.log")
    if code != 0:
        sys.exit(f"the matrix fails without a mutant ({first}): see {LOGS / 'unmutated.log'}")
    return set(trace.read_text().split()) if trace.exists() else set()


def mutant(site: str) -> Outcome:
    t0 = time.monotonic()
    env = {SKIP_ENV: site, MUTANT_ENV: MUTANT_ACK}
    code, first = matrix(env, LOGS / f"{site}.log")
    took = time.monotonic() - t0
    if code == 0:
        return Outcome(site, "survived", "the matrix passed without it", took)
    if code == 1 and first:
        return Outcome(site, "killed", first.removeprefix("tests/faults/"), took)
    return Outcome(site, "killed?", f"pytest exit {code}: see {LOGS / site}.log", took)


def table(outcomes: list[Outcome]) -> str:
    rows = [("site", "verdict", "by", "s")] + [
        (o.site, o.verdict, o.detail, f"{o.seconds:.0f}") for o in outcomes
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sites", nargs="*", help="only these sites (default: every one)")
    ns = parser.parse_args()
    unknown = sorted(set(ns.sites) - set(SITES))
    if unknown:
        sys.exit(f"not fsync sites: {unknown}; the sites: {' '.join(SITES)}")
    LOGS.mkdir(exist_ok=True)
    t0 = time.monotonic()
    reached = reached_sites()
    print(f"unmutated matrix passed in {time.monotonic() - t0:.0f} s", flush=True)
    outcomes: list[Outcome] = []
    for site in ns.sites or SITES:
        if site not in reached:
            outcomes.append(Outcome(site, "not reached", "no command of the matrix makes it"))
        else:
            outcomes.append(mutant(site))
        o = outcomes[-1]
        print(f"{o.site}: {o.verdict} ({o.detail}) {o.seconds:.0f} s", flush=True)
    print()
    print(table(outcomes))
    print(f"\n{time.monotonic() - t0:.0f} s in all; logs in {LOGS}")


if __name__ == "__main__":
    main()
