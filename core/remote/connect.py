"""The one place a ``[remote]`` config becomes an object store."""

from __future__ import annotations

from ..base.config import RemoteSettings
from .filestore import FileStore
from .objectstore import ObjectStore


def open_store(remote: RemoteSettings) -> ObjectStore:
    """The store a ``[remote]`` config names."""
    if remote.folder is not None:
        return FileStore(remote.folder)
    # Imported on first use: the S3 client costs start-up time a site without
    # an S3 remote (or a console showing status) should not pay.
    from .s3store import S3Store  # noqa: PLC0415

    return S3Store(remote)
