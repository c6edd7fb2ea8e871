"""Kafka's token bucket (KIP-599), the measure behind ``controller_mutation_rate``.

A sampled rate copes badly with bursts: one large sample holds the average above the quota
until it leaves the window, whatever the quota. The bucket instead refills continuously at
the quota's rate up to a burst of ``samples * window * quota`` and goes negative when more
is taken than it holds; the debt divided by the rate is exactly how long to wait.

Time is a monotonic clock in integer milliseconds, passed in by the caller.
"""

from __future__ import annotations

from kpybroker.quotas.sampled_rate import QuotaWindow, java_round


class TokenBucket:
    """Remaining credits, refilled at ``rate`` per second up to the burst.

    The rate is passed to each call rather than kept, as Kafka reads it from the metric's
    current config: a quota changed by an operator applies to the bucket at once, and a
    lowered burst caps the credits at the next refill.
    """

    __slots__ = ("_last_update_ms", "_tokens", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self._tokens = 0.0
        self._last_update_ms: int | None = None

    def burst(self, rate: float) -> float:
        return self.window.samples * (self.window.window_ms / 1000.0) * rate

    def measure(self, rate: float, now_ms: int) -> float:
        """The credits left at ``now_ms``: negative once more was taken than the bucket held."""
        self._refill(rate, now_ms)
        return self._tokens

    def record(self, permits: float, rate: float, now_ms: int) -> None:
        """Take ``permits``; the bucket may go below zero (never above the burst)."""
        self._refill(rate, now_ms)
        self._tokens = min(self.burst(rate), self._tokens - permits)

    def _refill(self, rate: float, now_ms: int) -> None:
        burst = self.burst(rate)
        if self._last_update_ms is None:
            # Kafka starts at 0 credits refilled since epoch 0, which with wall-clock time is
            # always a full bucket; a monotonic clock may start near 0, so start full outright.
            self._tokens = burst
        else:
            elapsed_s = (now_ms - self._last_update_ms) / 1000.0
            self._tokens = min(burst, self._tokens + rate * elapsed_s)
        self._last_update_ms = now_ms


def bucket_throttle_time_ms(tokens: float, rate: float) -> int:
    """Time for a bucket ``-tokens`` in debt to refill to zero at ``rate`` per second
    (``ControllerMutationQuotaManager.throttleTimeMs``)."""
    if rate == 0:
        return java_round(float("inf"))
    return java_round(-tokens / rate * 1000)
