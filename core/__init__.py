"""coldkeep's core: an asyncio library that moves cold data out of a live tree.

Each layer is a folder (``archiver`` the one flat module) and uses only the
layers below it; import-linter's layers contract (pyproject.toml) checks every
import:

    sched      unattended mode (jobs, alerts, the daemon) and the metrics
    archiver   the API every client drives: one session per operation
    ops        the operations the archiver drives
    remote     the off-host tier: the object stores and what ships to them
    files | events
               the two families of cold data, independent of each other
    store      coldkeep.db: the one connection, a module per table family
    base       settings, paths, safe file operations, codec, steps, stream, lock

The module map in docs/architecture.md names every module, bottom layer first
(read the base in that order and the protocol grows step by step), and each
folder's ``__init__`` says what the folder owns.

Nothing here imports Textual or Rich's live display: the console, the CLI and the
scheduler are clients of this package (a test and an import-linter contract hold
that line).
"""
