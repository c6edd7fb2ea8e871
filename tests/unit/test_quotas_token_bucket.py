"""The token bucket of controller-mutation quotas, against Kafka 4.4's ``TokenBucket``.

Expected values come from a Kafka ``Sensor`` holding a ``TokenBucket`` (quota 5/s, 11 x 1 s:
a burst of 55; and quota 2/s, 3 x 1 s), driven strictly (``checkQuotas`` then
``record(v, t, false)``) or permissively (``record(v, t, true)``), with
``ControllerMutationQuotaManager.throttleTimeMs`` for the throttle.
"""

from __future__ import annotations

from kpybroker.quotas.sampled_rate import QuotaWindow
from kpybroker.quotas.token_bucket import TokenBucket, bucket_throttle_time_ms

T = 1_700_000_000_000


def test_strict_use_matches_kafka() -> None:
    bucket = TokenBucket(QuotaWindow(11, 1000))
    seen = []
    for at, permits in [
        (T, 60),  # a rested bucket (55) takes the whole 60
        (T + 500, 1),  # -2.5 after 500 ms of refill: refused
        (T + 1000, 10),  # back at 0: accepted, to -10
        (T + 1000, 1),
        (T + 2999, 1),  # -0.005: still refused, for 1 ms
        (T + 3000, 3),
        (T + 100_000, 0),
    ]:
        tokens = bucket.measure(5, at)
        throttle = bucket_throttle_time_ms(tokens, 5) if tokens < 0 else 0
        if tokens >= 0:
            bucket.record(permits, 5, at)
        seen.append((bucket.measure(5, at), throttle))
    assert seen == [
        (-5.0, 0),
        (-2.5, 500),
        (-10.0, 0),
        (-10.0, 2000),
        (-0.004999999999999005, 1),
        (-2.999999999999999, 0),
        (55.0, 0),
    ]


def test_permissive_use_matches_kafka() -> None:
    bucket = TokenBucket(QuotaWindow(3, 1000))
    seen = []
    for at, permits in [(T, 4), (T + 10, 4), (T + 20, 7), (T + 1020, 1)]:
        bucket.record(permits, 2, at)
        tokens = bucket.measure(2, at)
        seen.append((tokens, bucket_throttle_time_ms(tokens, 2) if tokens < 0 else 0))
    assert seen == [(2.0, 0), (-1.98, 990), (-8.96, 4480), (-7.960000000000001, 3980)]


def test_a_new_bucket_is_full_whatever_the_clock_reads() -> None:
    assert TokenBucket(QuotaWindow(11, 1000)).measure(5, 0) == 55.0


def test_a_lowered_rate_caps_the_credits_at_the_new_burst() -> None:
    bucket = TokenBucket(QuotaWindow(10, 1000))
    assert bucket.measure(10, T) == 100.0
    assert bucket.measure(1, T + 1) == 10.0
    assert bucket.burst(1) == 10.0
