"""The byte rate cap (``io.bytes_per_s``): one token bucket shared by every read of
archive, verify and restore, taken from worker threads.

Invariants:
- Pay first, then wait off the debt: ``take(n)`` subtracts ``n`` and sleeps until
  the balance is back to zero, so over any run the bytes moved never exceed
  ``rate * elapsed + burst``. Concurrent takers queue behind each other's debt, so
  the cap is on the sum, not per file.
- Idle time refills at most ``burst`` bytes (a quarter second's worth by default):
  a long pause does not buy a long full-speed burst afterwards.
- Waiting is a cancellable sleep in the calling worker thread; the event loop never
  waits on the bucket.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .cancel import CancelToken


class RateLimiter:
    def __init__(
        self,
        bytes_per_s: int,
        *,
        burst: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if bytes_per_s < 0:
            raise ValueError("bytes_per_s must be >= 0 (0 means no cap)")
        self.rate = bytes_per_s
        self.burst = burst if burst is not None else bytes_per_s // 4
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._balance = 0.0
        self._stamp = clock()

    def take(self, n: int, cancel: CancelToken | None = None) -> None:
        """Account for ``n`` bytes, sleeping this thread as long as the cap needs."""
        if self.rate <= 0 or n <= 0:
            return
        with self._lock:
            now = self._clock()
            self._balance = min(self.burst, self._balance + (now - self._stamp) * self.rate)
            self._stamp = now
            self._balance -= n
            wait = -self._balance / self.rate if self._balance < 0 else 0.0
        if wait > 0:
            if cancel is not None:
                cancel.sleep(wait)
            else:
                self._sleep(wait)


UNLIMITED = RateLimiter(0)
