"""coldkeep's core: an asyncio library that moves cold data out of a live tree.

Read the modules in this order and the protocol grows step by step:

    config     the typed, frozen settings parsed from coldkeep.toml
    layout     where everything lives under archive_root; containment checks
    globs      include/exclude patterns with ``**``
    fsutil     file identity, fsync, rename-without-replace, guarded unlink
    cancel     the graceful-cancellation token checked at safe points
    ratelimit  the byte token bucket every archive/verify/restore read goes through
    codec      streaming gzip (isal, zlib-ng, zlib) hashed in the same read
    steps      the step hook every protocol step is announced through
    gzfile     the per-file protocol: archive, verify, adopt, restore, sweep
    manifest   coldkeep.db: entries, passes, restore intents (aiosqlite)
    lock       the archive mutex on archive_root/.lock
    filemove   one live file end to end: the protocol, its entry, the unlink
    recovery   what a crash leaves behind, found and settled
    scan       which live files are eligible, and why the others are not
    eventschema  the live events table, discovered; time stamps and months
    checkpoint the live WAL checkpoint, on its own thread and connection
    dbmove     old event rows into monthly archive databases, batch by batch
    plan       the backlog, counted without writing
    demo       a realistic demo site

Nothing here imports Textual or Rich's live display: the console, the CLI and the
scheduler are clients of this package (a test holds that line).
"""
