"""What no fault may cost a demo site: the checks every crash, full-disk, I/O-error
and power-loss test runs afterwards, and the tally their summary lines print.

``Originals`` is the site as written (every live file's sha256, every event row);
``check_site`` holds a site against it: no temporary left, every database passes
``integrity_check``, the manifest and the gzips agree, every gzip passes
``gzip -t`` (every bundle ``tar -t``) and gives its recorded size, every original
file's bytes are live or archived (and archived once), every event row is in live
or a month DB exactly once (or, before the next pass settles a stopped one, at
least once).
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from helpers import entries, gunzip_entry, live_files


@dataclass
class Tally:
    """Faults made and checks passed after them, by kind, for the summary line."""

    faults: int = 0
    checks: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)

    def line(self, what: str, fault: str) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind.items()))
        return f"{what}: {self.faults} {fault}, {self.checks} checks passed after them ({kinds})"


def event_rows(site: Path) -> Counter[tuple[object, ...]]:
    """Every event row in live and in every month DB, as a multiset."""
    rows: Counter[tuple[object, ...]] = Counter()
    for db_path in [site / "state.db", *sorted((site / "archive" / "events").glob("*.db"))]:
        with sqlite3.connect(db_path) as db:
            rows.update(db.execute("SELECT * FROM events"))
    return rows


@dataclass(frozen=True)
class Originals:
    """A site as the demo wrote it."""

    files: dict[str, str]  # relpath -> sha256
    rows: Counter[tuple[object, ...]]

    @classmethod
    def of(cls, site: Path) -> Originals:
        return cls(live_files(site), event_rows(site))


def check_site(
    site: Path, originals: Originals, tally: Tally | None = None, *, settled: bool = True
) -> None:
    """Everything a fault must not have cost. Not ``settled`` (right after an
    operation stopped, before the next pass): an event row may be in a month DB
    and still live (copied, not yet deleted), never missing or altered."""
    leftovers = [p for p in site.rglob("*") if p.name.endswith((".partial", ".restore-partial"))]
    assert leftovers == [], leftovers
    for db_path in [
        site / "state.db",
        site / "archive" / "coldkeep.db",
        *(site / "archive" / "events").glob("*.db"),
    ]:
        with sqlite3.connect(db_path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",), db_path
    rows = entries(site)
    files = site / "archive" / "files"
    gz_on_disk = sorted([*files.rglob("*.gz"), *files.rglob("*.tar")])
    entered = sorted({site / "archive" / e["gz_path"] for e in rows})
    assert entered == gz_on_disk, (
        f"gzips without an entry: {sorted(set(gz_on_disk) - set(entered))}; "
        f"entries without a gzip: {sorted(set(entered) - set(gz_on_disk))}"
    )
    # The real gzip reads every gzip (one process for them all: it names the one
    # it cannot read), tar every bundle.
    gzips = [str(gz) for gz in gz_on_disk if gz.suffix != ".tar"]
    if gzips:
        tested = subprocess.run(["gzip", "-t", *gzips], check=False, capture_output=True, text=True)
        assert tested.returncode == 0, tested.stderr
    for tar in (gz for gz in gz_on_disk if gz.suffix == ".tar"):
        subprocess.run(["tar", "-tf", str(tar)], check=True, capture_output=True)
    per_content = Counter((e["relpath"], e["sha256"]) for e in rows)
    assert not per_content or max(per_content.values()) == 1, "a file's bytes are archived once"
    archived = {(e["relpath"], e["sha256"]) for e in rows}
    for e in rows:
        assert len(gunzip_entry(site / "archive", e)) == e["bytes"]
    live = live_files(site)
    for relpath, digest in originals.files.items():
        assert live.get(relpath) == digest or (relpath, digest) in archived, relpath
    rows_now = event_rows(site)
    if settled:
        assert rows_now == originals.rows, "every event row exactly once"
    else:
        assert set(rows_now) == set(originals.rows), "every event row, unaltered"
        assert all(rows_now[r] >= n for r, n in originals.rows.items()), "no event row lost"
    if tally is not None:
        tally.checks += 6
