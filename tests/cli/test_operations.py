"""Every operation is declared once, in tui/operations: each entry is a command
with its entry's help and options (then --wait where it takes the archive lock,
--json and --config), its console action is a key of the console in its place,
every result it returns has its words, and the --json documents built from the
results' to_dict() have the keys docs/json.md gives them."""

from __future__ import annotations

from pathlib import Path

import pytest

from coldkeep.tui.cli.main import load_command
from coldkeep.tui.console.kit.actions import ACTIONS, BY_NAME, bindings
from coldkeep.tui.operations.jobs import WORDS as JOB_WORDS
from coldkeep.tui.operations.registry import BY_ACTION, OPERATIONS

from helpers import ck_json, cli_ok


def test_every_entry_is_a_command_with_its_options_then_the_shared_ones() -> None:
    for op in OPERATIONS:
        command = load_command(op.name)
        assert command.help == op.help
        names = [p.name for p in command.params]
        wait = ["wait"] if op.locks else []
        assert names == [*(p.name for p in op.params), *wait, "json_out", "config"], op.name


def test_every_entry_action_is_a_console_key_in_its_place() -> None:
    places = [a.place for a in ACTIONS]
    assert places == sorted(places) and len(set(places)) == len(places)
    keys = {b.action: b.key for b in bindings()}
    for name, op in BY_ACTION.items():
        assert op.console is not None and BY_NAME[name] is op.console.action
        assert keys[name] == op.console.action.keys


def test_every_result_type_has_its_words_once() -> None:
    kinds = [w.kind for op in OPERATIONS for w in op.words] + [JOB_WORDS.kind]
    assert len(set(kinds)) == len(kinds), "a result type's words are declared once"
    for kind in kinds:
        assert callable(getattr(kind, "to_dict", None)), f"{kind.__name__} has no to_dict()"


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    cli_ok("demo", str(site), "--scale", "0.02", "--no-console")
    return site


def test_the_json_documents_keep_their_keys(site: Path, tmp_path: Path) -> None:
    adopted = ck_json(site, "adopt", "--all")
    assert adopted["command"] == "adopt" and adopted["ok"] is True
    assert [set(o) for o in adopted["result"]] == [{"gz", "relpath", "outcome"}] * 3
    swept = ck_json(site, "sweep")["result"]
    assert len(swept) == 1 and swept[0].endswith(".partial")
    assert set(ck_json(site, "recover")["result"]) >= {"partials_removed", "passes_interrupted"}
    month = ck_json(site, "plan")["result"]["events"]["months"][0]["month"]
    ck_json(site, "pass")
    checkpoint = ck_json(site, "checkpoint")["result"]
    assert set(checkpoint) == {
        "at_ms", "busy", "log", "checkpointed", "ms", "wal_before", "wal_after", "mode", "error",
    }  # fmt: skip
    verified = ck_json(site, "verify")["result"]
    assert set(verified) == {
        "checked", "ok", "bytes", "complete", "resumed_from", "seconds", "problems", "remote_only",
    }  # fmt: skip
    rebuilt = ck_json(site, "rebuild-manifest", "--out", str(tmp_path / "rebuilt.db"))["result"]
    assert set(rebuilt) == {"out", "entries", "bytes", "unreadable", "refused"}
    assert rebuilt["out"] == str(tmp_path / "rebuilt.db") and rebuilt["entries"] > 0
    restored = ck_json(site, "restore-events", "--month", month)["result"]
    assert set(restored) == {"restored", "already_live", "conflicts", "months", "refused"}
    [record] = ck_json(site, "history", "--limit", "1")["result"]
    assert set(record) == {
        "id", "at", "user", "host", "pid", "origin", "action", "args", "outcome", "detail",
    }  # fmt: skip
