"""The ``coldkeep`` command line: a client of ``coldkeep.core.archiver``, one
module per family of commands over one kit (context, options, exit codes).

Modules, in reading order: ``main`` (the group; every family registered),
``kit`` (what every command shares), ``progress`` (an operation's progress on
stderr), then the families: ``operations`` (a command made from each entry of
tui/operations), ``inspect`` (status, plan, history), ``console`` (the console
and the fleet view opened), ``run`` (the scheduler in the foreground),
``demo``, ``doctor``, ``holds`` (hold add/list/release), ``metrics``.
"""
