"""The footer, and the fitting it shares with the action bar: a row of keys (or
buttons) that never runs off the screen. What does not fit is left out whole,
from the end of the row, except the ones kept (Quit, Stop); when keys are left
out the main console's footer says ``? Help``, where every key is (and the
palette, ^p)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.events import Resize
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

# Kept in the row whatever its width: the way out, and the way to stop what runs.
KEEP = ("quit", "stop")
HELP = ("question_mark", "?", "Help", "help")  # key, shown as, label, action


def fit(items: Sequence[tuple[str, int]], width: int, keep: Iterable[str] = KEEP) -> list[str]:
    """The names of ``items`` ((name, width) in row order) that fit in ``width``
    columns: every one if they fit, else the first ones in order that fit beside
    the kept ones (``keep``, never left out)."""
    if sum(w for _, w in items) <= width:
        return [name for name, _ in items]
    kept = set(keep)
    room = width - sum(w for name, w in items if name in kept)
    shown = set(kept)
    for name, w in items:
        if name in kept:
            continue
        if w > room:
            break  # the rest are left out, not a later, narrower one out of order
        shown.add(name)
        room -= w
    return [name for name, _ in items if name in shown]


class FittedFooter(Footer):
    """Textual's footer with only the keys that fit its width: in order, Quit and
    Stop always, and (``help_hint``: where help lists every key) ``? Help`` when any
    are left out."""

    def __init__(self, *, compact: bool = False, help_hint: bool = False) -> None:
        super().__init__(compact=compact)
        self.help_hint = help_hint
        self._width = 0

    def compose(self) -> ComposeResult:
        keys = [k for k in super().compose() if isinstance(k, FooterKey)]
        palette = [k for k in keys if k.has_class("-command-palette")]
        row = [k for k in keys if k not in palette]
        # The palette key is docked right, after a space and a bar (and padded on
        # its right when not compact).
        pad = 1 if self.compact else 2
        width = (self._width or self.app.size.width) - sum(self._width_of(k) + pad for k in palette)
        shown = fit([(k.action, self._width_of(k)) for k in row], width)
        if self.help_hint and len(shown) < len(row) and all(k.action != "help" for k in row):
            # Some are left out: say where they all are, just before Quit.
            at = next((i for i, k in enumerate(row) if k.action == "quit"), len(row))
            row.insert(at, FooterKey(*HELP).data_bind(compact=Footer.compact))
            items = [(k.action, self._width_of(k)) for k in row]
            shown = fit(items, width, (*KEEP, "help"))
        yield from (k for k in row if k.action in shown)
        yield from palette

    def on_resize(self, event: Resize) -> None:
        if event.size.width != self._width:
            self._width = event.size.width
            self.call_after_refresh(self.recompose)

    def _width_of(self, key: FooterKey) -> int:
        """The columns ``key`` takes: compact, its key, a space, its label and a
        space after; else its key padded a space each side, its label and a space."""
        shown, label = cell_len(key.key_display), cell_len(key.description)
        if self.compact:
            return shown + (1 + label if label else 0) + 1
        return shown + 2 + (label + 1 if label else 0)
