"""Byte-rate and request-time quotas: how long to throttle a client after a request.

One manager per quota type, as Kafka has them (``QuotaFactory``): ``producer_byte_rate``
(bytes of each Produce request), ``consumer_byte_rate`` (bytes of each Fetch response) and
``request_percentage`` (time spent on each request). A handler records what a request cost
and gets back a throttle time in ms; the response carries it in ``throttle_time_ms`` and
the network layer mutes the connection for that long (see ``client_throttling``).

Throttle time is Kafka's: the measured rate's excess over the bound, as a fraction of the
bound, times the rate's window (``QuotaUtils.throttleTime``), computed after the value is
recorded: the request that breaks the quota is served, and the client then waits.

With no quota of its type configured a manager records nothing and costs one attribute
test per request (Kafka's ``quotasEnabled`` shortcut).

Time is a monotonic clock in integer milliseconds (``now_ms``), passed in by the caller.
"""

from __future__ import annotations

from kpybroker.quotas.expiring_sensors import SENSOR_EXPIRY_MS
from kpybroker.quotas.metered_quotas import MeteredQuotas
from kpybroker.quotas.sampled_rate import QuotaWindow, SampledRate, throttle_time_ms

#: Java's ``Integer.MAX_VALUE``: ``throttle_time_ms`` is an int32 on the wire.
INT_MAX = (1 << 31) - 1

#: ``ClientRequestQuotaManager.NanosToPercentagePerSecond``: one second of work is 100 %.
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1_000_000_000


class ClientQuotaManager(MeteredQuotas[SampledRate]):
    """Kafka's ``ClientQuotaManager`` for one quota type measured as a sampled rate.

    ``max_throttle_ms`` caps throttle times: Kafka leaves byte-rate throttles uncapped but
    casts them to an int (so an absurd one wraps, and a bound of 0 throttles nothing); here
    they are capped at ``INT_MAX`` instead. ``max_sensors`` optionally bounds the number of
    metered groups on top of the one-hour inactivity expiry (see ``expiring_sensors``).
    """

    def __init__(
        self,
        window: QuotaWindow | None = None,
        *,
        max_throttle_ms: int = INT_MAX,
        sensor_expiry_ms: int = SENSOR_EXPIRY_MS,
        max_sensors: int | None = None,
    ) -> None:
        super().__init__(
            window, SampledRate, sensor_expiry_ms=sensor_expiry_ms, max_sensors=max_sensors
        )
        self._max_throttle_ms = max_throttle_ms

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value`` for the client at ``now_ms``; the throttle time in ms (0: none).

        Kafka's ``maybeRecordAndGetThrottleTimeMs``. ``user`` is the principal's name
        (``ANONYMOUS`` when unauthenticated); a null client id is "", as Kafka reads it.
        """
        overrides = self._overrides
        if not overrides.enabled:
            return 0
        tags = overrides.metric_tags(user, client_id)
        rate = self._meters.use(tags, now_ms)
        rate.record(value, now_ms)
        bound = overrides.limit(tags)
        if bound is None:
            return 0
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle_ms = throttle_time_ms(measured, bound, rate.window_size_ms(now_ms))
        return min(throttle_ms, self._max_throttle_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded ``value`` (Kafka's ``unrecordQuotaSensor``).

        A throttled Fetch is answered empty, so the bytes it would have sent are taken
        back after ``record`` returned a throttle time.
        """
        overrides = self._overrides
        if overrides.enabled:
            tags = overrides.metric_tags(user, client_id)
            self._meters.use(tags, now_ms).record(-value, now_ms)

    def max_value_in_quota_window(self, user: str, client_id: str) -> int:
        """The largest value one record can have without certainly being throttled:
        ``bound * (samples - 1) * window seconds``, or ``INT_MAX`` when unlimited.

        Kafka caps a consumer Fetch's max bytes with it (``getMaxValueInQuotaWindow``,
        converted to an int as ``KafkaApis`` does), so that a fetch never overruns the
        quota by itself.
        """
        bound = self._overrides.quota_for(user, client_id) if self.quotas_enabled else None
        if bound is None:
            return INT_MAX
        value = bound * (self.window.samples - 1) * (self.window.window_ms / 1000)
        return INT_MAX if value >= INT_MAX else int(value)


class RequestQuotaManager(ClientQuotaManager):
    """``request_percentage``: the share of time spent on a client's requests.

    Kafka records the nanoseconds a request held a request-handler thread (and, later,
    a network thread) as a percentage of one second, so a quota of 200 is two threads'
    worth. kpybroker does all the work of a request on one event loop, so the caller
    records the loop time the request took, in nanoseconds (``time.perf_counter_ns()``
    deltas): 100 % is the whole loop. Throttle times are capped at one quota window
    (``quota.window.size.seconds``), as Kafka's ``ClientRequestQuotaManager`` does.
    """

    def __init__(
        self,
        window: QuotaWindow | None = None,
        *,
        sensor_expiry_ms: int = SENSOR_EXPIRY_MS,
        max_sensors: int | None = None,
    ) -> None:
        window = window or QuotaWindow()
        super().__init__(
            window,
            max_throttle_ms=window.window_ms,
            sensor_expiry_ms=sensor_expiry_ms,
            max_sensors=max_sensors,
        )

    def record_request_time(self, user: str, client_id: str, elapsed_ns: int, now_ms: int) -> int:
        """Record ``elapsed_ns`` of work for the client; the throttle time in ms (0: none)."""
        return self.record(user, client_id, elapsed_ns * NANOS_TO_PERCENTAGE_PER_SECOND, now_ms)
