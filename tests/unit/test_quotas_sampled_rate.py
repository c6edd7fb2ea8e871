"""The sampled rate and its throttle time, against numbers from Kafka's own classes.

Every expected value here was computed by Kafka 4.4's ``org.apache.kafka.common.metrics``
(a ``Sensor`` with a ``Rate`` under a ``MetricConfig`` of the given samples, 1 s windows and
an upper-bound ``Quota``) and ``QuotaUtils.throttleTime`` / ``boundedThrottleTime``, fed the
same records at the same times: the rate must match to the last bit of the double.
"""

from __future__ import annotations

import pytest

from kpybroker.quotas.sampled_rate import (
    QuotaWindow,
    SampledRate,
    java_round,
    throttle_time_ms,
)

T = 1_700_000_000_000  # any millisecond clock reading
NO_CAP = 1 << 62


def replay(
    bound: float, samples: int, events: list[tuple[int, float]], cap: int = NO_CAP
) -> list[tuple[int, float, int]]:
    """(window size, rate, throttle) after each record, as a quota sensor would see them."""
    rate = SampledRate(QuotaWindow(samples, 1000))
    seen = []
    for at, value in events:
        rate.record(value, at)
        measured = rate.measure(at)
        window = rate.window_size_ms(at)
        throttle = min(throttle_time_ms(measured, bound, window), cap) if measured > bound else 0
        seen.append((window, measured, throttle))
    return seen


def test_bursts_gaps_and_purged_samples_match_kafka() -> None:
    events = [
        (T, 5000),
        (T + 500, 8000),
        (T + 1500, 2000),
        (T + 9999, 100),
        (T + 10000, 1),  # the 11th window: the first sample's slot is still kept
        (T + 12000, 1),  # the first samples have left the window
        (T + 25000, 10),  # after 11 s without records, every sample is reset
        (T + 25001, 30000),
        (T + 36001, 0),
    ]
    assert replay(1000, 11, events) == [
        (10000, 500.0, 0),
        (10500, 1238.095238095238, 2500),
        (10500, 1428.5714285714287, 4500),
        (10999, 1372.8520774615874, 4101),
        (10000, 1510.1, 5101),
        (10500, 200.1904761904762, 0),
        (10000, 1.0, 0),
        (10001, 3000.6999300069997, 20009),
        (10000, 0.0, 0),
    ]


def test_a_steady_rate_settles_as_samples_are_recycled() -> None:
    # 500 every 700 ms (714/s) against 600/s: the throttle alternates as windows roll over.
    seen = replay(600, 11, [(T + 700 * i, 500) for i in range(30)])
    assert [throttle for _, _, throttle in seen] == [0] * 12 + [433, 1567, 1700] + [
        2833,
        2967,
    ] * 7 + [2833]
    assert seen[12] == (10400, 625.0, 433)
    assert seen[-2] == (11200, 758.9285714285714, 2967)
    assert seen[-1] == (10500, 761.9047619047619, 2833)


def test_a_young_rate_divides_by_at_least_samples_minus_one_windows() -> None:
    rate = SampledRate(QuotaWindow(11, 1000))
    rate.record(100, T)
    assert rate.window_size_ms(T) == 10_000
    assert rate.window_size_ms(T + 2_500) == 12_500 - 2_000  # 2 full windows + 8 assumed
    assert rate.measure(T) == 10.0


def test_the_window_is_at_least_one_ms() -> None:
    rate = SampledRate(QuotaWindow(1, 1000))
    rate.record(5, T)
    assert rate.window_size_ms(T) == 1
    assert rate.measure(T) == 5000.0


def test_fewer_samples() -> None:
    events = [(T, 50), (T + 400, 100), (T + 1400, 100), (T + 2500, 10)]
    assert replay(100, 2, events) == [
        (1000, 50.0, 0),
        (1400, 107.14285714285715, 100),
        (1400, 178.57142857142858, 1100),
        (1100, 99.99999999999999, 0),
    ]


def test_a_negative_record_takes_a_value_back() -> None:
    rate = SampledRate(QuotaWindow())
    rate.record(4000, T)
    rate.record(6000, T + 100)
    rate.record(-6000, T + 100)
    assert rate.measure(T + 100) == 4000 / 10.1


def test_request_time_throttles_are_capped_at_one_window() -> None:
    # request_percentage 50: values are percent-seconds of work.
    events = [(T, 450), (T + 100, 100), (T + 200, 90), (T + 3000, 10)]
    throttles = [throttle for _, _, throttle in replay(50, 11, events, cap=1000)]
    assert throttles == [0, 900, 1000, 1000]


def test_connection_rate_throttles() -> None:
    # 5 connections/s, one every 10 ms: the 53rd goes over (52 / 10.52 s > 5).
    seen = replay(5, 11, [(T + 10 * i, 1) for i in range(60)], cap=1000)
    throttles = [throttle for _, _, throttle in seen]
    assert throttles[:52] == [0] * 52
    assert throttles[52:] == [80, 270, 460, 650, 840, 1000, 1000, 1000]
    assert seen[52][:2] == (10520, 5.0380228136882135)


def test_throttle_time_formula() -> None:
    # (O - T) / T * W, rounded half up as Java's Math.round.
    assert throttle_time_ms(1500.0, 1000.0, 10_000) == 5000
    assert throttle_time_ms(1001.0, 1000.0, 500) == 1  # 0.5 rounds up
    assert throttle_time_ms(5.0, 0.0, 10_000) == (1 << 63) - 1  # Java: +inf -> Long.MAX


@pytest.mark.parametrize(
    ("value", "rounded"),
    [(2.5, 3), (-2.5, -2), (0.49999999999999994, 0), (float("nan"), 0), (1e30, (1 << 63) - 1)],
)
def test_java_round(value: float, rounded: int) -> None:
    assert java_round(value) == rounded


def test_a_window_needs_a_sample_and_a_millisecond() -> None:
    with pytest.raises(ValueError):
        QuotaWindow(0, 1000)
    with pytest.raises(ValueError):
        QuotaWindow(11, 0)
    assert QuotaWindow.of_seconds(5, 2) == QuotaWindow(5, 2000)
