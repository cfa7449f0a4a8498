"""``[alerts]``: where alerts go (a command given each as JSON on stdin, a
webhook POSTed each), and the guard on a config that runs a command or holds a
credential.

Invariant: such a config is refused when anyone but its owner can change it (the
file, or its folder unless sticky), and a warning is given when everyone can read
a credential in it.
"""

from __future__ import annotations

import stat
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from .configtable import ConfigError, Table


@dataclass(frozen=True)
class AlertsSettings:
    command: tuple[str, ...] = ()  # argv; gets each alert as JSON on stdin
    webhook: str | None = None  # POSTed each alert as JSON
    timeout_s: float = 30.0

    @property
    def sinks(self) -> list[str]:
        out = []
        if self.command:
            out.append("command")
        if self.webhook:
            out.append("webhook")
        return out


def guard_secrets(path: Path, alerts: AlertsSettings) -> tuple[str, ...]:
    """A config that makes coldkeep run a command (alerts.command), or holds a
    credential (a webhook with a user, a password, a query or a token in it), is
    what a less trusted user would edit to run code as coldkeep's user (root, from
    cron) or to read the secret: refused when anyone but its owner can change it
    (the file, or its folder unless that is sticky like /tmp); a warning when
    everyone can read a credential in it."""
    key = "alerts.command" if alerts.command else None
    secret = alerts.webhook is not None and _has_credentials(alerts.webhook)
    key = key or ("alerts.webhook" if secret else None)
    if key is None:
        return ()
    for target in (path, path.parent):
        mode = target.stat().st_mode
        sticky_dir = target.is_dir() and bool(mode & stat.S_ISVTX)
        if mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_dir:
            who = "everyone" if mode & stat.S_IWOTH else "its group"
            raise ConfigError(
                path,
                key,
                f"{target} can be changed by {who}, and {key} runs as coldkeep's user",
                f"chmod go-w {target}",
            )
    if secret and path.stat().st_mode & stat.S_IROTH:
        return (
            f"{path} is readable by everyone and alerts.webhook holds a credential: "
            f"chmod o-r {path}",
        )
    return ()


def _has_credentials(url: str) -> bool:
    parts = urllib.parse.urlsplit(url)
    token = any(
        len(seg) >= 20 and seg.replace("-", "").replace("_", "").isalnum()
        for seg in parts.path.split("/")
    )
    return bool(parts.username or parts.password or parts.query or token)


def read_alerts(t: Table) -> AlertsSettings:
    command = t.strings("command", ())
    webhook = t.string("webhook", None)
    if webhook is not None and not webhook.startswith(("http://", "https://")):
        raise ConfigError(t.file, t.key("webhook"), f"{webhook!r} is not an http(s) URL", "fix it")
    alerts = AlertsSettings(command, webhook, t.number("timeout", 30.0, minimum=1))
    t.done()
    return alerts
