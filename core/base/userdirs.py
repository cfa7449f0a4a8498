"""Where coldkeep keeps what is the user's rather than a site's (caches, the
fleet's health rules): the XDG base directories, each with a ``coldkeep``
folder. A relative value of an XDG variable is invalid by the spec and ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

# Each kind: its XDG variable, and the folder under the home it defaults to.
_XDG = {"cache": ("XDG_CACHE_HOME", ".cache"), "config": ("XDG_CONFIG_HOME", ".config")}


def user_dir(kind: Literal["cache", "config"]) -> Path:
    """``$XDG_CACHE_HOME/coldkeep`` or ``$XDG_CONFIG_HOME/coldkeep`` (under
    ~/.cache or ~/.config where the variable is unset or relative)."""
    variable, default = _XDG[kind]
    xdg = os.environ.get(variable, "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / default
    return base / "coldkeep"
