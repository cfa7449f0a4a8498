"""Retention and legal holds through the real CLI: what expired can still be
found (and is said to be gone), and a hold must cover something."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import ck, ck_json, cli_ok


@pytest.fixture(scope="module")
def expired_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo site after a pass and an expiry of every archived file (its files
    are weeks old, files_days is 1): the manifest holds only tombstones."""
    site = tmp_path_factory.mktemp("retention") / "site"
    cli_ok("demo", str(site), "--scale", "0.02", "--no-console")
    config = site / "coldkeep.toml"
    config.write_text(config.read_text() + "\n[retention]\nfiles_days = 1\n")
    ck(site, "pass")
    done = ck_json(site, "expire", "--yes")["result"]
    assert done["files"] > 0 and not done["problems"]
    return site


def listed(site: Path, *args: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = ck_json(site, "restore", "--list", *args)["result"]
    return found


def test_restore_list_shows_expired_entries_with_their_sha256_and_when(expired_site: Path) -> None:
    [first, *_] = everything = listed(expired_site, "--path", "**", "--all-versions")
    gone = [e for e in everything if e["status"] == "expired"]
    assert gone and all(e["expired_at"] for e in gone), everything[:3]
    unit = first["relpath"].split("/")[0]
    assert {e["id"] for e in listed(expired_site, "--unit", unit)} >= {first["id"]}
    assert [e["id"] for e in listed(expired_site, str(first["id"]))] == [first["id"]]
    assert first["id"] in [e["id"] for e in listed(expired_site, "--sha", first["sha256"][:12])]

    text = ck(expired_site, "restore", "--list", "--unit", unit).stdout
    line = next(x for x in text.splitlines() if x.split()[0] == str(first["id"]))
    assert "expired" in line and first["sha256"] in line, line
    assert "0 entries" not in text and "expired)" in text.splitlines()[-1]


def test_restoring_an_expired_entry_says_it_expired_and_exits_1(
    expired_site: Path, tmp_path: Path
) -> None:
    [gone, *_] = [e for e in listed(expired_site, "--path", "**") if e["status"] == "expired"]
    run = ck(expired_site, "restore", str(gone["id"]), "--to", str(tmp_path / "out"), check=1)
    assert "nothing selected" not in run.stdout
    assert "expired on " in run.stdout and "no copy is left" in run.stdout, run.stdout
    assert not (tmp_path / "out" / gone["relpath"]).exists()


def test_restoring_an_unknown_id_is_a_usage_error(expired_site: Path, tmp_path: Path) -> None:
    run = ck(expired_site, "restore", "987654", "--to", str(tmp_path / "out"), check=2)
    assert "no entry 987654" in run.stderr and run.stdout == ""
    assert "no entry 987654" in ck(expired_site, "restore", "--list", "987654", check=2).stderr


@pytest.mark.parametrize(
    ("target", "says"),
    [
        (("--unit", "nosuchunit"), "--unit nosuchunit: no archived file is in this unit now"),
        (("--path", "nomatch/**"), "--path 'nomatch/**': it matches no archived file"),
    ],
)
def test_a_hold_on_nothing_is_refused_unless_placed_ahead(
    expired_site: Path, target: tuple[str, str], says: str
) -> None:
    before = ck_json(expired_site, "hold", "list", "--all")["result"]
    refused = ck(expired_site, "hold", "add", *target, "--reason", "typo?", check=2)
    assert says in refused.stderr and "--ahead" in refused.stderr, refused.stderr
    assert "placed" not in refused.stdout
    assert ck_json(expired_site, "hold", "list", "--all")["result"] == before
    placed = ck_json(expired_site, "hold", "add", *target, "--reason", "next year", "--ahead")
    assert placed["result"]["target"] == target[1]


def test_a_hold_on_what_only_expired_is_refused_and_on_event_months_placed(
    expired_site: Path,
) -> None:
    [gone, *_] = listed(expired_site, "--path", "**")
    unit = gone["relpath"].split("/")[0]
    ck(expired_site, "hold", "add", "--unit", unit, "--reason", "too late", check=2)
    ck(expired_site, "hold", "add", "--path", "events/*", "--reason", "tax year")
    ck(expired_site, "hold", "add", "--unit", "events", "--reason", "every month")
