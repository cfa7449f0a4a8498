"""``coldkeep fleet status``: five hosts shipping to one folder remote, each in
the state its heartbeat earns (a stale one, one with verify failures, one with
a backlog standing, one whose ship job failed, a healthy quiet one), worst
first, with the reason in words; exit 1 while any is not ok. A heartbeat the
site's key did not sign is not believed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from helpers import cli
from sickfleet import SITES, make_sick, ship


def status(remote: Path, *args: str) -> tuple[int, dict[str, dict[str, object]]]:
    run = cli("fleet", "status", "--remote", remote.as_uri(), "--json", *args)
    doc = json.loads(run.stdout)
    return run.returncode, {str(s["site"]): s for s in doc["result"]["sites"]}


def reasons(site: dict[str, object]) -> list[str]:
    said = site["reasons"]
    assert isinstance(said, list)
    return [str(r) for r in said]


def test_each_host_is_in_the_state_its_heartbeat_earns_worst_first(tmp_path: Path) -> None:
    remote = tmp_path / "bucket"
    remote.mkdir()
    for name in SITES:
        asyncio.run(ship(tmp_path, remote, name))
    code, sites = status(remote)
    assert code == 0 and {s["state"] for s in sites.values()} == {"ok"}, sites

    make_sick(tmp_path, remote)
    code, sites = status(remote)
    assert code == 1
    got = {name: (s["state"], "; ".join(reasons(s))) for name, s in sites.items()}
    assert got["healthy"] == ("ok", "")
    assert got["stale"][0] == "silent" and "no heartbeat for 3d" in got["stale"][1]
    assert got["damaged"][0] == "critical"
    assert "2 archive files failed verify" in got["damaged"][1]
    assert got["jobfail"] == ("critical", "ship failed: the bucket said 503")
    assert got["backlog"][0] == "warn"
    assert "400 files and 200,000 rows waiting for 6d" in got["backlog"][1]
    assert list(sites)[-1] == "healthy", "worst first, the healthy last"
    assert [sites[n]["state"] for n in list(sites)[:2]] == ["critical", "critical"]

    text = cli("fleet", "status", "--remote", remote.as_uri())
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[-1].endswith("2 critical, 1 silent, 1 warn, 1 ok"), lines
    assert lines[0].startswith("!! critical") and lines[-2].startswith("ok ok       healthy")
    assert "??" in text.stdout, "the state is marked without colour too"

    # The operator's own rule: a backlog is a warning after 10 days, not 3;
    # from the option, from a rules file named, from their own rules file.
    _, sites = status(remote, "--backlog-days", "10")
    assert sites["backlog"]["state"] == "ok"
    rules = tmp_path / "rules.toml"
    rules.write_text("[health]\nbacklog_days = 10\nsilent_after_hours = 100\n")
    _, sites = status(remote, "--rules", str(rules))
    # Silent after twice its interval (15 min) still: the hours are the most it waits.
    assert sites["backlog"]["state"] == "ok" and sites["stale"]["state"] == "silent", sites
    _, sites = status(remote, "--rules", str(rules), "--backlog-days", "5")
    assert sites["backlog"]["state"] == "warn", "an option wins over the file"
    own = tmp_path / "xdg" / "coldkeep" / "fleet.toml"
    own.parent.mkdir(parents=True)
    own.write_text(rules.read_text())
    run = cli("fleet", "status", "--remote", remote.as_uri(), "--json",
              env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})  # fmt: skip
    assert {s["site"]: s["state"] for s in json.loads(run.stdout)["result"]["sites"]}[
        "backlog"
    ] == "ok"

    # A rule it does not know, or a value it cannot use: one line, exit 2.
    for written, said in (
        ("[health]\nbacklog_day = 10\n", "health.backlog_day: not a rule (the rules: "),
        ("[health]\nbacklog_days = -1\n", "health.backlog_days = -1: give a number, at least 0"),
        ("[health\n", "cannot read the fleet's health rules"),
    ):
        rules.write_text(written)
        run = cli("fleet", "status", "--remote", remote.as_uri(), "--rules", str(rules))
        assert run.returncode == 2 and said in run.stderr and str(rules) in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1


def test_a_heartbeat_the_site_did_not_sign_is_not_believed(tmp_path: Path) -> None:
    remote = tmp_path / "bucket"
    remote.mkdir()
    asyncio.run(ship(tmp_path, remote, "healthy"))
    [beat] = (remote / "healthy" / "heartbeat").iterdir()
    doc = json.loads(beat.read_bytes())
    doc["heartbeat"]["verify_failed"] = 0
    doc["heartbeat"]["at"] += 1  # a newer one, forged by whoever can write the bucket
    forged = beat.with_name(f"h{doc['heartbeat']['at']:013d}-00000000.json")
    forged.write_text(json.dumps(doc))
    beat.unlink()

    code, sites = status(remote)
    assert code == 1 and sites["healthy"]["state"] == "critical", sites
    assert "signature does not verify" in str(sites["healthy"]["reasons"])
