"""This coldkeep's version, as its installed package says it."""

from __future__ import annotations

from importlib import metadata


def version() -> str:
    try:
        return metadata.version("coldkeep")
    except metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "unknown"
