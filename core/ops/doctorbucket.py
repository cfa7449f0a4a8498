"""Doctor's checks of an S3 remote's bucket as it is set up: its versioning, its
Object Lock and its default encryption, each held against what coldkeep does
there (nothing for a folder remote).
"""

from __future__ import annotations

from ..base.config import Settings
from ..base.errors import RemoteError
from ..remote.connect import connected
from ..remote.objectstore import BucketSettings
from .doctorfinding import Finding


async def check_bucket(settings: Settings) -> list[Finding]:
    """An S3 remote's bucket as it is set up: its versioning, its Object Lock
    and its default encryption, one line each, held against what coldkeep
    does there (no lines for a folder remote)."""
    remote = settings.remote
    if remote is None or remote.folder is not None:
        return []
    async with connected(remote) as store:
        try:
            bucket = await store.bucket_settings()
        except RemoteError as err:
            return [Finding("bucket", "fail", str(err))]
    if bucket is None:
        return []
    findings = [
        _versioning(bucket),
        _lock(bucket, remote.object_lock),
        _default_encryption(bucket, remote.sse, sealed=remote.encrypt_to is not None),
    ]
    if bucket.unread:
        findings.append(
            Finding(
                "bucket",
                "warn",
                f"this host may not read {', '.join(bucket.unread)}",
                "grant it s3:GetBucketVersioning, s3:GetBucketObjectLockConfiguration and "
                "s3:GetEncryptionConfiguration to have them checked",
            )
        )
    return findings


def _versioning(bucket: BucketSettings) -> Finding:
    if bucket.versioning is None:
        return Finding("bucket_versioning", "ok", "not read (below)")
    if bucket.versioning != "Enabled" or bucket.lock:
        said = bucket.versioning.lower() or "never turned on"
        return Finding("bucket_versioning", "ok", f"versioning {said}")
    return Finding(
        "bucket_versioning",
        "warn",
        "versioning is on: what coldkeep deletes there (expire, an old manifest snapshot, "
        "a copy replaced) stays as a noncurrent version, still stored and readable",
        "add a lifecycle rule that expires noncurrent versions (or suspend versioning)",
    )


def _lock(bucket: BucketSettings, object_lock: str) -> Finding:
    if bucket.lock is None:
        return Finding("bucket_lock", "ok", "not read (below)")
    if object_lock != "off" and not bucket.lock:
        return Finding(
            "bucket_lock",
            "fail",
            f"[remote] object_lock is {object_lock!r} and the bucket has no Object Lock: "
            "every ship stops at its first upload",
            "ship to a bucket created with Object Lock (or turn it on for this one), "
            'or set object_lock = "off"',
        )
    if object_lock != "off":
        return Finding(
            "bucket_lock",
            "ok",
            f"Object Lock is {bucket.lock}; each object is locked {object_lock} until its "
            "expiry ([remote] object_lock)",
        )
    if not bucket.lock:
        return Finding("bucket_lock", "ok", "no Object Lock")
    return Finding(
        "bucket_lock",
        "warn",
        f"Object Lock is {bucket.lock}: coldkeep sets no retention of its own, and what "
        "it deletes before the bucket's retention ends stays there, locked, as a "
        "noncurrent version",
        'set [remote] object_lock = "compliance" (or "governance") to have each object '
        "locked until its own expiry",
    )


def _default_encryption(bucket: BucketSettings, sse: str | None, *, sealed: bool) -> Finding:
    """The bucket's own encryption, and what the objects are stored as: with
    ``sealed`` (``[remote] encrypt_to``) coldkeep's age streams, whatever the
    bucket does on top."""
    if bucket.encryption is None:
        return Finding("bucket_encryption", "ok", "not read (below)")
    asked = f"every upload asks for {sse} ([remote] sse)" if sse else "[remote] sse is not set"
    default = f"the bucket's default is {bucket.encryption}"
    if sealed:
        # The bucket only ever holds ciphertext of what coldkeep ships; what it
        # shipped before encrypt_to was set is for rekey (its plan counts them).
        return Finding(
            "bucket_encryption",
            "ok",
            f"{default}; {asked}; what coldkeep ships is sealed to [remote] encrypt_to's "
            "age recipients before it leaves this host, so the bucket holds no plaintext "
            "of it (coldkeep rekey seals what was shipped before encrypt_to was set)",
        )
    if sse is None and bucket.encryption.sse is None:
        return Finding(
            "bucket_encryption",
            "warn",
            f"{default} and {asked}: the objects are stored unencrypted",
            'set [remote] sse = "AES256" (or "aws:kms")',
        )
    return Finding("bucket_encryption", "ok", f"{default}; {asked}")
