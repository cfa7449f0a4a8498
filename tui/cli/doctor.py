"""``coldkeep doctor``: the checks of ``coldkeep.core.ops.doctor`` as one line each.

Exit codes: 0 nothing must be fixed (warnings may remain), 1 a check failed, 2
the config does not load. Unlike the other commands, a bad config is a finding
here, so ``--json`` still prints the findings document then. It never takes the
archive lock and changes nothing but its own probes, removed again.
"""

from __future__ import annotations

from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from coldkeep.core.ops.doctor import diagnose
from coldkeep.core.ops.doctorfinding import Finding

from .kit import command, ctx_for, run_command

LABEL = {"ok": "ok", "warn": "warn", "fail": "FAIL"}


def exit_code(findings: list[Finding]) -> int:
    if any(f.check == "config" and f.level == "fail" for f in findings):
        return EXIT_USAGE
    return EXIT_FAILED if any(f.level == "fail" for f in findings) else EXIT_OK


def text(findings: list[Finding]) -> str:
    width = max(len(f.check) for f in findings)
    lines = [
        f"{LABEL[f.level]:<4}  {f.check:<{width}}  {f.found}" + (f" — {f.fix}" if f.fix else "")
        for f in findings
    ]
    fails = sum(f.level == "fail" for f in findings)
    warns = sum(f.level == "warn" for f in findings)
    also = f" ({warns} warning{'s' * (warns != 1)})" if warns else ""
    if fails:
        lines.append(f"{fails} to fix{also}: fix the FAIL lines, then run coldkeep doctor again")
    else:
        lines.append(f"ready for a pass{also}")
    return "\n".join(lines)


@click.command()
@command()
def doctor(config: Path | None, json_out: bool) -> None:
    """Check a config and its environment before the first pass.

    One line per check: the config; live_root and archive_root and their
    filesystems; writing in archive_root; the manifest (a schema this coldkeep
    knows, quick_check clean, this live tree's, not lost); unlinking in the live tree; free
    space against the backlog; the live DB's WAL mode and (kind, ts) index; the
    remote (a probe object written and deleted); pigz and gzip. Takes no lock,
    changes nothing but its own probe files. Exit 1 when something must be fixed,
    2 when the config does not load."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        findings = await diagnose(ctx.config_path)
        code = exit_code(findings)
        result = {"findings": [f.to_dict() for f in findings]}
        ctx.emit("doctor", code == EXIT_OK, result, lambda: text(findings))
        return code

    run_command(go(), ctx)
