"""S3, and anything speaking its API, as an object store (aiobotocore: async
botocore; why this client and not obstore is measured in docs/performance.md).

Invariants:
- Create-only writes are ``PutObject`` with ``If-None-Match: *``: 412 means the
  key exists. Whether the server honours the header is probed once per store,
  on a key of coldkeep's own (``<prefix>/.coldkeep-probe/…``); one that ignores
  it or refuses it is used with ``conditional = False`` (the shipper then asks
  with HEAD first, under the archive lock) and the store says so once.
- Every PUT names SHA-256 as its checksum and sends the value: the server checks
  the body against it, keeps it, says it in the PUT's answer, and ``head`` reads
  it back (``ChecksumMode=ENABLED``). A server that keeps none answers without
  it and the caller reads the bytes back instead.
- With ``[remote] sse``, every PUT asks for that server-side encryption (and
  ``kms_key_id``'s key); the PUT's answer and ``head`` say what the server
  applied, for the caller to hold against what was asked.
- With ``[remote] object_lock``, every PUT asks for its retention (mode and
  retain-until) and, where a hold covers it, a legal hold; ``head`` says what the
  object carries. A delete removes every version of the key by its id (a plain
  DELETE in a versioned bucket only hides it behind a marker); the bucket's
  refusal (AccessDenied on a version) is ``RemoteLocked``, never an auth failure.
- Credentials come from botocore's standard chain only; a missing or refused one
  is a ``RemoteAuthError`` saying where credentials are looked for, and no
  message carries a key. An endpoint no connection reaches is a
  ``RemoteUnreachable`` (after botocore's retries), a missing bucket a
  ``RemoteNoBucket``: both stop the operation (``RemoteFatal``).
- Messages name an object by its key under the URL's prefix (``where``), the
  prefix once.
- Over plain http (a local test server, an internal MinIO) botocore's SigV4
  signs the body's sha256, which it computes by reading the file on the event
  loop: 47 ms per 64 MiB bundle here (warm cache). Over https (S3, R2, B2) it signs
  UNSIGNED-PAYLOAD and reads nothing; the checksum header is what the server
  checks either way.
- An object's version is its VersionId where the bucket keeps versions, else
  its ETag, always quoted (as S3 answers it; a VersionId never is): a read
  pinned to one sends ``VersionId`` (that version is read, whatever was put at
  the key since) or ``If-Match`` (412 once another object is there). A
  version gone (NoSuchVersion) or a 412 is ``RemoteReplaced``.
- Transient failures (500, 503 SlowDown, throttling, connection resets) are
  retried by botocore's standard retry mode; a body cut short on the way back is
  read again here (READ_TRIES). What is left after that is a ``RemoteError``.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import aiohttp
from aiobotocore.session import AioSession, get_session
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    PartialCredentialsError,
)
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.loaders import Loader, create_loader

from ..base.configprices import usd
from ..base.configremote import RemoteSettings
from ..base.errors import RemoteError
from ..base.fsutil import write_all
from ..base.names import is_text
from .cold import RemoteCold, parse_thaw
from .objectstore import (
    BucketSettings,
    Encryption,
    ObjectInfo,
    ObjectLock,
    ObjectStore,
    Put,
    RemoteAuthError,
    RemoteFatal,
    RemoteLocked,
    RemoteMissing,
    RemoteNoBucket,
    RemoteReplaced,
    RemoteUnreachable,
)

# A single PUT carries at most this much (S3's limit); bigger objects are refused
# with the reason rather than sent in parts whose checksum is not the file's.
MAX_PUT = 5 << 30
# A ranged or whole GET whose body was cut short is read again this many times.
READ_TRIES = 4
_AUTH_CODES = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "TokenRefreshRequired",
}
_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
_EXISTS = {"412", "PreconditionFailed", "409", "ConditionalRequestConflict"}
# A pinned read's answer when the object it names is not at the key any more.
_REPLACED = {"412", "PreconditionFailed", "NoSuchVersion"}
_NO_CONDITIONAL = {"501", "NotImplemented", "InvalidArgument", "InvalidRequest"}
_CREDENTIALS_HELP = (
    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in ~/.aws/credentials, "
    "or run where an instance role provides them"
)


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _status(err: ClientError) -> str:
    return str(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))


def _b64(sha256_hex: str) -> str:
    return base64.b64encode(bytes.fromhex(sha256_hex)).decode()


def _hex(b64: str | None) -> str | None:
    if not b64 or "-" in b64:  # a multipart upload's checksum of checksums
        return None
    return base64.b64decode(b64).hex()


def _lock_said(answer: dict[str, Any]) -> str:
    """GetObjectLockConfiguration's answer in a few words ("" without a lock)."""
    config = answer.get("ObjectLockConfiguration", {})
    if config.get("ObjectLockEnabled") != "Enabled":
        return ""
    retention = config.get("Rule", {}).get("DefaultRetention", {})
    if not retention:
        return "on, no default retention"
    years = retention.get("Years")
    span = f"{years} years" if years else f"{retention.get('Days')} days"
    return f"on, {retention.get('Mode')} for {span} by default"


def _default_encryption(answer: dict[str, Any]) -> Encryption:
    """GetBucketEncryption's answer: the first rule's default."""
    rules = answer.get("ServerSideEncryptionConfiguration", {}).get("Rules", [])
    if not rules:
        return Encryption()
    default = rules[0].get("ApplyServerSideEncryptionByDefault", {})
    return Encryption(default.get("SSEAlgorithm"), default.get("KMSMasterKeyID"))


def _encryption(answer: dict[str, Any]) -> Encryption:
    """The server-side encryption a PUT's or a HEAD's answer says."""
    return Encryption(answer.get("ServerSideEncryption"), answer.get("SSEKMSKeyId"))


def _version(answer: dict[str, Any]) -> str | None:
    """What names the stored version a HEAD or a listing describes: its
    VersionId, else its ETag in quotes (a server that leaves them off is given
    them, so that a pin tells the two apart)."""
    version = answer.get("VersionId")
    if version and version != "null":
        return str(version)
    etag = answer.get("ETag")
    if etag is None:
        return None
    return str(etag) if str(etag).startswith('"') else f'"{etag}"'


def _pinned(version: str | None) -> dict[str, str]:
    """A GET's arguments that make it read ``version`` or fail."""
    if version is None:
        return {}
    return {"IfMatch": version} if version.startswith('"') else {"VersionId": version}


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def _server_date(answer: dict[str, Any]) -> int | None:
    """The ``Date`` of a response (ms; its server's clock), a refusal's included."""
    said = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    try:
        return None if not said else int(parsedate_to_datetime(said).timestamp() * 1000)
    except (TypeError, ValueError):
        return None


def _object_lock(answer: dict[str, Any]) -> ObjectLock:
    """The Object Lock a HEAD's answer says."""
    until = answer.get("ObjectLockRetainUntilDate")
    return ObjectLock(
        answer.get("ObjectLockMode"),
        None if until is None else int(until.timestamp() * 1000),
        answer.get("ObjectLockLegalHoldStatus") == "ON",
    )


def _lock_args(lock: ObjectLock) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if lock.retain_until is not None:
        args["ObjectLockMode"] = lock.mode
        args["ObjectLockRetainUntilDate"] = datetime.fromtimestamp(lock.retain_until / 1000, UTC)
    if lock.legal_hold:
        args["ObjectLockLegalHoldStatus"] = "ON"
    return args


def _no_lock(err: ClientError) -> bool:
    """The bucket was asked for a lock it cannot keep (created without Object Lock)."""
    message = str(err.response.get("Error", {}).get("Message", ""))
    return _code(err) == "InvalidRequest" and "ObjectLock" in message.replace(" ", "")


# botocore's data loader keeps what it parsed (the S3 model, the endpoint rules:
# about 1 MB of JSON) for the life of the loader, and each session makes its own:
# 55 ms of every store opened, 4 ms with one loader for the process (a console
# or a fleet view opens a store per site). Keyed by the search path a session
# is configured with (AWS_DATA_PATH), which only adds models.
_LOADERS: dict[str | None, Loader] = {}


def shared_session() -> AioSession:
    """A new session whose data loader is the one this process already has."""
    session = get_session()
    path = session.get_config_variable("data_path")
    loader = _LOADERS.get(path) or _LOADERS.setdefault(path, create_loader(path))
    session.register_component("data_loader", loader)
    return session


class S3Store(ObjectStore):
    def __init__(self, remote: RemoteSettings) -> None:
        bucket, _, prefix = remote.url.removeprefix("s3://").partition("/")
        self.bucket = bucket
        self.prefix = f"{prefix}/" if prefix else ""
        self.url = remote.url
        self.remote = remote
        self.encryption = Encryption(remote.sse, remote.kms_key_id)
        self.conditional = True
        self.own_clock = True
        self.notices: list[str] = []
        self._probed = False
        self._stack = AsyncExitStack()
        self._client: Any = None
        self._lock = asyncio.Lock()
        # The server's Date as last seen, and this host's monotonic clock then.
        self._dated: tuple[int, float] | None = None

    async def _s3(self) -> Any:
        async with self._lock:
            if self._client is None:
                config = Config(
                    # Attempts from the standard chain (AWS_MAX_ATTEMPTS, ~/.aws/config;
                    # 3 by default): an operator tunes them where AWS tools read them.
                    retries={"mode": "standard"},
                    connect_timeout=10,
                    read_timeout=60,
                    # Connections kept: each caller bounds its own requests (a ship 8
                    # uploads, the fleet view 32 sites), this only how many it reuses.
                    max_pool_connections=32,
                    s3={"addressing_style": "path"} if self.remote.endpoint_url else {},
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required",
                )
                self._client = await self._stack.enter_async_context(
                    shared_session().create_client(
                        "s3",
                        region_name=self.remote.region,
                        endpoint_url=self.remote.endpoint_url,
                        config=config,
                    )
                )
            return self._client

    def _key(self, key: str) -> str:
        # An S3 key is UTF-8 text; a file name need not be (names.py). Such an
        # object is refused alone, by name: it stays local, the rest ships.
        if not is_text(key):
            raise RemoteError(
                f"{self.where(key)!r}: the name is not UTF-8 and S3 keys must be; "
                "it stays local only (rename the file, or use a file:// remote)"
            )
        return self.prefix + key

    def _error(self, key: str, err: Exception, doing: str) -> RemoteError:
        """One line for the operator; never the request's headers or keys."""
        where = self.where(key)
        if isinstance(err, NoCredentialsError | PartialCredentialsError):
            return RemoteAuthError(f"{where}: no AWS credentials found ({_CREDENTIALS_HELP})")
        if isinstance(err, ClientError):
            code = _code(err) or _status(err)
            if code in _AUTH_CODES or _status(err) in ("401", "403"):
                return RemoteAuthError(
                    f"{where}: the credentials were refused while {doing} ({code}; "
                    f"{_CREDENTIALS_HELP}, with access to bucket {self.bucket})"
                )
            if code == "NoSuchBucket":
                return RemoteNoBucket(self.url, self.bucket)
            message = err.response.get("Error", {}).get("Message", "")
            return RemoteError(f"{where}: {code} while {doing}: {message}".rstrip(": "))
        if isinstance(err, BotoConnectionError):  # refused, timed out, no such host, a proxy
            return RemoteUnreachable(
                f"{where}: cannot reach the endpoint while {doing} ({err}); check the "
                "endpoint and the network, nothing more was tried"
            )
        return RemoteError(f"{where}: {type(err).__name__} while {doing}: {err}")

    def _saw(self, answer: dict[str, Any]) -> None:
        date = _server_date(answer)
        if date is not None:
            self._dated = (date, time.monotonic())

    async def server_now(self) -> int:
        # A Date is to the second: one seen in the last minute, moved on by this
        # host's monotonic clock, is as good as a new one.
        if self._dated is None or time.monotonic() - self._dated[1] > 60:
            s3 = await self._s3()
            try:
                self._saw(
                    await s3.head_object(Bucket=self.bucket, Key=self._key(".coldkeep-clock"))
                )
            except ClientError as err:  # a 404 carries the Date too
                self._saw(err.response)
                if self._dated is None:
                    raise self._error(".coldkeep-clock", err, "reading the server's time") from err
            except BotoCoreError as err:
                raise self._error(".coldkeep-clock", err, "reading the server's time") from err
            if self._dated is None:
                raise RemoteError(f"{self.url}: the server's answers carry no Date")
        date, seen = self._dated
        return date + 500 + int((time.monotonic() - seen) * 1000)

    # create-only writes --------------------------------------------------------

    async def refuses_overwrite(self) -> bool:
        if not self._probed:
            await self._probe()
        return self.conditional

    async def _probe(self) -> None:
        """Whether the server refuses a second create of the same key. Known only
        once the probe has an answer: a probe that failed is tried again."""
        s3 = await self._s3()
        probe = f".coldkeep-probe/{secrets.token_hex(8)}"  # messages name it (where: the URL)
        key = self._key(probe)
        created = False
        try:
            await s3.put_object(Bucket=self.bucket, Key=key, Body=b"1", IfNoneMatch="*")
            created = True
            try:
                await s3.put_object(Bucket=self.bucket, Key=key, Body=b"2", IfNoneMatch="*")
            except ClientError as err:
                if _code(err) in _EXISTS or _status(err) in _EXISTS:
                    self._probed = True
                    return
                if _code(err) not in _NO_CONDITIONAL and _status(err) not in _NO_CONDITIONAL:
                    raise
            self.conditional = False
            self._probed = True
        except ClientError as err:
            if _code(err) not in _NO_CONDITIONAL and _status(err) not in _NO_CONDITIONAL:
                raise self._error(probe, err, "probing for conditional writes") from err
            self.conditional = False
            self._probed = True
        except BotoCoreError as err:
            raise self._error(probe, err, "probing for conditional writes") from err
        finally:
            if created:
                try:
                    await self.delete(probe)
                except RemoteError:
                    self.notices.append(
                        f"{self.where(probe)}: the probe object could not be removed"
                    )
        if not self.conditional:
            self.notices.append(
                f"{self.url}: the server does not refuse an existing key (If-None-Match); "
                "each upload checks with HEAD first, under the archive lock"
            )

    def take_notices(self) -> list[str]:
        notices, self.notices = self.notices, []
        return notices

    def _no_lock_error(self) -> RemoteFatal:
        return RemoteFatal(
            f"{self.url}: the bucket {self.bucket} has no Object Lock, and [remote] "
            f"object_lock is {self.remote.object_lock!r} (use a bucket created with Object "
            'Lock, or set object_lock = "off")'
        )

    async def put_new(
        self,
        key: str,
        src: Path,
        size: int,
        sha256: str,
        lock: ObjectLock | None = None,
        *,
        storage_class: str | None = None,
        random_key: bool = False,
    ) -> Put:
        if size > MAX_PUT:
            raise RemoteError(
                f"{self.where(key)}: {size} bytes is more than one PUT carries (5 GiB); "
                "not shipped (multipart uploads are not supported yet)"
            )
        # A key made random for this object cannot be taken: no probe is sent
        # for it (a heartbeat every 15 minutes would probe each time).
        conditional = await self.refuses_overwrite() if not random_key or self._probed else False
        s3 = await self._s3()
        args: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": self._key(key),
            "ContentLength": size,
            "ChecksumAlgorithm": "SHA256",
            "ChecksumSHA256": _b64(sha256),
            "StorageClass": storage_class or self.remote.meta_class,
        }
        if conditional:
            args["IfNoneMatch"] = "*"
        if self.encryption.sse is not None:
            args["ServerSideEncryption"] = self.encryption.sse
        if self.encryption.kms_key_id is not None:
            args["SSEKMSKeyId"] = self.encryption.kms_key_id
        if lock is not None:
            args.update(_lock_args(lock))
        body = await asyncio.to_thread(open, src, "rb")
        try:
            with body:
                got = await s3.put_object(Body=body, **args)
        except ClientError as err:
            if conditional and (_code(err) in _EXISTS or _status(err) in _EXISTS):
                return Put(created=False)
            if _no_lock(err):
                raise self._no_lock_error() from err
            raise self._error(key, err, "uploading") from err
        except BotoCoreError as err:
            raise self._error(key, err, "uploading") from err
        self._saw(got)
        return Put(created=True, kept=_hex(got.get("ChecksumSHA256")), encryption=_encryption(got))

    # reads ---------------------------------------------------------------------

    async def head(self, key: str) -> ObjectInfo | None:
        s3 = await self._s3()
        try:
            got = await s3.head_object(
                Bucket=self.bucket, Key=self._key(key), ChecksumMode="ENABLED"
            )
        except ClientError as err:
            self._saw(err.response)
            if _code(err) in _NOT_FOUND or _status(err) == "404":
                return None
            raise self._error(key, err, "reading its size and checksum") from err
        except BotoCoreError as err:
            raise self._error(key, err, "reading its size and checksum") from err
        self._saw(got)
        return ObjectInfo(
            key,
            int(got["ContentLength"]),
            _hex(got.get("ChecksumSHA256")),
            _encryption(got),
            _object_lock(got),
            _version(got),
            _ms(got.get("LastModified")),
            got.get("StorageClass"),
            parse_thaw(got.get("Restore")),
        )

    async def thaw(self, key: str, days: int, tier: str) -> str:
        s3 = await self._s3()
        request = {"Days": days, "GlacierJobParameters": {"Tier": tier.capitalize()}}
        try:
            got = await s3.restore_object(
                Bucket=self.bucket, Key=self._key(key), RestoreRequest=request
            )
        except ClientError as err:
            self._saw(err.response)
            if _code(err) == "RestoreAlreadyInProgress":
                return "under way"
            raise self._error(key, err, f"asking for a {tier} thaw") from err
        except BotoCoreError as err:
            raise self._error(key, err, f"asking for a {tier} thaw") from err
        self._saw(got)
        return "extended" if got["ResponseMetadata"]["HTTPStatusCode"] == 200 else "asked"

    async def _cold(self, key: str, err: ClientError) -> RemoteCold:
        """Why a GET of ``key`` was refused as cold, with its thaw's state where
        a HEAD can say it."""
        said = err.response.get("Error", {}).get("StorageClass")
        try:
            info = await self.head(key)
        except RemoteError:
            info = None
        if info is None:
            return RemoteCold(self.where(key), said, None)
        cls = info.storage_class or said
        cost = self.remote.prices.thaw_usd(cls or "", "standard", info.size, 1)
        return RemoteCold(self.where(key), cls, info.thaw, usd(cost) if cost else None)

    async def _get(self, key: str, doing: str, **args: str) -> bytes:
        """The object's body (or a range of it: ``Range``; of one version of it:
        ``_pinned``), read again while it comes back cut short (a reset or a
        truncated response) until READ_TRIES."""
        s3 = await self._s3()
        for _ in range(READ_TRIES):
            try:
                got = await s3.get_object(Bucket=self.bucket, Key=self._key(key), **args)
                async with got["Body"] as body:
                    data: bytes = await body.read()
                if len(data) == int(got["ContentLength"]):
                    return data
                last: Exception = RemoteError(f"{self.where(key)}: the body came back short")
            except ClientError as err:
                if _code(err) in _NOT_FOUND:
                    raise RemoteMissing(
                        f"{self.where(key)}: not there (run coldkeep verify --remote)"
                    ) from err
                if _code(err) in _REPLACED or _status(err) in _REPLACED:
                    raise RemoteReplaced(self.where(key)) from err
                if _code(err) == "InvalidObjectState":
                    raise await self._cold(key, err) from err
                raise self._error(key, err, doing) from err
            except (TimeoutError, BotoCoreError, OSError, aiohttp.ClientError) as err:
                last = err
        raise self._error(key, last, f"{doing} ({READ_TRIES} tries)") from last

    async def read_range(
        self, key: str, start: int, length: int, version: str | None = None
    ) -> bytes:
        if length <= 0:
            return b""
        return await self._get(
            key, "reading a range", Range=f"bytes={start}-{start + length - 1}", **_pinned(version)
        )

    async def download(self, key: str, fd: int) -> int:
        # Whole objects are read into memory: what restores from here is one
        # gzip of its own (bundles are read a member at a time, by range).
        data = await self._get(key, "downloading")
        await asyncio.to_thread(write_all, fd, data)
        return len(data)

    async def list_objects(self, prefix: str) -> AsyncIterator[ObjectInfo]:
        s3 = await self._s3()
        paginator = s3.get_paginator("list_objects_v2")
        try:
            async for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
                for obj in page.get("Contents", []):
                    yield self._listed(obj)
        except (ClientError, BotoCoreError) as err:
            raise self._error(prefix, err, "listing") from err

    def _listed(self, obj: dict[str, Any]) -> ObjectInfo:
        """An object as a listing gives it."""
        return ObjectInfo(
            obj["Key"][len(self.prefix) :],
            int(obj["Size"]),
            version=_version(obj),
            modified=_ms(obj.get("LastModified")),
        )

    async def list_under(self, prefixes: Sequence[str]) -> dict[str, list[ObjectInfo]]:
        # One listing of their parent from the first of them on, stopped past
        # the last: a fleet's look at a site (its beats, its statements) is
        # one request where it was two. What lies between them in key order is
        # read and passed over (nothing does under a site's prefix).
        ordered = sorted(prefixes)
        head = ordered[0].rstrip("/").rpartition("/")[0]
        parent = f"{head}/" if head else ""
        if not all(p.startswith(parent) for p in ordered):  # not beside one another
            return await super().list_under(prefixes)
        found: dict[str, list[ObjectInfo]] = {p: [] for p in prefixes}
        s3 = await self._s3()
        paginator = s3.get_paginator("list_objects_v2")
        pages = paginator.paginate(
            Bucket=self.bucket, Prefix=self._key(parent), StartAfter=self._key(ordered[0])
        )
        try:
            async for page in pages:
                for obj in page.get("Contents", []):
                    key = obj["Key"][len(self.prefix) :]
                    if key > ordered[-1] and not key.startswith(ordered[-1]):
                        return found
                    under = next((p for p in ordered if key.startswith(p)), None)
                    if under is not None:
                        found[under].append(self._listed(obj))
        except (ClientError, BotoCoreError) as err:
            raise self._error(parent, err, "listing") from err
        return found

    async def list_dirs(self, prefix: str) -> list[str]:
        s3 = await self._s3()
        paginator = s3.get_paginator("list_objects_v2")
        start = self._key(prefix)
        names: list[str] = []
        try:
            async for page in paginator.paginate(Bucket=self.bucket, Prefix=start, Delimiter="/"):
                for common in page.get("CommonPrefixes", []):
                    names.append(common["Prefix"][len(start) :].rstrip("/"))
        except (ClientError, BotoCoreError) as err:
            raise self._error(prefix, err, "listing") from err
        return sorted(n for n in names if n and not n.startswith("."))

    async def delete(self, key: str) -> None:
        if self.remote.locks is not None:
            await self._delete_versions(key)
            return
        s3 = await self._s3()
        try:
            await s3.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as err:
            raise self._error(key, err, "deleting") from err

    async def _delete_versions(self, key: str) -> None:
        """Every version of ``key`` (and delete marker) removed by its id: only
        that removes an object from a versioned bucket. Those the bucket keeps
        (a retention not ended, a legal hold) make one ``RemoteLocked``."""
        s3 = await self._s3()
        name = self._key(key)
        kept = 0
        try:
            paginator = s3.get_paginator("list_object_versions")
            versions = [
                str(v["VersionId"])
                async for page in paginator.paginate(Bucket=self.bucket, Prefix=name)
                for v in [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
                if v["Key"] == name
            ]
            for version in versions:
                try:
                    await s3.delete_object(Bucket=self.bucket, Key=name, VersionId=version)
                except ClientError as err:
                    if _code(err) != "AccessDenied":
                        raise
                    kept += 1
        except (ClientError, BotoCoreError) as err:
            raise self._error(key, err, "deleting its versions") from err
        if kept:
            raise RemoteLocked(
                f"{self.where(key)}: kept by the bucket's lock ({kept} of {len(versions)} "
                "versions: a retention not ended or a legal hold; or this host may not "
                "s3:DeleteObjectVersion)"
            )

    async def keep(self, key: str, lock: ObjectLock) -> None:
        if lock.retain_until is not None:
            s3 = await self._s3()
            until = datetime.fromtimestamp(lock.retain_until / 1000, UTC)
            try:
                await s3.put_object_retention(
                    Bucket=self.bucket,
                    Key=self._key(key),
                    Retention={"Mode": lock.mode, "RetainUntilDate": until},
                )
            except ClientError as err:
                if _no_lock(err):
                    raise self._no_lock_error() from err
                raise self._error(key, err, "extending its retention") from err
            except BotoCoreError as err:
                raise self._error(key, err, "extending its retention") from err
        if lock.legal_hold:
            await self.set_legal_hold(key, True)

    async def set_legal_hold(self, key: str, on: bool) -> None:
        s3 = await self._s3()
        status = "ON" if on else "OFF"
        try:
            await s3.put_object_legal_hold(
                Bucket=self.bucket, Key=self._key(key), LegalHold={"Status": status}
            )
        except ClientError as err:
            if _code(err) in _NOT_FOUND:
                raise RemoteMissing(f"{self.where(key)}: not there to hold") from err
            if _no_lock(err):
                raise self._no_lock_error() from err
            raise self._error(key, err, f"setting its legal hold {status}") from err
        except BotoCoreError as err:
            raise self._error(key, err, f"setting its legal hold {status}") from err

    async def bucket_settings(self) -> BucketSettings:
        s3 = await self._s3()
        unread: list[str] = []

        async def ask(what: str, call: Any, absent: set[str]) -> dict[str, Any] | None:
            try:
                return dict(await call(Bucket=self.bucket))
            except ClientError as err:
                if _code(err) in absent:
                    return {}
                if _code(err) == "NoSuchBucket":
                    raise self._error("", err, f"reading the bucket's {what}") from err
                # A host may well not be let read it (AccessDenied), or a server
                # not know it (NotImplemented): said, not fatal.
                unread.append(f"its {what} ({_code(err) or _status(err)})")
            except BotoCoreError as err:
                raise self._error("", err, f"reading the bucket's {what}") from err
            return None

        versioning = await ask("versioning", s3.get_bucket_versioning, set())
        lock = await ask(
            "Object Lock configuration",
            s3.get_object_lock_configuration,
            {"ObjectLockConfigurationNotFoundError"},
        )
        default = await ask(
            "default encryption",
            s3.get_bucket_encryption,
            {"ServerSideEncryptionConfigurationNotFoundError"},
        )
        return BucketSettings(
            None if versioning is None else str(versioning.get("Status", "")),
            None if lock is None else _lock_said(lock),
            None if default is None else _default_encryption(default),
            tuple(unread),
        )

    async def clear_incomplete(self, prefix: str) -> int:
        # Single PUTs leave nothing behind when cut short: S3 stores an object
        # whole or not at all.
        return 0

    async def close(self) -> None:
        await self._stack.aclose()
        self._client = None
