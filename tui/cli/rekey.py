"""``coldkeep rekey``: the remote objects sealed again to ``[remote] encrypt_to``'s
recipients, after they changed (remote/rekey.py does it; this says it).

Without ``--yes`` it only says what would be sealed again and from where; with
it, objects only the remote holds need ``--identity``, the key they are sealed
to now.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_FAILED, EXIT_OK
from coldkeep.core.remote.rekey import RekeyPlan, RekeyReport

from ..operations.spec import IDENTITY_HELP
from ..text.fmt import cut, plural
from .kit import command, ctx_for, identities_for, run_command


def _plan_text(plan: RekeyPlan) -> str:
    if not plan.items:
        return f"every object is sealed to {plan.sealed_to}: nothing to do"
    local = sum(i.source == "local" for i in plan.items)
    lines = [
        f"{plural(len(plan.items), 'object')} to seal again to {plan.sealed_to}: "
        f"{local} from the local copy, {len(plan.items) - local} from the remote one"
        + (f" ({plan.needing_identity} need --identity)" if plan.needing_identity else "")
        + "; coldkeep rekey --yes does it"
    ]
    lines += cut(
        [
            f"  {i.path}  ({f'sealed to {i.sealed_to}' if i.sealed_to else 'unsealed'}; "
            f"from {i.source})"
            for i in plan.items
        ]
    )
    return "\n".join(lines)


def _report_text(r: RekeyReport) -> str:
    lines = [f"{plural(len(r.resealed), 'object')} sealed again"]
    if r.old_kept:
        lines[0] += (
            f"; {len(r.old_kept)} old copies kept by the bucket's lock, tracked "
            "(the first ship after their lock ends deletes them)"
        )
    if r.expired:
        lines.append(
            f"{plural(len(r.expired), 'object')} past their retention left for expiry, not "
            "sealed again (coldkeep expire deletes them)"
        )
    if r.needs_identity:
        lines.append(
            f"{plural(len(r.needs_identity), 'object')} only the remote holds, sealed to "
            f"{', '.join(r.identity_for)}, not done: give --identity FILE with one of the "
            "keys they are sealed to now"
        )
    lines += [f"PROBLEM: {p}" for p in r.problems]
    return "\n".join(lines)


@click.command()
@click.option("--yes", is_flag=True, help="Seal them again (without it: the plan only).")
@click.option("--identity", type=click.Path(path_type=Path), metavar="FILE", help=IDENTITY_HELP)
@command()
def rekey(yes: bool, identity: Path | None, config: Path | None, json_out: bool) -> None:
    """Seal the remote objects again to [remote] encrypt_to's recipients.

    What ships is sealed to the recipients configured now; after they change,
    this seals the older objects again (or the ones shipped unsealed): from the
    local copy where there is one, else from the remote copy opened with
    --identity. Age cannot give an object new recipients in place, so each one
    is uploaded again under a new key, locked and held as the old one was or
    should be, and the old one deleted after (one a bucket's Object Lock keeps
    is tracked, and deleted by the first ship after its lock ends). Objects
    past their retention are left for expiry."""
    ctx = ctx_for(config, json_out)

    async def go() -> int:
        archiver = ctx.archiver()
        if not yes:
            plan = await archiver.rekey_plan()
            ctx.emit("rekey", True, plan.to_dict(), lambda: _plan_text(plan))
            return EXIT_OK
        archiver.sessions.identities = await asyncio.to_thread(identities_for, identity)
        report = await archiver.rekey()
        ctx.emit("rekey", not report.failed, report.to_dict(), lambda: _report_text(report))
        return EXIT_FAILED if report.failed else EXIT_OK

    run_command(go(), ctx)
