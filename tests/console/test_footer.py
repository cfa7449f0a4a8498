"""The header's buttons and the footer's keys fit the terminal: what does not fit
is left out whole (not cut, nor run under the palette key), Quit and Stop stay,
and the main console's footer then says ``? Help``, where every key is."""

from __future__ import annotations

import pytest
from textual.widgets import Button, Footer
from textual.widgets._footer import FooterKey

from coldkeep.core.base.config import Settings, load_settings
from coldkeep.tui.console.widgets.footer import fit

from consolekit import make_app, settle


def test_fit_keeps_the_kept_and_the_first_that_fit_in_order() -> None:
    row = [("a", 5), ("b", 5), ("c", 3), ("stop", 4), ("quit", 4)]
    assert fit(row, 21) == ["a", "b", "c", "stop", "quit"]
    assert fit(row, 17) == ["a", "stop", "quit"], "c fits but is not shown before b"
    assert fit(row, 8) == ["stop", "quit"]


@pytest.mark.parametrize(
    ("size", "retention"),
    [pytest.param((80, 24), False, id="80"), pytest.param((120, 36), True, id="120-expire")],
)
async def test_the_buttons_and_the_keys_fit_and_quit_stays(
    settings: Settings, size: tuple[int, int], retention: bool
) -> None:
    if retention:  # Expire is offered: one key and one button more
        assert settings.config_path is not None
        with settings.config_path.open("a") as config:
            config.write("\n[retention]\nfiles_days = 3650\n")
        settings = load_settings(settings.config_path)
    app = make_app(settings)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        width = size[0]
        keys = list(app.screen.query_one(Footer).query(FooterKey))
        [palette] = [k for k in keys if k.has_class("-command-palette")]
        row = [k for k in keys if k is not palette]
        assert palette.region.right <= width
        assert all(k.region.right < palette.region.x for k in row), [
            (k.action, k.region) for k in row
        ]
        shown = [k.action for k in row]
        assert shown[-3:] == ["stop", "help", "quit"], shown
        assert "run_pass" in shown and ("expire" in shown) == retention

        bar = app.query_one("#actions")
        buttons = list(bar.query(Button))
        visible = [b for b in buttons if b.display]
        if width == 80:
            assert len(visible) < len(buttons), "some are left out, whole"
        assert all(b.region.right <= bar.region.right for b in visible)
        assert {"do-run_pass", "do-stop", "do-quit"} <= {b.id for b in visible}
