"""The one place a ``[remote]`` config becomes an object store, and the one way an
operation opens and closes one (``connected``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..base.configremote import RemoteSettings
from .filestore import FileStore
from .objectstore import ObjectStore


def open_store(remote: RemoteSettings) -> ObjectStore:
    """The store a ``[remote]`` config names; its owner closes it (``connected``
    does, for one block)."""
    if remote.folder is not None:
        return FileStore(remote.folder)
    # Imported on first use: the S3 client costs start-up time a site without
    # an S3 remote (or a console showing status) should not pay.
    from .s3store import S3Store  # noqa: PLC0415

    return S3Store(remote)


@asynccontextmanager
async def connected(remote: RemoteSettings) -> AsyncIterator[ObjectStore]:
    """The store ``remote`` names, open for the block and closed after it, however
    the block ends."""
    store = open_store(remote)
    try:
        yield store
    finally:
        await store.close()
