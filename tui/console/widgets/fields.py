"""The console's text field (``Field``): every field an operator types in is one.

Invariant: the keys typed into a field take effect in the order they were
typed, at any speed. Textual's ``Input`` inserts a printable character in its
own handler, at once, but its editing keys (backspace, delete, the arrows,
home, end, enter) are bindings: their event bubbles up through every widget
above the field, one message queue after another, to the app, which only then
runs the field's action. Keys that come in a burst (a paste, tmux send-keys,
an operator typing ahead of a busy screen) overtook one another on the way: in
the restore browser, ``zzzzunit-0003``, 20 backspaces and ``unit:unit-0003``
typed at once left ``zzzzuni`` (Textual issue 6605). A ``Field`` runs its own
bindings in its own handler, in the queue its characters wait in, so nothing
can overtake them.

What runs is what the app would have run: the focused widget's own bindings
come first in the chain the app searches, and priority bindings (the app's and
the screens') were acted on before the key reached the field, so only the
field's non-priority ones are taken here.

The app hands each key to the widget focused when it reads the key, into that
widget's own queue: in a burst, every key typed after one that moves the focus
away (Down to the results, Enter) was already handed to the field. Such a key
goes on to the widget focused now, as the app would have sent it had it read it
a moment later: "/", Down and q typed at once go to the filter, the table, and
quit; q never lands in the filter as text.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input


class Field(Input):
    async def _on_key(self, event: events.Key) -> None:
        focused = self.screen.focused
        if focused is not None and focused is not self:
            event.prevent_default()
            event.stop()
            focused._forward_event(events.Key(event.key, event.character))
            return
        for binding in self._bindings.key_to_bindings.get(event.key, ()):
            if not binding.priority and await self.app.run_action(binding.action, self):
                # Handled: neither Input's handler nor the app sees it again.
                event.prevent_default()
                event.stop()
                return
