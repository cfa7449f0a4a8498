"""Client-side sealing (core/remote/sealing.py) against the age CLI, side by side
in one run.

    python bench/sealing.py [--quick] [--rounds N]

Rows (each best of ``--rounds``, coldkeep and the anchor alternating):
  sealing one gzip     a 64 MiB file of incompressible bytes (what a gzip is to
                       a cipher) sealed to 2 recipients, file to file:
                       ``seal_spans`` in this process (the plaintext's and the
                       ciphertext's sha256 in the same pass) vs ``age -r -r -o``
                       (no hashing), MB/s of plaintext
  opening it           ``open_sealed`` (the plaintext's sha256 as it goes) vs
                       ``age -d -i``
  sealing a bundle     the same 64 MiB cut as a bundle of 20 KiB members with a
                       512-byte tar header before each: a stream per member
                       (3,197, each with its header) vs ``age`` sealing the file
                       as one stream; members/s beside the small files'
                       archiving rate (about 1,000 files/s)
  hashing floor        the ciphertext side alone: ``sha256sum`` of the sealed
                       gzip, the read-and-hash an unsealed ship already pays

Where ``age`` is missing (Debian: ``apt-get install age``; ``make bench``
installs it as root), the anchor is ``sha256sum`` of the same file and the row
says so. Targets: sealing at >= 250 MB/s, the rate files are archived at
(docs/performance.md), and a bundle's members at >= 1,000/s, the rate small
files are: sealing is not what holds a ship back.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyrage import x25519
from report import Row, met, print_table

from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.codec import Span
from coldkeep.core.base.recipients import parse_recipients
from coldkeep.core.remote.sealing import (
    Identities,
    load_identities,
    open_sealed,
    seal_spans,
    tile,
)

MIB = 1 << 20
TARGET_MB_S = 250.0
TARGET_MEMBERS_S = 1_000
MEMBER = 20 * 1024
TAR_HEADER = 512


def write_data(path: Path, size: int) -> None:
    rnd = random.Random(7)
    with path.open("wb") as f:
        left = size
        while left:
            n = min(left, 4 * MIB)
            f.write(rnd.randbytes(n))
            left -= n


def bundle_members(size: int) -> list[Span]:
    members, at = [], 0
    while at + TAR_HEADER + MEMBER <= size:
        members.append(Span(at + TAR_HEADER, MEMBER))
        at += TAR_HEADER + MEMBER
    return members


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best(
    rounds: int, ours: Callable[[], object], anchor: Callable[[], object]
) -> tuple[float, float]:
    """Best of ``rounds`` each, the two alternating (which goes first too)."""
    a, b = [], []
    for i in range(rounds):
        if i % 2:
            b.append(timed(anchor))
            a.append(timed(ours))
        else:
            a.append(timed(ours))
            b.append(timed(anchor))
    return min(a), min(b)


class Bench:
    def __init__(self, work: Path, size: int) -> None:
        self.work, self.size = work, size
        self.src = work / "big.gz"
        write_data(self.src, size)
        keys = [x25519.Identity.generate() for _ in range(2)]
        self.recipients = parse_recipients([str(k.to_public()) for k in keys])
        self.keyfile = work / "key.txt"
        self.keyfile.write_text(f"# public key: {keys[0].to_public()}\n{keys[0]}\n")
        self.ids: Identities = load_identities(self.keyfile)
        self.age = shutil.which("age")

    def seal(self, spans: tuple[Span, ...] | None, dst: Path) -> int:
        with self.src.open("rb") as f, dst.open("wb") as out:
            sealed = seal_spans(f, out, self.recipients, spans, what="bench", cancel=CancelToken())
        return sealed.sealed.bytes

    def open(self, sealed: Path, dst: Path) -> None:
        length = sealed.stat().st_size
        with sealed.open("rb") as f, dst.open("wb") as out:
            open_sealed(f, out, self.ids, length=length, what="bench", sealed_to=None,
                        cancel=CancelToken())  # fmt: skip

    def run(self, cmd: list[str]) -> None:
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    def age_seal(self, dst: Path) -> list[str]:
        if self.age is None:
            return ["sha256sum", str(self.src)]
        rs = [a for k in self.recipients.keys for a in ("-r", k)]
        return [self.age, *rs, "-o", str(dst), str(self.src)]

    def age_open(self, sealed: Path, dst: Path) -> list[str]:
        if self.age is None:
            return ["sha256sum", str(sealed)]
        return [self.age, "-d", "-i", str(self.keyfile), "-o", str(dst), str(sealed)]


def _row(what: str, anchor: str, size: int, ours: float, theirs: float) -> Row:
    mb_s = size / 1e6 / ours
    return (
        f"{what} (vs {anchor}, same run)",
        f"{mb_s:,.0f} MB/s",
        f"{size / 1e6 / theirs:,.0f} MB/s",
        f"{theirs / ours:.2f}",
        f">= {TARGET_MB_S:.0f} MB/s",
        met(mb_s >= TARGET_MB_S),
    )


def measure(work: Path, quick: bool, rounds: int = 5) -> list[Row]:
    size = 4 * MIB if quick else 64 * MIB
    b = Bench(work, size)
    label = f"{size // MIB} MiB"
    sealed, back, theirs = work / "s.age", work / "back", work / "t.age"
    anchor = "age -r" if b.age else "sha256sum"
    ours, age = best(rounds, lambda: b.seal(None, sealed), lambda: b.run(b.age_seal(theirs)))
    rows = [_row(f"sealing one {label} gzip, 2 recipients", anchor, size, ours, age)]
    anchor_d = "age -d" if b.age else "sha256sum"
    ours, age = best(rounds, lambda: b.open(sealed, back), lambda: b.run(b.age_open(sealed, back)))
    rows.append(_row("opening it, plaintext hashed", anchor_d, size, ours, age))
    members = bundle_members(size)
    spans = tile(size, members)
    ours, age = best(rounds, lambda: b.seal(spans, sealed), lambda: b.run(b.age_seal(theirs)))
    rows.append(
        (
            f"sealing a {label} bundle, a stream per member ({len(members):,} of 20 KiB)"
            f" (vs {anchor}, one stream, same run)",
            f"{size / 1e6 / ours:,.0f} MB/s, {len(members) / ours:,.0f} members/s",
            f"{size / 1e6 / age:,.0f} MB/s",
            f"{age / ours:.2f}",
            f">= {TARGET_MEMBERS_S:,} members/s",
            met(len(members) / ours >= TARGET_MEMBERS_S),
        )
    )
    ours, sha = best(rounds, lambda: b.seal(None, sealed), lambda: b.run(["sha256sum", str(b.src)]))
    rows.append(_row(f"sealing one {label} gzip", "sha256sum of it", size, ours, sha))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 MiB instead of 64")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f}", flush=True)
    root = Path(__file__).resolve().parent / ".data"
    root.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        print_table(measure(Path(tmp), args.quick, args.rounds))


if __name__ == "__main__":
    main()
