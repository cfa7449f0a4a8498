"""Render the console's screens from demo data, as SVG (Textual) and PNG.

    python screenshots/render.py            # writes screenshots/*.svg and *.png

The demo site is written fresh on a pinned clock, as ``coldkeep demo`` writes it
for a newcomer (weeks of recorded passes and backlog samples), so the pictures
change only when the console does. PNGs need rsvg-convert (Debian: librsvg2-bin); without it
only the SVGs are written.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from coldkeep.core.base.config import load_settings
from coldkeep.core.ops.demo import write_demo
from coldkeep.tui.console.app import ColdkeepApp
from coldkeep.tui.console.kit.pilot import press, settle

HERE = Path(__file__).resolve().parent
NOW_MS = 1_793_534_400_000  # 2026-11-01 12:00 UTC
SHOTS = [
    ("main-120x36", (120, 36), ()),
    ("main-80x24", (80, 24), ()),
    ("pass-confirm", (120, 36), ("p",)),
    ("after-pass", (120, 36), ("p", "y")),
    ("restore-browser", (120, 36), ("p", "y", "r", "down", "space", "down", "space")),
    ("help", (100, 30), ("question_mark",)),
    ("events", (120, 36), ("p", "y", "E")),
    ("trends", (120, 36), ("p", "y", "T")),
    ("trends-80x24", (80, 24), ("p", "y", "T")),
]
# Drawn without the pass's toast over the charts.
QUIET = {"events", "trends", "trends-80x24"}


async def shoot(config: Path, size: tuple[int, int], keys: tuple[str, ...], *, quiet: bool) -> str:
    app = ColdkeepApp(load_settings(config), clock=lambda: NOW_MS, watch_live=False)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await press(pilot, *keys)
        if quiet:
            app.clear_notifications()
            await settle(pilot)
        return app.export_screenshot(title="coldkeep")


def main() -> None:
    os.environ["TZ"] = "UTC"
    time.tzset()
    png = shutil.which("rsvg-convert")
    for name, size, keys in SHOTS:
        with tempfile.TemporaryDirectory() as tmp:
            site = write_demo(Path(tmp) / "demo", seed=7, scale=0.1, now_ms=NOW_MS, history_days=42)
            site.config.write_text(site.config.read_text() + "\n[io]\nworkers = 1\n")
            svg = asyncio.run(shoot(site.config, size, keys, quiet=name in QUIET))
        (HERE / f"{name}.svg").write_text(svg)
        if png:
            subprocess.run(
                [png, "-o", str(HERE / f"{name}.png"), str(HERE / f"{name}.svg")], check=True
            )
        print(f"screenshots/{name}.svg" + (" .png" if png else ""))


if __name__ == "__main__":
    main()
