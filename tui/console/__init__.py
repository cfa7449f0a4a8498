"""The Textual console (and the fleet view): the app, its panes and screens, and
the one registry of actions that feeds keys, buttons, help and the palette.
Workers only post messages; handlers own the state; panes and screens never
import the app or the CLI (import-linter).

Its modules, one line each, are in the module map of docs/architecture.md.
"""
