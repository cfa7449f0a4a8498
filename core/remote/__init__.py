"""The off-host tier: one small async interface (objectstore.py) over a directory
(``file://``) and S3 or anything speaking its API, opened through connect.py; and
what ships to it, verifies it and reads it back (ship, verify, fetch, rebuild)."""
