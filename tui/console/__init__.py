"""The Textual console: the app, its panes and screens, the fleet view, and the
one registry of actions that feeds keys, buttons, help and the palette. Workers
only post messages; handlers own the state.

The module map (docs/architecture.md) lists its modules.
"""
