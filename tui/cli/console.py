"""``coldkeep console`` (also the group's default): the console on a site's
config, or with ``--remote URL`` the fleet view of every site under a remote
prefix, which reads no coldkeep.toml. Textual is imported only here, only when
one of them opens.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import NoReturn

import click

from coldkeep.core.base.configremote import RemoteSettings, RemoteUrlError
from coldkeep.core.base.configremote import endpoint_url as check_endpoint
from coldkeep.core.base.configremote import remote_url as check_remote_url
from coldkeep.core.base.configtable import ConfigError
from coldkeep.core.base.errors import EXIT_USAGE, ColdkeepError
from coldkeep.core.ops.fleet import fleet_cache
from coldkeep.core.ops.health import load_rules

from ..operations.spec import IDENTITY_HELP, load_identity
from .kit import command, ctx_for, fail, identities_for


@click.command()
@command(json_opt=False)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing.")
@click.option(
    "--remote",
    "remote_url",
    metavar="URL",
    help="The fleet view instead: every site that ships to this prefix (s3://bucket/prefix "
    "or file:///path), from their manifest snapshots, searched together, restored from to "
    "a local folder. Needs no coldkeep.toml; changes nothing on the remote.",
)
@click.option(
    "--endpoint-url", metavar="URL", help="With --remote: an S3-compatible endpoint (http(s))."
)
@click.option("--region", help="With --remote: the bucket's region (default: the environment's).")
@click.option(
    "--identity",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help=IDENTITY_HELP + " The console's restores (files and event months) open sealed "
    "copies with it; with --remote, the fleet view's.",
)
def console(
    config: Path | None,
    read_only: bool = False,
    remote_url: str | None = None,
    endpoint_url: str | None = None,
    region: str | None = None,
    identity: Path | None = None,
) -> None:
    """Open the console (the default command), or with --remote the fleet view."""
    if remote_url is not None:
        if config is not None:
            fail(
                "--remote opens the fleet view, which reads no coldkeep.toml: drop --config",
                EXIT_USAGE,
            )
        _fleet(remote_url, endpoint_url, region, identity)
    if endpoint_url is not None or region is not None:
        fail("--endpoint-url and --region go with --remote URL (the fleet view)", EXIT_USAGE)
    ctx = ctx_for(config)
    root = click.get_current_context().find_root()
    read_only = read_only or bool(root.params.get("read_only"))
    try:
        settings = ctx.settings
        identities = load_identity(identity)  # a bad file ends it here, in one line
    except ConfigError as err:
        fail(f"{err}\n(no config? try: coldkeep demo ./demo)", EXIT_USAGE)
    except ColdkeepError as err:
        fail(str(err), err.exit_code)
    from ..console.app import ColdkeepApp  # noqa: PLC0415 - Textual loads only for the console

    app = ColdkeepApp(settings, read_only=read_only, identities=identities)
    app.run()
    raise SystemExit(app.return_code or 0)


def fleet_remote(url: str, endpoint: str | None, region: str | None) -> RemoteSettings:
    """The fleet view's remote from its options, checked as a config's [remote]
    is (a relative ``file:`` path is taken from the current directory, and must
    be a directory). Raises ValueError, whose one line never repeats a credential."""
    parts = urllib.parse.urlsplit(url)
    if not parts.scheme and "@" not in url:
        path = Path(os.path.abspath(url))
        raise ValueError(f"--remote {url} is not a URL: for a folder, write {path.as_uri()}")
    try:
        url = check_remote_url(url, Path.cwd())
    except RemoteUrlError as err:
        raise ValueError(f"--remote {err}") from None
    if endpoint is not None:
        try:
            check_endpoint(endpoint)
        except RemoteUrlError as err:
            raise ValueError(f"--endpoint-url {err}") from None
    folder = RemoteSettings(url).folder
    if folder is not None and not folder.is_dir():
        raise ValueError(f"--remote {url}: {folder} is not a directory")
    return RemoteSettings(url, endpoint_url=endpoint, region=region)


def _fleet(
    url: str, endpoint_url: str | None, region: str | None, identity: Path | None
) -> NoReturn:
    try:
        remote = fleet_remote(url, endpoint_url, region)
        identities = identities_for(identity)
        rules = load_rules()  # the operator's own, where there are any
    except ValueError as err:
        fail(str(err), EXIT_USAGE)
    except ColdkeepError as err:
        fail(str(err), err.exit_code)
    from ..console.fleet.app import FleetApp  # noqa: PLC0415 - Textual loads only for the console

    app = FleetApp(remote, fleet_cache(remote), identities, rules)
    app.run()
    raise SystemExit(app.return_code or 0)
