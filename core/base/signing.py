"""The site's signing key (Ed25519): ``<archive_root>/coldkeep.sitekey``, what it
signs, and the fingerprint an operator writes down beside the identity file.

A manifest snapshot in the bucket is trusted on the day the host is gone only
if this key signed it: age gives secrecy, not authenticity (anyone may seal to
a public recipient), and a bucket anyone else can write may hold anything.

Invariants:
- The private key never leaves the host in the clear: the file is 0600 PKCS#8
  PEM under archive_root, written whole or not at all (a name of its own,
  fsynced, renamed without replacing, the directory fsynced), never replaced;
  a new key is a new file after the old one is moved aside by the operator's
  command, never a silent overwrite.
- A fingerprint names one public key: ``ck:`` and 24 base32 characters (120
  bits) of its SHA-256, in groups of four, lowercase: short enough to write
  down, long enough that no second key is found to match it.
- What is signed is the domain (``coldkeep <what> 1``) and the canonical JSON of
  the statement: a signature made for one kind of statement never verifies as
  another's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .durable import fsync
from .errors import UsageError
from .fsutil import fsync_dir, open_file, rename_noreplace, unlink_if_present
from .layout import PARTIAL_SUFFIX

KEY_NAME = "coldkeep.sitekey"


class SiteKeyError(UsageError):
    """The site's key file cannot be used as it is; the message says why and
    what to do."""


def fingerprint(public: bytes) -> str:
    """The fingerprint of a raw Ed25519 public key."""
    text = base64.b32encode(hashlib.sha256(public).digest()).decode().lower()[:24]
    return "ck:" + "-".join(text[i : i + 4] for i in range(0, 24, 4))


_FINGERPRINT = re.compile(r"(?:ck:)?([a-z2-7]{4}(?:-[a-z2-7]{4}){5})")


def parse_fingerprint(text: str, option: str) -> str:
    """A fingerprint as an operator typed it (any case, ``ck:`` optional), in
    its one spelling; a ``UsageError`` naming ``option`` otherwise."""
    found = _FINGERPRINT.fullmatch(text.strip().lower())
    if found is None:
        raise UsageError(
            f"{option} {text!r}: not a site key fingerprint (ck: and six groups of four "
            "letters or digits 2-7, as coldkeep status prints it)"
        )
    return f"ck:{found[1]}"


def canonical(statement: dict[str, Any]) -> bytes:
    """The bytes a statement is signed as: sorted keys, no spaces, ASCII."""
    return json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _signed_bytes(what: str, statement: dict[str, Any]) -> bytes:
    return f"coldkeep {what} 1\n".encode() + canonical(statement)


@dataclass(frozen=True)
class SiteKey:
    """The site's private signing key."""

    private: Ed25519PrivateKey

    @classmethod
    def new(cls) -> SiteKey:
        return cls(Ed25519PrivateKey.generate())

    @property
    def public(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @property
    def public_b64(self) -> str:
        return base64.b64encode(self.public).decode()

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public)

    def sign(self, what: str, statement: dict[str, Any]) -> str:
        """The signature (base64) of ``statement`` as a ``what``."""
        return base64.b64encode(self.private.sign(_signed_bytes(what, statement))).decode()

    def pem(self) -> bytes:
        return self.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @classmethod
    def from_pem(cls, data: bytes, what: str) -> SiteKey:
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError) as err:
            raise SiteKeyError(f"{what}: not a coldkeep site key ({err})") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SiteKeyError(f"{what}: not an Ed25519 key (a coldkeep site key is one)")
        return cls(key)


def verifies(public_b64: str, signature_b64: str, what: str, statement: dict[str, Any]) -> bool:
    """Whether ``signature_b64`` is the key ``public_b64``'s signature of
    ``statement`` as a ``what``. Malformed input verifies nothing."""
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_b64, validate=True))
        public.verify(
            base64.b64decode(signature_b64, validate=True), _signed_bytes(what, statement)
        )
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def key_path(root: Path) -> Path:
    return root / KEY_NAME


def load_key(root: Path) -> SiteKey | None:
    """The key kept under archive_root ``root`` (None: there is none)."""
    path = key_path(root)
    try:
        fd = open_file(path, os.O_RDONLY, root=root)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise SiteKeyError(f"{path}: cannot be read ({err.strerror or err})") from None
    with os.fdopen(fd, "rb") as f:
        return SiteKey.from_pem(f.read(), str(path))


def save_key(root: Path, key: SiteKey) -> bool:
    """``key`` kept under archive_root ``root`` where no key is yet (False: one
    is, and nothing changed). A key file a kill left half-written before its
    rename is removed first: a key is made under the archive lock, so no other
    process is writing one, and its bytes are a private key's."""
    path = key_path(root)
    for left in root.glob(f"{KEY_NAME}.*{PARTIAL_SUFFIX}"):
        unlink_if_present(left, root=root)
    tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}")
    fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, root=root)
    try:
        try:
            os.write(fd, key.pem())
            fsync(fd, "sitekey.data")
        finally:
            os.close(fd)
        placed = rename_noreplace(tmp, path, root=root) == "renamed"
    finally:
        unlink_if_present(tmp, root=root)
    fsync_dir(root, root=root, site="sitekey.placed")
    return placed
