"""The site key's file under archive_root: a key file a kill left half-written
(before its rename) is removed when the key is made again, never left beside
the key with a private key's bytes in it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from coldkeep.core.base.signing import KEY_NAME, SiteKey, key_path, load_key, save_key


def test_a_half_written_key_file_is_removed_when_the_key_is_made(tmp_path: Path) -> None:
    left = tmp_path / f"{KEY_NAME}.9982b14f.partial"
    left.write_bytes(SiteKey.new().pem()[:40])  # a kill between the write and the rename
    key = SiteKey.new()
    assert save_key(tmp_path, key)
    assert sorted(p.name for p in tmp_path.iterdir()) == [KEY_NAME]
    kept = load_key(tmp_path)
    assert kept is not None and kept.fingerprint == key.fingerprint
    assert stat.S_IMODE(os.stat(key_path(tmp_path)).st_mode) == 0o600
    assert not save_key(tmp_path, SiteKey.new()), "a key there is never replaced"
