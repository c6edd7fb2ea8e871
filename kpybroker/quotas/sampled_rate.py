"""Kafka's sampled rate (``Rate`` over a ``WindowedSum``) and the throttle time it implies.

Every quota but the controller-mutation one is a rate measured this way, so the numbers
a client sees in ``throttle_time_ms`` depend on each detail here: a value lands in the
current sample until the sample is one window old; ``samples + 1`` sample slots are
recycled in turn (the extra one overlaps the start of the measured span); a sample with no
event for ``samples`` windows is reset when the rate is read; and the rate divides the sum
by the time since the oldest sample, but by no less than ``samples - 1`` whole windows, so
a young sensor does not report a huge rate after its first burst.

Time is a monotonic clock in integer milliseconds (``time.monotonic_ns() // 1_000_000``),
passed in by the caller; nothing here reads a clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Java's ``Long.MAX_VALUE``: what ``Math.round`` gives for a throttle of +infinity.
_LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` each (Kafka: 11 x 1 s).

    The controller-mutation quota has its own pair (``controller.quota.window.*``).
    """

    samples: int = 11
    window_ms: int = 1000

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError("The number of samples must be at least 1.")
        if self.window_ms < 1:
            raise ValueError("The window must be at least 1 ms.")

    @classmethod
    def of_seconds(cls, samples: int, window_seconds: int) -> QuotaWindow:
        return cls(samples, window_seconds * 1000)


class _Sample:
    __slots__ = ("last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledRate:
    """The sum of recorded values per second over the last ``window.samples`` windows.

    Mirrors ``org.apache.kafka.common.metrics.stats.Rate`` with its default ``WindowedSum``
    and ``MetricConfig`` (no event-count windows), step for step, so that measured values
    and throttle times equal Kafka's to the last bit of the double.
    """

    __slots__ = ("_current", "_samples", "window")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Add ``value`` (negative to take back an earlier record) at ``now_ms``."""
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``: Kafka's ``Rate.measure``."""
        self._purge_obsolete(now_ms)
        total = 0.0
        for sample in self._samples:
            total += sample.value
        return total / (self._window_size_ms(now_ms) / 1000.0)

    def window_size_ms(self, now_ms: int) -> int:
        """The span the rate divides by: time since the oldest live sample, but at least
        ``samples - 1`` whole windows plus the elapsed part of the current one, and at least
        1 ms (Kafka's ``Rate.windowSize``)."""
        self._purge_obsolete(now_ms)
        return self._window_size_ms(now_ms)

    def _window_size_ms(self, now_ms: int) -> int:
        window_ms = self.window.window_ms
        elapsed = now_ms - self._oldest_start_ms(now_ms)
        full_windows = elapsed // window_ms
        min_full_windows = self.window.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # One slot more than `samples`: the oldest one may still overlap the measured span.
        self._current = (self._current + 1) % (self.window.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _oldest_start_ms(self, now_ms: int) -> int:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min([sample.start_ms for sample in self._samples])

    def _purge_obsolete(self, now_ms: int) -> None:
        expire_age = self.window.samples * self.window.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)


def java_round(value: float) -> int:
    """Java's ``Math.round(double)``: the exact floor(value + 1/2), NaN to 0, saturating at
    Long's bounds (``floor(value + 0.5)`` in doubles rounds 0.49999999999999994 up)."""
    if math.isnan(value):
        return 0
    if value >= _LONG_MAX:
        return _LONG_MAX
    if value <= -_LONG_MAX - 1:
        return -_LONG_MAX - 1
    floor = math.floor(value)
    return floor + 1 if value - floor >= 0.5 else floor


def throttle_time_ms(measured: float, bound: float, window_size_ms: int) -> int:
    """How long the client must stay idle for ``measured`` to fall back to ``bound``.

    Kafka's ``QuotaUtils.throttleTime``: with observed rate O, target T and window W, a
    delay X with O * W / (W + X) = T gives X = (O - T) / T * W. A zero bound gives
    +infinity, which rounds to Java's Long.MAX_VALUE; callers cap it.
    """
    difference = measured - bound
    if bound == 0:
        return _LONG_MAX if difference > 0 else 0
    return java_round(difference / bound * window_size_ms)
