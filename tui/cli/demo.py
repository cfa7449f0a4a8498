"""``coldkeep demo``: a realistic demo site written into a directory (or the one
already there reused), then the console opened on it."""

from __future__ import annotations

from pathlib import Path

import click

from coldkeep.core.base.errors import EXIT_USAGE
from coldkeep.core.ops.demo import write_demo

from ..text.fmt import human
from .console import console
from .kit import fail

# What a newcomer's demo records: six weeks of nightly passes and backlog samples.
HISTORY_DAYS = 42


@click.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--seed", default=7, show_default=True, help="Same seed, same site.")
@click.option("--scale", default=1.0, show_default=True, help="Size factor (0.05: a quick one).")
@click.option("--no-console", is_flag=True, help="Only write the site.")
@click.option(
    "--history",
    "history_days",
    type=click.IntRange(0, 3660),
    default=None,
    help=f"Days of recorded passes and backlog samples, for the Trends screen "
    f"(default: {HISTORY_DAYS}; with --no-console, 0: the first pass is pass 1).",
)
def demo(
    directory: Path, seed: int, scale: float, no_console: bool, history_days: int | None
) -> None:
    """Write a realistic demo site into DIRECTORY and open the console on it.

    The site: a live tree of JSONL logs in a few hundred units, a state.db with
    ~500,000 events, an archive with planted crash leftovers, weeks of recorded
    nightly passes and backlog samples (nothing archived yet), and a
    coldkeep.toml (mode = "on"). An existing demo in DIRECTORY is reused as it is.
    """
    if history_days is None:
        history_days = 0 if no_console else HISTORY_DAYS
    config = directory / "coldkeep.toml"
    if config.exists():
        click.echo(f"Using the existing demo in {directory} (remove it for a fresh one).")
    else:
        if directory.is_dir() and any(directory.iterdir()):  # before a word of "Writing"
            fail(f"{directory} is not empty; give a new directory for the demo", EXIT_USAGE)
        click.echo(f"Writing a demo site into {directory} (seed {seed}, scale {scale}) ...")
        try:
            site = write_demo(directory, seed=seed, scale=scale, history_days=history_days)
        except FileExistsError as err:  # filled meanwhile
            fail(str(err), EXIT_USAGE)
        click.echo(
            f"  {site.files} live files ({human(site.bytes)}), {site.events:,} events in "
            f"{site.state_db.name}, crash leftovers planted in {site.archive.name}/"
        )
    click.echo(f"Config: {config}")
    if no_console:
        click.echo(
            f"Next: coldkeep plan --config {config}   then   coldkeep pass --config {config}"
        )
        return
    click.get_current_context().invoke(console, config=config)
