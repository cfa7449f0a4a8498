"""The ``coldkeep`` command line: a client of ``coldkeep.core.archiver``. ``main``
is the group; each family of commands is a module over one kit (context,
options, progress, exit codes); the operations' commands are made from their
entries in ``tui.operations``.

Its modules, one line each, are in the module map of docs/architecture.md.
"""
