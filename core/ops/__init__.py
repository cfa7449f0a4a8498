"""The operations the ``Archiver`` drives: the pass engine, one operation's
session, recovery's own commands, the remote tier's operations, the plan,
status, doctor, the attach socket, expiry, the fleet view's core and the demo
site.

The module map (docs/architecture.md) lists its modules.
"""
