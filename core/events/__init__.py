"""Event rows: from the application's live SQLite table into monthly archive
databases, and back; the live WAL checkpointer.

Uses ``base`` and ``store``, nothing of ``files`` or the layers above.
Its modules, one line each, are in the module map of docs/architecture.md.
"""
