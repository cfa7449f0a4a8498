"""coldkeep.core is a library: importing all of it, subpackages included, pulls in
no Textual and no Rich live display (the console and CLI are its clients, never
the reverse). The static side of the same rule is import-linter's contracts in
pyproject.toml."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

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


SPAWNS = """
import subprocess
started = []
popen = subprocess.Popen.__init__
def noting(self, args, *rest, **kw):
    started.append(args)
    popen(self, args, *rest, **kw)
subprocess.Popen.__init__ = noting
import sys
import coldkeep.tui.cli.main
from pathlib import Path
from coldkeep.core.base.config import load_settings
load_settings(Path(sys.argv[1]))
print(started)
"""


def test_a_command_starts_no_process_to_start(tmp_path: Path) -> None:
    """Importing the CLI and reading a config (the jobs' default schedules
    included) start no other process: croniter, imported and asked to check
    every schedule before, ran ``file`` on the Python binary in every command."""
    config = tmp_path / "coldkeep.toml"
    config.write_text('live_root = "live"\narchive_root = "archive"\n')
    (tmp_path / "live").mkdir()
    out = subprocess.run(
        [sys.executable, "-c", SPAWNS, str(config)], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == "[]", f"importing the CLI and reading a config started {out}"
