"""Event rows: from the application's live SQLite table into monthly archive
databases, and back.

    eventschema  the live events table, discovered; time stamps and months
    checkpoint   the live WAL checkpoint on its own thread; the checkpoint log
    holds        rows a restore put back, which passes leave alone for a while
    dbmove       old rows into month databases, batch by batch
    restore      rows back into the live table, never overwriting

This family uses the base modules and nothing of ``files`` or ``sched``.
"""
