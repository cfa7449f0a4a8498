"""coldkeep.db: the one SQLite database of an archive. Each table is owned by one
module here, and only ``manifest`` holds the connection; the layers above reach
a table through the module that owns it.

The module map (docs/architecture.md) lists its modules.
"""
