"""The base: what every other layer of the core stands on: settings, where
things live under archive_root, paths reached without following a link, safe
file operations, errors, time, the codec, the step hook, the event stream, the
archive lock. Nothing of coldkeep.db's tables.

Each module uses only this folder and the standard library (and the codecs).
Its modules, one line each, are in the module map of docs/architecture.md.
"""
