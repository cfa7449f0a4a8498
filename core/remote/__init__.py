"""The off-host tier: one small async interface over a folder (``file://``) and
S3 or anything speaking its API, opened in one place; and what ships to it,
verifies it, reads it back and rebuilds a lost host from it.

Uses the layers below (``files`` and ``events`` included). Its modules, one
line each, are in the module map of docs/architecture.md.
"""
