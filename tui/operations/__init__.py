"""The operations, each declared once: its ``coldkeep`` command (name, help,
options, the archiver call they make), when its result counts as failed, its
console action and the question the console asks first, and its result in
words (the JSON is the result's own ``to_dict()``, docs/json.md).

The CLI makes a command of every entry (tui/cli/operations.py); the console
makes every entry's action a key, a button, a help line and a palette entry
(tui/console/kit/actions.py) and runs it through one path (ask, then start);
both say any result in words through ``headline`` and ``report`` here.

Adding an operation touches three files: its core module, its ``Archiver``
method and its entry in a family module here (an ``Operation`` in that
module's ``OPERATIONS``).

The registry of every entry is ``registry.py``; this package's import loads
nothing, so a command that needs one family (or ``spec``) pays for it alone.
Its modules, one line each, are in the module map of docs/architecture.md.
"""
