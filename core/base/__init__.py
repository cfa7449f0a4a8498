"""The base: what every other layer of the core stands on, and nothing of
coldkeep.db's tables: settings, where things live, safe file operations, time,
the codec, the step hook, the event stream, the archive lock.

The module map (docs/architecture.md) lists its modules; each uses only this
folder and the standard library.
"""
