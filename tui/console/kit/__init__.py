"""What every part of the console runs on, Textual's widgets aside: the one
registry of actions (keys, buttons, help, palette), the messages workers post
up, the background threads' priority, and settling the console headless.

The bottom layer: nothing here imports another part of the console
(import-linter: the console's layers).
Its modules, one line each, are in the module map of docs/architecture.md.
"""
