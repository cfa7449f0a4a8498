"""Odd names through the real CLI: a name is the operator's data, never the
terminal's instruction. Text output escapes control characters, undecodable
bytes and direction marks (``\\x1b``, ``\\xe9``); --json carries the exact name
(a byte that is not UTF-8 as the lone surrogate ``os.fsdecode`` gives it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from helpers import DAY_NS, ck
from s3kit import S3Site

NAMES = [
    b"u/esc\x1b]0;owned\x07\x1b[2J.log",
    b"u/r\xe9sum\xe9.log",
    b"u/[bold]markup[/bold].log",
    b"u/two\nlines.log",
    b"u/rtl\xe2\x80\xaegol.txt",
]


def make_site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    live = os.fsencode(site / "live")
    for raw in NAMES:
        path = live + b"/" + raw
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"data of " + raw)
        old = os.stat(path).st_mtime_ns - 30 * DAY_NS
        os.utime(path, ns=(old, old))
    (site / "coldkeep.toml").write_text(
        'live_root = "live"\narchive_root = "archive"\nmode = "on"\n'
        '[files]\ninclude = ["**"]\nmin_age_days = 1\n'
    )
    return site


def assert_safe(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, text
    assert "\udce9" not in text, text


def test_names_are_escaped_in_text_and_exact_in_json(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    for args in (["plan"], ["pass"], ["status"], ["verify"]):
        run = ck(site, *args)
        assert_safe(run.stdout + run.stderr)
    listed = ck(site, "restore", "--list", "--path", "**").stdout
    assert_safe(listed)
    assert "u/esc\\x1b]0;owned\\x07\\x1b[2J.log" in listed, listed
    assert "u/r\\xe9sum\\xe9.log" in listed and "u/two\\nlines.log" in listed, listed
    assert "u/[bold]markup[/bold].log" in listed and "u/rtl\\u202egol.txt" in listed
    assert len(listed.splitlines()) == len(NAMES) + 1, "one line per entry, and the count"

    doc = json.loads(ck(site, "restore", "--list", "--path", "**", "--json").stdout)
    assert sorted(os.fsencode(e["relpath"]) for e in doc["result"]) == sorted(NAMES)

    out = tmp_path / "out"
    restored = ck(site, "restore", "--path", "**", "--to", str(out))
    assert_safe(restored.stdout + restored.stderr)
    back = {
        os.path.relpath(os.path.join(d, n), os.fsencode(out))
        for d, _, ns in os.walk(os.fsencode(out))
        for n in ns
    }
    assert back == set(NAMES)


def test_an_s3_remote_refuses_a_name_that_is_not_utf8_alone(tmp_path: Path, s3: S3Site) -> None:
    """S3 keys are UTF-8: that one file stays local, said by name; the rest ships."""
    site = make_site(tmp_path)
    with (site / "coldkeep.toml").open("a") as config:
        config.write(
            f'bundle_below = 0\n[remote]\nurl = "s3://{s3.bucket}/p"\n'
            f'endpoint_url = "{s3.endpoint}"\nregion = "us-east-1"\nsite = "s"\n'
        )
    ck(site, "pass")
    uploaded = []
    for _ in range(2):  # the same, ship after ship: never a crash
        run = ck(site, "ship", "--json", check=1)
        assert_safe(run.stderr)
        result = json.loads(run.stdout)["result"]
        said = " ".join(str(p) for p in result["problems"])
        assert "r\\udce9sum\\udce9.log.gz': the name is not UTF-8 and S3 keys must be" in said
        assert said.count("not UTF-8") == 1, "only the one file"
        uploaded.append(result["uploaded"])
    # The others went (the newline's key is the test server's to take or not).
    assert uploaded[0] >= 3 and uploaded[1] == 0, uploaded
