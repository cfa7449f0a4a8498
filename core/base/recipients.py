"""Age X25519 recipients, as ``[remote] encrypt_to`` lists them: checked when the
config is read, sorted into a set whose fingerprint names it in the manifest.

Invariants: only public keys are accepted (a secret key is refused without
being echoed); the set is the same whatever the order of the list.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import pyrage
from pyrage import x25519

from .errors import UsageError

_RECIPIENT_PREFIX = "age1"


class RecipientInvalid(UsageError):
    """One of ``[remote] encrypt_to``'s values cannot be sealed to. ``key``,
    ``problem`` and ``fix`` are what a config error is built from."""

    def __init__(self, index: int, problem: str, fix: str) -> None:
        self.key = f"encrypt_to[{index}]"
        self.problem = problem
        self.fix = fix
        super().__init__(f"remote.{self.key}: {problem} ({fix})")


def short(recipient: str) -> str:
    """A recipient as a message shows it: enough to find it in a key file."""
    return f"{recipient[:12]}…{recipient[-6:]}" if len(recipient) > 20 else recipient


@dataclass(frozen=True)
class RecipientSet:
    """The recipients an object is sealed to, sorted (their order in the config
    changes nothing)."""

    keys: tuple[str, ...]
    _parsed: tuple[x25519.Recipient, ...] = field(repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        """12 hex digits naming the set, the same for the same keys in any order:
        what an object records as the set it was sealed to."""
        return hashlib.sha256("\n".join(self.keys).encode()).hexdigest()[:12]

    def describe(self) -> str:
        """The set in a message: each recipient shortened, and its fingerprint."""
        return f"{', '.join(short(k) for k in self.keys)} (set {self.fingerprint})"


def _recipient_problem(value: object) -> tuple[str, str] | None:
    """Why ``value`` is not an X25519 recipient, never echoing a secret key."""
    fix = "use the age1… public key age-keygen printed; age-keygen -y KEYFILE prints it again"
    if not isinstance(value, str):
        return f"is {type(value).__name__}, not a string", fix
    text = value.strip()
    if "SECRET-KEY" in text.upper():
        return (
            "is a secret key",
            "put only the public key (age1…) on the host; keep the secret off it",
        )
    if text.startswith(("ssh-", "ecdsa-")):
        return "is an SSH key", "only age X25519 recipients are supported: " + fix
    if not text.startswith(_RECIPIENT_PREFIX) or text.startswith("age1pq1"):
        return f"{short(text)!r} is not an age X25519 recipient", fix
    try:
        x25519.Recipient.from_str(text)
    except pyrage.RecipientError:
        return f"{short(text)!r} is not a valid age X25519 recipient (a plugin's, or mistyped)", fix
    return None


def parse_recipients(values: Sequence[object]) -> RecipientSet:
    """``[remote] encrypt_to``'s list, checked: each an age X25519 public key,
    none twice; ``RecipientInvalid`` names the first bad one by its index."""
    if not values:
        raise RecipientInvalid(
            0, "the list is empty", "list an age1… recipient, or remove encrypt_to"
        )
    seen: dict[str, int] = {}
    parsed: dict[str, x25519.Recipient] = {}
    for i, value in enumerate(values):
        problem = _recipient_problem(value)
        if problem is not None:
            raise RecipientInvalid(i, *problem)
        recipient = x25519.Recipient.from_str(cast(str, value).strip())
        canonical = str(recipient)
        if canonical in seen:
            raise RecipientInvalid(i, f"repeats encrypt_to[{seen[canonical]}]", "list it once")
        seen[canonical] = i
        parsed[canonical] = recipient
    keys = tuple(sorted(parsed))
    return RecipientSet(keys, tuple(parsed[k] for k in keys))
