"""The off-host tier's storage: one small async interface (store.py) over a
directory (``file://``) and S3 or anything speaking its API."""
