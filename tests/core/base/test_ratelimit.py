"""The byte token bucket, on an injected clock: exact, not timed."""

from __future__ import annotations

import threading

import pytest

from coldkeep.core.base.cancel import Cancelled, CancelToken
from coldkeep.core.base.ratelimit import RateLimiter

MiB = 1 << 20


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += seconds


@pytest.mark.parametrize("rate", [64 * 1024, MiB, 50 * MiB])
@pytest.mark.parametrize("chunk", [4096, MiB])
def test_rate_is_held_within_a_percent(rate: int, chunk: int) -> None:
    clock = FakeClock()
    bucket = RateLimiter(rate, clock=clock, sleep=clock.sleep)
    total = 40 * MiB
    start = clock.now
    for _ in range(total // chunk):
        bucket.take(chunk)
    elapsed = clock.now - start
    assert elapsed == pytest.approx(total / rate, rel=0.01)


def test_idle_time_buys_at_most_a_burst() -> None:
    clock = FakeClock()
    bucket = RateLimiter(MiB, clock=clock, sleep=clock.sleep)
    clock.now += 3600  # an hour idle
    start = clock.now
    for _ in range(10):
        bucket.take(MiB)
    # 10 MiB at 1 MiB/s, minus at most a quarter second of saved-up burst.
    assert clock.now - start == pytest.approx(10 - 0.25, abs=0.01)


def test_concurrent_takers_share_one_cap() -> None:
    clock = FakeClock()
    bucket = RateLimiter(MiB, clock=clock, sleep=clock.sleep)
    start = clock.now

    def worker() -> None:
        for _ in range(8):
            bucket.take(MiB)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 32 MiB in total at 1 MiB/s: the sleeps of all takers add up to the whole.
    assert clock.now - start >= 32 - 0.25


def test_no_cap_never_sleeps() -> None:
    def fail(_: float) -> None:
        raise AssertionError("slept")

    RateLimiter(0, sleep=fail).take(10 * MiB)


def test_a_capped_wait_is_cancellable() -> None:
    token = CancelToken()
    token.cancel("operator asked")
    bucket = RateLimiter(1024)
    with pytest.raises(Cancelled, match="operator asked"):
        bucket.take(MiB, token)
