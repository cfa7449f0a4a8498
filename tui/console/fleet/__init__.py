"""The fleet view (``coldkeep console --remote URL``): every site that ships to one
remote prefix, read from the manifest snapshots its ships left there, searched
together, and restored from into a local folder, with no site's host and no
coldkeep.toml (core/ops/fleet.py does the work).

Read-only: nothing is written to the remote or to any site. The only writes are
the snapshot cache and a confirmed restore, always under the target directory
the operator names (never in place): one site's files straight under it, the
files of several sites each under ``<target>/<site>/``.

The main console's model: workers only post messages (messages.py), the
screen's handlers own the state (view.py); one registry (actions.py) makes the
bindings, the footer, help and the palette; the tables are keyed and diffed; a
restore asks first, showing what will be written where (restore.py). How each
site's state is gathered is sites.py; the table of matching files, matches.py.
The Events screen (events.py, its reads lakeread.py) is SQL over the fleet's
lake, as ``coldkeep query --fleet``.

It stands beside the main console, never on it: it uses the screens, widgets
and kit they share, and nothing of the app (import-linter: the console's layers).
Its modules, one line each, are in the module map of docs/architecture.md.
"""
