"""What S3 charges, as estimates: the provider's public list prices (AWS, us-east-1,
USD) for storing a GB a month in each class and for thawing by tier. A plan that
shows a cost shows one of these, labelled as an estimate: a bill depends on the
region, the contract and the minimum stays and sizes each class bills."""

from __future__ import annotations

GB = 1024**3

#: USD per GB-month, by storage class.
STORAGE_USD_PER_GB_MONTH = {
    "STANDARD": 0.023,
    "STANDARD_IA": 0.0125,
    "ONEZONE_IA": 0.01,
    "INTELLIGENT_TIERING": 0.023,
    "GLACIER_IR": 0.004,
    "REDUCED_REDUNDANCY": 0.024,
    "GLACIER": 0.0036,
    "DEEP_ARCHIVE": 0.00099,
}

#: USD per GB retrieved and per 1,000 restore requests, by class and tier.
RETRIEVAL_USD = {
    ("GLACIER", "expedited"): (0.03, 10.0),
    ("GLACIER", "standard"): (0.01, 0.05),
    ("GLACIER", "bulk"): (0.0, 0.0),
    ("DEEP_ARCHIVE", "standard"): (0.02, 0.10),
    ("DEEP_ARCHIVE", "bulk"): (0.0025, 0.025),
}


def retrieval_usd(storage_class: str, tier: str, size: int, requests: int) -> float:
    """The estimated cost of thawing ``requests`` objects of ``size`` bytes in
    all from ``storage_class`` at ``tier`` (0 where the table has no price)."""
    per_gb, per_thousand = RETRIEVAL_USD.get((storage_class, tier), (0.0, 0.0))
    return size / GB * per_gb + requests / 1000 * per_thousand
