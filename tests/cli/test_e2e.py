"""The whole life of a demo site through the real CLI, as an operator would run it:
plan -> pass -> verify -> restore a unit -> pass (the restored files stay) ->
restore elsewhere -> rebuild-manifest. Not a byte is lost on the way."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers import ck, ck_json, cli_ok, entries, gunzip_entry, live_files, sha


def test_an_operators_day_loses_nothing(tmp_path: Path) -> None:
    site = tmp_path / "demo"
    cli_ok("demo", str(site), "--scale", "0.04", "--no-console")
    originals = live_files(site)

    plan = ck_json(site, "plan")["result"]
    assert plan["files"]["eligible"] > 10 and plan["events"]["rows"] > 1000
    assert len(plan["recovery"]["orphans"]) == 3 and len(plan["recovery"]["partials"]) == 1
    assert live_files(site) == originals, "plan writes nothing"

    summary = ck_json(site, "pass")["result"]
    assert summary["status"] == "ok"
    # One was adopted. (Once in CI, on 2026-12-07, one fewer was archived and
    # never reproduced in 24 runs under load: the pass's own words say why.)
    said = {"pass": summary["files"], "recovery": summary["recovery"], "plan": plan["files"]}
    assert summary["files"]["archived"] == plan["files"]["eligible"] - 1, said
    assert summary["recovery"]["orphans_adopted"] == 1
    assert summary["events"]["moved"] == plan["events"]["rows"]

    verify = ck_json(site, "verify")["result"]
    assert verify["problems"] == [] and verify["checked"] == len(entries(site))

    unit = next(e["unit"] for e in entries(site) if e["status"] == "archived")
    restored = ck_json(site, "restore", "--unit", unit)["result"]
    assert restored and all(r["result"] == "restored" for r in restored)
    for r in restored:
        assert sha(Path(r["target"]).read_bytes()) == originals[r["relpath"]]

    second = ck_json(site, "pass")["result"]
    assert second["files"]["skipped"]["held"] == len(restored)
    assert all(Path(r["target"]).exists() for r in restored), "held files stay live"

    elsewhere = tmp_path / "elsewhere"
    copies = ck_json(site, "restore", "--unit", unit, "--to", str(elsewhere))["result"]
    assert {Path(c["target"]).parent.is_relative_to(elsewhere) for c in copies} == {True}

    rebuilt = tmp_path / "rebuilt.db"
    ck(site, "rebuild-manifest", "--out", str(rebuilt))
    keys = ("relpath", "bytes", "sha256", "gz_path", "gz_bytes", "mtime_ns", "mode")
    with sqlite3.connect(rebuilt) as db:
        again = {r for r in db.execute(f"SELECT {', '.join(keys)} FROM entries")}
    assert again == {tuple(e[k] for k in keys) for e in entries(site)}

    # Every original file is live, or in an entry whose gzip gunzip restores.
    archived: dict[str, set[str]] = {}
    for e in entries(site):
        assert sha(gunzip_entry(site / "archive", e)) == e["sha256"]
        archived.setdefault(e["relpath"], set()).add(e["sha256"])
    now_live = live_files(site)
    for relpath, digest in originals.items():
        assert now_live.get(relpath) == digest or digest in archived.get(relpath, set()), relpath
