"""The Textual console: the app, its panes and screens, the fleet view, and the
one registry of actions that feeds keys, buttons, help and the palette. Workers
only post messages; handlers own the state.

Modules, in reading order: ``app`` (``ColdkeepApp``: its state, the workers, the
handlers, every operation run through one path), ``actions`` (the registry of
actions: the operations' from tui/operations and the console's own),
``messages`` (what workers and screens post to the app), ``panes/`` (one widget
per pane), ``screens/`` (the confirmation, help, the restore browser, the legal
holds), ``fleet`` (the fleet view, its own small app), ``tables`` (keyed, diffed
DataTable updates), ``priority`` (background threads at a lower priority),
``pilot`` (waiting for the console to settle).
"""
