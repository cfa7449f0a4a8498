"""``[remote]``: the off-host tier (an ``s3://`` bucket or a ``file://`` folder),
its site folder, storage class, server-side encryption, Object Lock and the age
recipients objects are sealed to; a remote URL and an endpoint checked, for the
config and for the console's remote picker alike.

Invariant: no credential is ever kept or echoed: a URL holding one is refused
(the AWS chain provides them), and a value of ``encrypt_to`` is never printed.
"""

from __future__ import annotations

import os
import re
import socket
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from .configprices import Prices, read_prices
from .configtable import MAX_DAYS, ConfigError, Table
from .errors import UsageError
from .recipients import RecipientInvalid, RecipientSet, parse_recipients

# Storage classes a ranged GET can read at once.
INSTANT_CLASSES = (
    "STANDARD",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "REDUCED_REDUNDANCY",
)
# Classes whose objects must be thawed (a restore request, hours) before a GET.
COLD_CLASSES = ("GLACIER", "DEEP_ARCHIVE")
STORAGE_CLASSES = INSTANT_CLASSES + COLD_CLASSES


@dataclass(frozen=True)
class RemoteSettings:
    """The off-host tier. ``url`` is ``s3://bucket/prefix`` or ``file:///path``;
    credentials never appear here (the standard AWS chain provides them)."""

    url: str
    endpoint_url: str | None = None
    region: str | None = None  # None: from the environment
    storage_class: str = "STANDARD"  # archive files and bundles: any class
    events_storage_class: str = "STANDARD"  # event months: read at once by query and DR
    site: str = field(default_factory=socket.gethostname)
    keep_local_days: float = 30.0  # -1: keep local copies for ever
    bytes_per_s: int = 0
    sse: str | None = None  # server-side encryption asked of every upload (SSE_MODES)
    kms_key_id: str | None = None  # with sse = "aws:kms": the key (None: the account's)
    object_lock: str = "off"  # LOCK_MODES: each object retained until its expiry
    encrypt_to: RecipientSet | None = None  # objects sealed to these age recipients first
    prices: Prices = field(default_factory=Prices)  # [remote.prices]: costs shown, estimated

    @property
    def locks(self) -> str | None:
        """The S3 Object Lock mode every upload asks for (``GOVERNANCE`` or
        ``COMPLIANCE``), None when ``object_lock`` is off."""
        return None if self.object_lock == "off" else self.object_lock.upper()

    @property
    def cold(self) -> bool:
        """Whether archive files and bundles go to a class that must be thawed."""
        return self.storage_class in COLD_CLASSES

    @property
    def meta_class(self) -> str:
        """The class of what is read without asking (manifest snapshots, their
        signatures, the marker, the site's claim and key): the data's class
        when that is read at once, else STANDARD."""
        return "STANDARD" if self.cold else self.storage_class

    def class_of(self, path: str) -> str:
        """The storage class an object at the archive path ``path`` is put in."""
        if path.startswith("files/"):
            return self.storage_class
        if path.startswith("events/"):
            return self.events_storage_class
        return self.meta_class

    @property
    def keeps_local(self) -> bool:
        return self.keep_local_days < 0

    @property
    def folder(self) -> Path | None:
        """A ``file://`` remote's directory."""
        if not self.url.startswith("file:"):
            return None
        return Path(urllib.parse.unquote(urllib.parse.urlsplit(self.url).path))


_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


# The top folder of the fleet's Parquet (remote/lakelayout.py), beside the sites.
RESERVED_SITE = "lake"
_SITE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def read_remote(t: Table, base: Path) -> RemoteSettings | None:
    url = t.string("url", None)
    if url is None:
        if t.data:
            raise ConfigError(
                t.file, t.key("url"), "is required in [remote]", 'add url = "s3://bucket/prefix"'
            )
        return None
    try:
        url = remote_url(url, base)
    except RemoteUrlError as err:
        raise ConfigError(t.file, t.key("url"), err.problem, err.fix) from None
    endpoint = t.string("endpoint_url", None)
    if endpoint is not None:
        try:
            endpoint_url(endpoint)
        except RemoteUrlError as err:
            raise ConfigError(t.file, t.key("endpoint_url"), err.problem, err.fix) from None
    site = t.string("site", None) or socket.gethostname()
    if not _SITE.fullmatch(site):
        raise ConfigError(
            t.file,
            t.key("site"),
            f"{site!r} is not a plain folder name",
            "use letters, digits, '.', '_' and '-'",
        )
    if site == RESERVED_SITE:
        raise ConfigError(
            t.file,
            t.key("site"),
            f"{site!r} is the folder of the fleet's lake ([lake]) in every prefix",
            "name the site otherwise",
        )
    keep = t.number("keep_local_days", 30.0, minimum=-1, maximum=MAX_DAYS)
    if -1 < keep < 0:
        raise ConfigError(
            t.file,
            t.key("keep_local_days"),
            f"{keep} is negative",
            "use -1 (for ever) or 0 or more",
        )
    storage_class, events_class = _classes(t, url)
    sse, kms_key_id = _sse(t, url)
    remote = RemoteSettings(
        url=url,
        endpoint_url=endpoint,
        region=t.string("region", None),
        storage_class=storage_class,
        events_storage_class=events_class,
        site=site,
        keep_local_days=keep,
        bytes_per_s=t.integer("bytes_per_s", 0, minimum=0),
        sse=sse,
        kms_key_id=kms_key_id,
        object_lock=_object_lock(t, url),
        encrypt_to=_encrypt_to(t),
        prices=read_prices(t.table("prices"), STORAGE_CLASSES),
    )
    t.done()
    return remote


def _classes(t: Table, url: str) -> tuple[str, str]:
    """``storage_class`` (archive files and bundles: any class, a cold one only
    in a bucket) and ``events_storage_class`` (an instant class)."""
    storage_class = str(t.choice("storage_class", "STANDARD", STORAGE_CLASSES))
    if storage_class in COLD_CLASSES and not url.startswith("s3:"):
        raise ConfigError(
            t.file, t.key("storage_class"), "a file:// remote has no cold storage",
            "remove it, or ship to an s3:// bucket",
        )  # fmt: skip
    instant = "STANDARD" if storage_class in COLD_CLASSES else storage_class
    events_class = t.string("events_storage_class", instant)
    if events_class not in INSTANT_CLASSES:
        fix = "use one of " + ", ".join(INSTANT_CLASSES)
        if events_class in COLD_CLASSES:
            fix = "event months are read at once by query and disaster recovery; " + fix
        raise ConfigError(
            t.file, t.key("events_storage_class"), f"{events_class!r} is not supported", fix
        )
    return storage_class, str(events_class)


LOCK_MODES = ("off", "governance", "compliance")


def _encrypt_to(t: Table) -> RecipientSet | None:
    """``[remote] encrypt_to``: age X25519 recipients, checked; no value of it is
    ever echoed (a secret key put there by mistake stays unprinted)."""
    raw = t.take("encrypt_to")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ConfigError(
            t.file,
            t.key("encrypt_to"),
            f"expected a list of age1… recipients, got {type(raw).__name__}",
            'write encrypt_to = ["age1…"]',
        )
    try:
        return parse_recipients(raw)
    except RecipientInvalid as err:
        raise ConfigError(t.file, f"remote.{err.key}", err.problem, err.fix) from None


def _object_lock(t: Table, url: str) -> str:
    object_lock = str(t.choice("object_lock", "off", LOCK_MODES))
    if object_lock != "off" and not url.startswith("s3:"):
        raise ConfigError(
            t.file, t.key("object_lock"), "a file:// remote has no Object Lock", 'set it to "off"'
        )
    return object_lock


SSE_MODES = ("AES256", "aws:kms")


def _sse(t: Table, url: str) -> tuple[str | None, str | None]:
    """``[remote] sse`` and ``kms_key_id``, checked against each other and the URL."""
    sse = t.string("sse", None)
    kms_key_id = t.string("kms_key_id", None)
    if sse is not None and sse not in SSE_MODES:
        raise ConfigError(
            t.file, t.key("sse"), f"{sse!r} is not supported", 'use "AES256" or "aws:kms"'
        )
    if sse is not None and not url.startswith("s3:"):
        raise ConfigError(
            t.file, t.key("sse"), "a file:// remote has no server-side encryption", "remove it"
        )
    if kms_key_id is not None and sse != "aws:kms":
        raise ConfigError(
            t.file, t.key("kms_key_id"), 'is a KMS key: it needs sse = "aws:kms"',
            'set sse = "aws:kms", or remove kms_key_id',
        )  # fmt: skip
    return sse, kms_key_id


class RemoteUrlError(UsageError, ValueError):
    """A remote URL or endpoint that cannot be used: what is wrong and the fix,
    never the credential that may be in it."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem} ({fix})")
        self.problem = problem
        self.fix = fix


_CREDENTIALS_FIX = (
    "remove it; credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
    "~/.aws/credentials or the instance role"
)


def remote_url(url: str, base: Path) -> str:
    """``url`` as the remote tier keeps it: ``s3://bucket[/prefix]`` with a valid
    bucket name, or ``file://`` with an absolute path (a relative one is taken
    from ``base``). Raises ``RemoteUrlError``."""
    parts = urllib.parse.urlsplit(url)
    if "@" in parts.netloc:
        raise RemoteUrlError("holds a credential", _CREDENTIALS_FIX)
    if parts.scheme == "s3":
        if not _BUCKET.fullmatch(parts.netloc):
            raise RemoteUrlError(
                f"{parts.netloc!r} is not an S3 bucket name",
                "use 3-63 lowercase letters, digits, '.' and '-'",
            )
        prefix = parts.path.strip("/")
        return f"s3://{parts.netloc}/{prefix}" if prefix else f"s3://{parts.netloc}"
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise RemoteUrlError(f"{url} names a host", "write file:///absolute/path")
        raw = urllib.parse.unquote(parts.path)
        if not raw or "\0" in raw:
            raise RemoteUrlError(f"{url!r} has no usable path", "write file:///path")
        return Path(os.path.normpath(base / raw)).as_uri()
    raise RemoteUrlError(
        f"{url} is not an s3:// or file:// URL", "write s3://bucket/prefix or file:///path"
    )


def endpoint_url(endpoint: str) -> str:
    """An S3-compatible server's address: ``http(s)://host[:port]``, no credential."""
    parts = urllib.parse.urlsplit(endpoint)
    if "@" in parts.netloc:
        raise RemoteUrlError("holds a credential", _CREDENTIALS_FIX)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteUrlError(f"{endpoint!r} is not an http(s) URL", "write http(s)://host:port")
    return endpoint
