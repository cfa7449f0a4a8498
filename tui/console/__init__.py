"""The Textual console (and the fleet view), a folder a layer, top to bottom:
the app (app.py over own.py, its own actions, over state.py, its state) and,
beside it, the fleet view (fleet/); the screens and the panes; the widgets they
share (widgets/); and the kit they all run on (kit/: the one registry of actions
that feeds keys, buttons, help and the palette, and the messages). Workers only
post messages; handlers own the state; each layer imports only those below it,
and nothing here imports in a circle (import-linter).

Its modules, one line each, are in the module map of docs/architecture.md.
"""
