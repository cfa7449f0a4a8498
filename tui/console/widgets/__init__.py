"""The console's own widgets, shared by the app, its panes and screens and the
fleet view: the status line and action bar, the footer, keyed tables, charts
and the text field.

A widget here is handed what it shows and knows nothing of the app, the panes
or the screens (import-linter: the console's layers).
Its modules, one line each, are in the module map of docs/architecture.md.
"""
