"""coldkeep's terminal front-ends, both clients of ``coldkeep.core.archiver``:
``cli`` (the click commands) and ``console`` (the Textual console), over what
they share: ``operations`` (every operation declared once: its command, its
console action and question, its result's words) and ``text`` (what both say).

Its modules, one line each, are in the module map of docs/architecture.md.
"""
