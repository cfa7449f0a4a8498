"""coldkeep.core is a library: importing all of it, subpackages included, pulls in
no Textual and no Rich live display (the console and CLI are its clients, never
the reverse). The static side of the same rule is import-linter's contracts in
pyproject.toml."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import coldkeep.core

CHECK = """
import importlib, pkgutil, sys
import coldkeep.core
for m in pkgutil.walk_packages(coldkeep.core.__path__, "coldkeep.core."):
    importlib.import_module(m.name)
bad = sorted(n for n in sys.modules if n.split(".")[0] == "textual" or n.startswith("rich.live"))
print(",".join(bad))
"""


def test_core_imports_no_textual() -> None:
    modules = {m.name for m in pkgutil.walk_packages(coldkeep.core.__path__, "coldkeep.core.")}
    assert {"coldkeep.core.files.gzfile", "coldkeep.core.sched.jobs"} <= modules
    assert "coldkeep.core.store.manifest" in modules
    out = subprocess.run(
        [sys.executable, "-c", CHECK], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == "", f"coldkeep.core imported {out}"
