"""The ``coldkeep`` command line: a client of ``coldkeep.core.archiver``, one
module per family of commands over one kit (context, options, exit codes).

The module map (docs/architecture.md) lists its modules.
"""
