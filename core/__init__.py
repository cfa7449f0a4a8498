"""coldkeep's core: an asyncio library that moves cold data out of a live tree.

The layers, each a folder (``archiver`` the one flat module), each using only the
ones below it (import-linter checks it):

    sched      clock, jobs, alerts, daemon, metrics: unattended mode, a client of
               the archiver
    archiver   the core API: one session (lock, audit, events) per operation
    ops        the operations: each one's session, the pass engine, recovery's
               commands, the remote tier's, expiry, the plan, status, doctor, the
               event socket for consoles, the fleet view, a demo site
    remote     the object stores, and what ships to, verifies and reads back from them
    files | events
               the two families of cold data, independent of each other
    store      coldkeep.db: its schema, the one connection, a module per table family
    base       config, layout, beneath, globs, fsutil, ioerror, space, cancel,
               ratelimit, times, codec, steps, stream, lock

Read the base in this order and the protocol grows step by step:

    config     the typed, frozen settings parsed from coldkeep.toml
    layout     where everything lives under archive_root; containment checks
    beneath    paths under a root, reached without following a link
    globs      include/exclude patterns with ``**``
    fsutil     file identity, fsync, rename-without-replace, guarded unlink
    ioerror    an I/O error that names its file, a SQLite error its database
    space      a full filesystem said in one line; the reserve that lets it be recorded
    cancel     the graceful-cancellation token checked at safe points
    ratelimit  the byte token bucket every archive/verify/restore read goes through
    times      ms since the epoch (``now_ms``) and the constants that convert to it
    codec      streaming gzip (isal, zlib-ng, zlib) hashed in the same read
    steps      the step hook every protocol step is announced through
    stream     the events every operation reports, to any number of readers
    lock       the archive mutex on archive_root/.lock

then ``store`` (coldkeep.db), ``files`` (the per-file protocol and what reads its
gzips), ``events`` (rows into month databases and back), and the layers above:
each package's docstring lists its modules.

Nothing here imports Textual or Rich's live display: the console, the CLI and the
scheduler are clients of this package (a test and an import-linter contract hold
that line).
"""
