"""``coldkeep find PATTERN`` and ``coldkeep versions PATH`` through the real CLI,
on a real site: a file's versions in a gzip, in a bundle, on the remote tier
alone (a ``file://`` remote after a ship that dropped the local copies), expired
by retention, under a legal hold; names with a newline and bytes that are not
UTF-8; nothing found; nothing written."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import DAY_NS, ck, ck_json, write_raw

ODD = [b"u2/two\nlines.log", b"u2/r\xe9sum\xe9.log"]


def _write(site: Path, rel: bytes, data: bytes) -> None:
    write_raw(site / "live", rel, data, time.time_ns() - 30 * DAY_NS)


def _config(site: Path, extra: str = "") -> None:
    site.mkdir(parents=True, exist_ok=True)
    (site / "coldkeep.toml").write_text(
        'live_root = "live"\narchive_root = "archive"\nmode = "on"\n'
        '[files]\ninclude = ["**"]\nmin_age_days = 1\nbundle_below = 1000\n'
        '[remote]\nurl = "file:remote"\nsite = "s"\nkeep_local_days = 0\n' + extra
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """u1/a.jsonl archived twice (the first version's gzip shipped and its local
    copy dropped, the second a local gzip, both held), u1/small.log in a bundle
    shipped too, u3/old.log expired, then u1/c.log and u1/d.log bundled and the odd names
    archived after the ship (local)."""
    site = tmp_path_factory.mktemp("find") / "site"
    _config(site, '[retention]\nunits = { "u3" = 1 }\n')
    _write(site, b"u1/a.jsonl", b'{"v": 1}\n' * 200)
    _write(site, b"u1/small.log", b"small\n")
    _write(site, b"u3/old.log", b"old\n" * 500)
    ck(site, "pass")
    ck(site, "expire", "--yes")
    ck(site, "ship")
    _write(site, b"u1/a.jsonl", b'{"v": 2}\n' * 300)
    _write(site, b"u1/c.log", b"c\n")
    _write(site, b"u1/d.log", b"d\n")
    for name in ODD:
        _write(site, name, b"odd " + name)
    _config(site)
    ck(site, "pass")
    ck(site, "hold", "add", "--path", "u1/a.jsonl", "--reason", "case 7")
    return site


def _by_path(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for v in doc["result"]["versions"]:
        out.setdefault(v["relpath"], []).append(v)
    return out


def test_find_tells_where_every_version_is(site: Path) -> None:
    found = _by_path(ck_json(site, "find", "**"))
    assert [v["location"] for v in found["u1/a.jsonl"]] == ["gzip", "remote"], "newest first"
    assert [v["bytes"] for v in found["u1/a.jsonl"]] == [2700, 1800]
    assert all(v["hold"]["reason"] == "case 7" for v in found["u1/a.jsonl"])
    assert [v["location"] for v in found["u1/small.log"]] == ["remote"]
    assert [(v["location"], v["member_offset"] is not None) for v in found["u1/c.log"]] == [
        ("bundle", True)
    ]
    [old] = found["u3/old.log"]
    assert old["location"] == "expired" and old["expired_at"] is not None
    assert old["hold"] is None and old["copies"] == "none"

    text = ck(site, "find", "u1/*").stdout.splitlines()
    assert len(text) == 6 and text[-1] == "5 versions of 4 files (2 remote only, 2 held)"
    assert "held:1" in text[0] and "gzip" in text[0] and text[0].endswith("  u1/a.jsonl")
    assert "remote" in text[1] and "bundle" in text[2] and text[2].endswith("u1/c.log")


def test_versions_of_one_file_newest_first(site: Path) -> None:
    doc = ck_json(site, "versions", "u1/a.jsonl")["result"]
    assert doc["relpath"] == "u1/a.jsonl"
    assert [v["location"] for v in doc["versions"]] == ["gzip", "remote"]
    lines = ck(site, "versions", str(site / "live" / "u1" / "a.jsonl")).stdout.splitlines()
    assert lines[-1] == "2 versions of u1/a.jsonl (1 remote only, 2 held)"
    [expired] = ck_json(site, "versions", "u3/old.log")["result"]["versions"]
    assert expired["status"] == "expired"
    assert "expired" in ck(site, "versions", "u3/old.log").stdout


def test_a_word_without_wildcards_is_part_of_a_path_at_any_depth(site: Path) -> None:
    found = _by_path(ck_json(site, "find", "a.json"))
    assert set(found) == {"u1/a.jsonl"}
    assert ck_json(site, "find", "**/a.jsonl")["result"]["match"] == "glob"


def test_odd_names_are_found_escaped_in_text_and_exact_in_json(site: Path) -> None:
    doc = ck_json(site, "find", "u2/*")
    assert sorted(os.fsencode(v["relpath"]) for v in doc["result"]["versions"]) == sorted(ODD)
    text = ck(site, "find", "u2/*").stdout
    assert "u2/two\\nlines.log" in text and "u2/r\\xe9sum\\xe9.log" in text
    assert len(text.splitlines()) == 3, "one line per version, and the count"
    for raw in ODD:
        name = os.fsdecode(raw)
        [v] = ck_json(site, "versions", name)["result"]["versions"]
        assert v["relpath"] == name
    [v] = ck_json(site, "find", os.fsdecode(b"\xe9sum"))["result"]["versions"]
    assert os.fsencode(v["relpath"]) == ODD[1]
    [v] = ck_json(site, "find", "**/r?sum?.log")["result"]["versions"]
    assert os.fsencode(v["relpath"]) == ODD[1], "a byte that is not UTF-8 is one character"


def test_find_and_versions_offer_no_wait_for_a_lock_they_never_take(site: Path) -> None:
    for args in (("find", "u1"), ("versions", "u1/a.jsonl")):
        assert "--wait" not in ck(site, args[0], "--help").stdout
        refused = ck(site, *args, "--wait", "5", check=2).stderr
        assert "No such option '--wait'" in refused, refused


def test_nothing_found_is_one_line_and_exit_2(site: Path, tmp_path: Path) -> None:
    run = ck(site, "find", "*.jsonl", check=2)
    assert run.stdout == "" and len(run.stderr.splitlines()) == 1
    assert "'**/*.jsonl' looks at any depth" in run.stderr
    doc = json.loads(ck(site, "versions", "u1/nothing.log", "--json", check=2).stdout)
    assert doc["ok"] is False and "no archived version of 'u1/nothing.log'" in doc["error"]
    assert "not inside live_root" in ck(site, "versions", "/etc/passwd", check=2).stderr
    assert "unclosed [" in ck(site, "find", "u1/[ab", check=2).stderr

    fresh = tmp_path / "fresh"
    _config(fresh)
    (fresh / "live").mkdir()
    run = ck(fresh, "find", "**", check=2)
    assert "does not exist yet (no pass has run)" in run.stderr
    assert not (fresh / "archive" / "coldkeep.db").exists(), "nothing written"


def test_fleet_finds_across_every_site_of_the_remote_prefix(site: Path, tmp_path: Path) -> None:
    """A second site shipping to the same folder: ``find --fleet`` from the first
    finds in both, each line naming its site, from their manifest snapshots."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "coldkeep.toml").write_text(
        'live_root = "live"\narchive_root = "archive"\nmode = "on"\n'
        '[files]\ninclude = ["**"]\nmin_age_days = 1\n'
        f'[remote]\nurl = "file://{site / "remote"}"\nsite = "t"\n'
    )
    _write(other, b"w/a.jsonl", b"other site\n")
    ck(other, "pass")
    ck(other, "ship")
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = ck(site, "find", "--fleet", "**/a.jsonl", "--json", env=cache)
    doc = json.loads(run.stdout)["result"]
    assert set(doc["sites"]) == {"s", "t"} and doc["problems"] == {}
    assert [v["relpath"] for v in doc["sites"]["t"]["versions"]] == ["w/a.jsonl"]
    assert {v["relpath"] for v in doc["sites"]["s"]["versions"]} == {"u1/a.jsonl"}
    lines = ck(site, "find", "--fleet", "w/*", env=cache).stdout.splitlines()
    assert lines[0].startswith("t  ") and lines[0].endswith("w/a.jsonl")
    assert lines[-1] == "1 version of 1 file at 1 site"
    nothing = ck(site, "find", "--fleet", "nosuch", env=cache, check=2)
    assert "at any of the 2 sites under" in nothing.stderr
