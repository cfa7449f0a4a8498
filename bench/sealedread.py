"""Reading sealed remote copies back (core/remote/unseal.py, fetch.py): the same
archive shipped twice to a folder remote, once plain and once sealed to an age
key, every local copy dropped; each restore timed side by side, alternating,
best of ``--rounds``.

    python bench/sealedread.py [--quick] [--rounds N]

Rows:
  one big gzip          ``coldkeep restore --identity`` of a ~64 MiB JSONL file
                        whose only copy is its own sealed gzip (download, open
                        into a scratch, inflate, sha256) vs the same restore of
                        the plain copy, and vs ``age -d -i KEY | gunzip -c``
                        of the same object (no hashing, no fsync)
  bundle members        restore of every file of a bundle of ~20 KiB files, one
                        ranged GET of its stream each, sealed vs plain
  one member            bytes read from the remote for one ~20 KiB member of
                        that bundle, sealed (its stream) vs plain (its gzip)

Targets: sealed within 1.5x of plain for the big file (opening is one more pass
over the bytes, at age's speed) and for the members (an X25519 exchange per
stream); one member reads < member + 64 KiB.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from files import COLDKEEP, DAY_MS, site
from pyrage import x25519
from report import Row, met, print_table

from coldkeep.core.ops.demo import write_jsonl

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def keypair(work: Path) -> tuple[Path, str]:
    key = work / "key.txt"
    made = x25519.Identity.generate()
    key.write_text(f"{made}\n")
    return key, str(made.to_public())


def write_tree(live: Path, big: int, members: int) -> None:
    rnd = random.Random(7)
    old = int(time.time() * 1000) - 60 * DAY_MS
    write_jsonl(live / "big" / "one.jsonl", rnd, "big", big, old)
    for i in range(members):
        write_jsonl(live / "small" / f"f-{i:05d}.jsonl", rnd, "small", 20 << 10, old)
    for unit in ("big", "small"):
        (live / unit / ".closed").write_text("closed\n")


def shipped(work: Path, tree: Path, name: str, public: str | None) -> Path:
    ck = site(work / name, tree)
    remote = work / f"{name}-remote"
    remote.mkdir()
    seal = f'encrypt_to = ["{public}"]\n' if public else ""
    with (ck / "coldkeep.toml").open("a") as f:
        f.write(f'\n[remote]\nurl = "{remote.as_uri()}"\nsite = "b"\nkeep_local_days = 0\n{seal}')
    for command in ("pass", "ship"):
        subprocess.run(
            [str(COLDKEEP), command, "--config", str(ck / "coldkeep.toml")],
            check=True,
            capture_output=True,
        )
    assert not [p for p in (ck / "archive" / "files").rglob("*") if p.is_file()]
    return ck


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - start


def restore(ck: Path, glob: str, out: Path, key: Path | None) -> list[str]:
    shutil.rmtree(out, ignore_errors=True)
    ident = ["--identity", str(key)] if key else []
    cmd = [str(COLDKEEP), "restore", "--path", glob, "--to", str(out), *ident, "--json"]
    return [*cmd, "--config", str(ck / "coldkeep.toml")]


def best(cmds: dict[str, list[str]], rounds: int, before: dict[str, Path]) -> dict[str, float]:
    """Each command's best time of ``rounds``, the order alternating each round."""
    got: dict[str, float] = {k: float("inf") for k in cmds}
    names = list(cmds)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            shutil.rmtree(before[name], ignore_errors=True)
            got[name] = min(got[name], timed(cmds[name]))
    return got


def sealed_object(ck: Path, path_like: str) -> tuple[str, int]:
    """(the stored key under the site, the stored size) of the first object like it."""
    out = subprocess.run(
        ["sqlite3", "-json", str(ck / "archive" / "coldkeep.db"),
         "SELECT coalesce(stored_as, path) AS k, bytes FROM remote_objects "
         f"WHERE path LIKE '{path_like}' ORDER BY path LIMIT 1"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    row = json.loads(out)[0]
    return str(row["k"]), int(row["bytes"])


def measure(work: Path, quick: bool, rounds: int) -> list[Row]:
    tree = work / "tree"
    big, members = (1 * MIB, 30) if quick else (64 * MIB, 1000)
    write_tree(tree, big, members)
    key, public = keypair(work)
    plain = shipped(work, tree, "plain", None)
    sealed = shipped(work, tree, "sealed", public)
    out = {"plain": work / "out-plain", "sealed": work / "out-sealed", "age": work / "out-age"}
    stored, _ = sealed_object(sealed, "files/big/%")
    obj = work / "sealed-remote" / "b" / stored
    # Without the age CLI the anchor is the gunzip alone (the row says so).
    age = f"age -d -i {key} {obj} | gunzip -c" if shutil.which("age") else f"gunzip -c < {obj}"
    cmds = {
        "plain": restore(plain, "big/**", out["plain"], None),
        "sealed": restore(sealed, "big/**", out["sealed"], key),
        "age": ["bash", "-c", f"{age} > /dev/null 2>&1 || true"],
    }
    big_t = best(cmds, rounds, out)
    small_t = best(
        {
            "plain": restore(plain, "small/**", out["plain"], None),
            "sealed": restore(sealed, "small/**", out["sealed"], key),
        },
        rounds,
        out,
    )
    size = f"{big // MIB} MiB"
    return [
        (
            f"restore one {size} file, sealed vs plain (s)",
            f"{big_t['sealed']:.2f}",
            f"{big_t['plain']:.2f}",
            f"{big_t['sealed'] / big_t['plain']:.2f}x",
            "<= 1.5x",
            met(big_t["sealed"] <= 1.5 * big_t["plain"]),
        ),
        (
            "  the same vs " + ("age -d | gunzip -c (s)" if shutil.which("age") else "(no age)"),
            f"{big_t['sealed']:.2f}",
            f"{big_t['age']:.2f}",
            f"{big_t['sealed'] / big_t['age']:.2f}x",
            "",
            "",
        ),
        (
            f"restore {members} bundle members, sealed vs plain (s)",
            f"{small_t['sealed']:.2f}",
            f"{small_t['plain']:.2f}",
            f"{small_t['sealed'] / small_t['plain']:.2f}x",
            "<= 1.5x",
            met(small_t["sealed"] <= 1.5 * small_t["plain"]),
        ),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small data, under a minute")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print(f"coldkeep: {COLDKEEP}", flush=True)
    (ROOT / "bench" / ".data").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "bench" / ".data") as tmp:
        print_table(measure(Path(tmp), args.quick, 1 if args.quick else args.rounds))


if __name__ == "__main__":
    sys.exit(main())
