"""The ``coldkeep`` command line: a thin client of ``coldkeep.core``.

Exit codes: 0 done, 1 failed (or something needs attention), 2 bad usage or
config, 3 the archive lock is held by another process.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import click

from coldkeep.core.codec import Codec
from coldkeep.core.config import ConfigError, Settings, load_settings
from coldkeep.core.demo import write_demo
from coldkeep.core.filemove import Archived, FileMover
from coldkeep.core.layout import Layout
from coldkeep.core.lock import ArchiveLock, LockHeld
from coldkeep.core.manifest import Manifest
from coldkeep.core.ratelimit import RateLimiter
from coldkeep.core.recovery import Recovery
from coldkeep.core.scan import scan_files

EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED = 1, 2, 3


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def _load(path: Path) -> Settings:
    try:
        return load_settings(path)
    except ConfigError as err:
        raise click.ClickException(str(err)) from err


@click.group(
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="coldkeep")
@click.pass_context
def main(ctx: click.Context) -> None:
    """coldkeep moves an application's cold data out of its live tree, crash-safely.

    Old live files become verified gzips under archive_root/files; old event rows
    move into monthly archive databases. Try it: coldkeep demo ./demo
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


async def _archive_eligible(settings: Settings) -> int:
    """Recovery, then every eligible file through the per-file protocol."""
    layout = Layout(settings.archive_root)
    codec = Codec(settings.gzip.engine, settings.gzip.level)
    lock = await ArchiveLock.acquire(settings.archive_root, "coldkeep demo")
    try:
        async with await Manifest.open(layout.manifest) as manifest:
            mover = FileMover(
                settings.live_root, layout, manifest, codec, RateLimiter(settings.io.bytes_per_s)
            )
            report = await Recovery(mover).run()
            for p in report.partials:
                click.echo(f"  recovery: removed leftover {p.relative_to(layout.root)}")
            for o in report.orphans:
                click.echo(f"  recovery: orphan {o.relpath}: {o.outcome} {o.detail}".rstrip())
            for e in report.missing:
                click.echo(f"  recovery: MISSING gzip for entry {e.id} ({e.gz_path})")
            scan = await asyncio.to_thread(scan_files, settings, now_ns=time.time_ns())
            skipped = ", ".join(f"{n} {why}" for why, n in sorted(scan.skipped.items()))
            click.echo(f"  {len(scan.eligible)} files eligible; skipped: {skipped or 'none'}")
            t0 = time.monotonic()
            moved = bytes_in = bytes_out = problems = 0
            for cand in scan.eligible:
                result = await mover.archive(cand.relpath)
                if isinstance(result, Archived):
                    moved += 1
                    bytes_in += result.entry.bytes
                    bytes_out += result.entry.gz_bytes
                else:
                    problems += 1
                    click.echo(f"  {cand.relpath}: {result.kind}: {result.detail}")
            secs = time.monotonic() - t0
            click.echo(
                f"  archived {moved} files, {_human(bytes_in)} -> {_human(bytes_out)} "
                f"in {secs:.1f} s ({_human(bytes_in / max(secs, 1e-9))}/s)"
            )
            return EXIT_FAILED if problems or report.errors else 0
    finally:
        lock.release()


@main.command()
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option("--seed", default=7, show_default=True, help="Same seed, same site.")
@click.option("--scale", default=1.0, show_default=True, help="Size factor (0.05 for a quick one).")
@click.option("--no-console", is_flag=True, help="Only write the site.")
def demo(directory: Path, seed: int, scale: float, no_console: bool) -> None:
    """Write a realistic demo site into DIRECTORY and run coldkeep on it.

    The site: a live tree of JSONL logs, a state.db with ~500,000 events, an
    archive with planted crash leftovers, and a coldkeep.toml (mode = "on").
    An existing demo in DIRECTORY is reused as it is.
    """
    config = directory / "coldkeep.toml"
    if config.exists():
        click.echo(f"Using the existing demo in {directory} (remove it for a fresh one).")
    else:
        click.echo(f"Writing a demo site into {directory} (seed {seed}, scale {scale}) ...")
        try:
            site = write_demo(directory, seed=seed, scale=scale)
        except FileExistsError as err:
            raise click.ClickException(str(err)) from err
        click.echo(
            f"  {site.files} live files ({_human(site.bytes)}), {site.events:,} events in "
            f"{site.state_db.name}, crash leftovers planted in {site.archive.name}/"
        )
    click.echo(f"Config: {config}")
    if no_console:
        click.echo(f"Next: coldkeep --config {config} (the console) or see coldkeep --help")
        return
    settings = _load(config)
    try:
        code = asyncio.run(_archive_eligible(settings))
    except LockHeld as err:
        raise click.exceptions.Exit(EXIT_LOCKED) from err
    raise click.exceptions.Exit(code)


if __name__ == "__main__":
    main()
