"""The operations the ``Archiver`` drives: one operation's session, the pass
engine, recovery's own commands, the remote tier's operations, expiry, the plan,
status, doctor, the attach socket, the fleet view's core and the demo site.

Uses every layer below. Its modules, one line each, are in the module map of docs/architecture.md.
"""
