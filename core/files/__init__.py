"""Live files and their gzips: the per-file protocol and everything that reads or
settles what it wrote.

    gzfile       the per-file protocol: archive, verify, adopt, restore, sweep
    filemove     one live file end to end: the protocol, its entry, the unlink
    bundle       the bundle format: a plain tar of small files' gzips and an index
    bundlemove   small files end to end, a bundle at a time
    orphanbundle an orphan bundle settled member by member
    scan         which live files are eligible, and why the others are not
    recovery     what a crash leaves behind, found and settled
    restore      files back from their gzips, never overwriting
    verify       gzips re-read against the manifest, resumable
    rebuild      a manifest from the gzips alone
    catalog      the restore browser's in-memory index of entries

This family uses ``base`` and ``store`` and nothing of ``events`` or the layers
above.
"""
