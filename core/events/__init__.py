"""Event rows: from the application's live SQLite table into monthly archive
databases, and back.

    eventschema  the live events table, discovered; time stamps and months
    checkpoint   the live WAL checkpoint on its own thread
    dbmove       old rows into month databases, batch by batch
    restore      rows back into the live table, never overwriting

This family uses ``base`` and ``store`` (the checkpoint log, the rows a restore
put back, expired months) and nothing of ``files`` or the layers above.
"""
