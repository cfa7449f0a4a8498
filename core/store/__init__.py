"""coldkeep.db: the one SQLite database of an archive. Each table is owned by one
module here, and only ``connection`` holds a connection (the ``Manifest`` of
``manifest`` is built on it); the layers above reach a table through the module
that owns it (its statements, its row types), and ``schema`` holds the
migrations that build them all.

Uses only ``base``. Its modules, one line each, are in the module map of docs/architecture.md.
"""
