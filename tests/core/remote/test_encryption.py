"""What counts as an object encrypted as ``[remote] sse`` asks: the mode the
server names, and a KMS key asked for by id matched against the ARN it names."""

from __future__ import annotations

import pytest

from coldkeep.core.remote.objectstore import Encryption

ARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
KEY = "1234abcd-12ab-34cd-56ef-1234567890ab"


@pytest.mark.parametrize(
    ("asked", "got", "ok"),
    [
        (Encryption(), Encryption(), True),
        (Encryption(), Encryption("AES256"), True),  # nothing asked: anything goes
        (Encryption("AES256"), Encryption("AES256"), True),
        (Encryption("AES256"), Encryption(), False),
        (Encryption("AES256"), Encryption("aws:kms", ARN), False),
        (Encryption("aws:kms"), Encryption("aws:kms", ARN), True),  # the account's key
        (Encryption("aws:kms", KEY), Encryption("aws:kms", ARN), True),
        (Encryption("aws:kms", ARN), Encryption("aws:kms", ARN), True),
        (Encryption("aws:kms", "0000-other"), Encryption("aws:kms", ARN), False),
        (Encryption("aws:kms", KEY[4:]), Encryption("aws:kms", ARN), False),  # not a suffix match
        (Encryption("aws:kms", "alias/archive"), Encryption("aws:kms", ARN), True),
        (Encryption("aws:kms", KEY), Encryption("AES256"), False),
    ],
)
def test_an_object_is_encrypted_as_asked(asked: Encryption, got: Encryption, ok: bool) -> None:
    assert asked.satisfied_by(got) is ok


def test_it_reads_as_an_operator_says_it() -> None:
    assert str(Encryption()) == "no server-side encryption"
    assert str(Encryption("aws:kms", "k1")) == "server-side encryption aws:kms with key k1"
