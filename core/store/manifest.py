"""``coldkeep.db`` open: the ``Manifest``, its connection (connection.py) with
the methods of the tables it keeps itself, each part from the module that owns
it: the entries (entries.py), their verify marks and cursor (verifystate.py),
the restore intents (restoreintents.py). Every other table's module in
``store`` takes a ``Manifest`` and sends its statements through it.

Invariants:
- One ``Manifest`` is one connection and one gate (connection.py): its parts
  share them, and none opens a connection of its own.
- Each part that commits in groups (``add_entry``, ``change_intents``) keeps
  what waits for its next commit in the ``Manifest``: one group per open
  manifest, whoever sends to it.
"""

from __future__ import annotations

from .entries import Entries
from .restoreintents import RestoreIntents
from .verifystate import VerifyState


class Manifest(RestoreIntents, VerifyState, Entries):
    """An open ``coldkeep.db``. Use ``async with await Manifest.open(path)``.

    Its entries, their verify state and the restore intents are its own methods
    (``Entries``, ``VerifyState``, ``RestoreIntents``); the other tables' modules
    in ``store`` send their statements through ``run``, ``rows``, ``insert``,
    ``insert_if_new``, ``run_many`` and ``transaction``."""
