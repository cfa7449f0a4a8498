"""Live files and their gzips: the per-file protocol (one file, or small files a
bundle at a time) and everything that reads or settles what it wrote: the scan,
recovery, restore, verify, the rebuild from gzips, the restore browser's catalog.

Uses ``base`` and ``store``, nothing of ``events`` or the layers above.
Its modules, one line each, are in the module map of docs/architecture.md.
"""
