"""coldkeep's core: an asyncio library that moves cold data out of a live tree.

The layers, each using only the ones below it (import-linter checks it):

    sched      clock, jobs, alerts, daemon: unattended mode, a client of the archiver
    archiver   the core API: one session (lock, audit, events) per operation
    passes     the pass engine: recovery, then files, then event rows
    plan · status · attach · demo
               the backlog counted without writing; the archive's state, read
               without the lock; the event socket for consoles; a demo site
    files | events
               the two families of cold data, independent of each other
    base       config, layout, beneath, globs, fsutil, ioerror, space, cancel,
               ratelimit, codec, steps, stream, lock, manifest, audit

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
    manifest   coldkeep.db: its schema, entries, passes, restore intents
    audit      who did what to the archive (the ``audit`` table)

then ``files`` (the per-file protocol and what reads its gzips), ``events`` (rows
into month databases and back), and the layers above: each package's docstring
lists its modules.

Nothing here imports Textual or Rich's live display: the console, the CLI and the
scheduler are clients of this package (a test and an import-linter contract hold
that line).
"""
