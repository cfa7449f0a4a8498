"""Modules imported when first used. A command pays at its start for every module
its own imports reach (the CLI starts on every command an operator types): a
module that many commands' code names but few run, such as an operation's,
is named through ``lazy`` and imported by its first attribute read.

Invariants: the import is Python's own (``importlib.import_module``: under the
import lock, once, from any thread), so an error in the module surfaces at
that first read as an ``ImportError`` would at the top; type checkers see the
real module (the caller binds the name under ``TYPE_CHECKING`` to the module
itself), and the name and the module's path stand side by side.
"""

from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for the module ``name`` until an attribute is read from it."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy(package: str | None, **modules: str) -> dict[str, LazyModule]:
    """A stand-in for each module, by the name to bind it to: ``tier="ops.tier"``
    is ``{package}.ops.tier``. The caller binds the same names to the modules
    themselves under ``TYPE_CHECKING``, and these otherwise (``globals().update``)."""
    return {name: LazyModule(f"{package}.{module}") for name, module in modules.items()}
