"""``controller_mutation_rate`` (KIP-599): partitions created or deleted per second.

CreateTopics, CreatePartitions and DeleteTopics cost the number of partitions they create
or delete (a topic's partition count for a deletion), metered by a token bucket per client
group (``token_bucket``). Each request gets a ``ControllerMutationQuota`` for its lifetime,
and the handler calls ``record`` once per topic, once the topic has passed validation and
right before it is created, extended or deleted (a topic refused for another reason costs
nothing):

* strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+, the versions that know
  THROTTLING_QUOTA_EXCEEDED): a topic is refused with ``ThrottlingQuotaExceededError``
  while the bucket is in debt; otherwise it is accepted whole, even if it takes the bucket
  far below zero, so a single large topic always goes through on a rested quota;
* permissive (older versions, and topics created on the fly by Metadata or
  FindCoordinator): every topic is accepted, and a debt only yields a throttle time.

``throttle_time_ms(now_ms)`` is what the response carries (the larger of it and the request
quota's throttle) and how long the network layer mutes the connection. Validate-only
requests record nothing.

Time is a monotonic clock in integer milliseconds (``now_ms``), passed in by the caller.
"""

from __future__ import annotations

from collections.abc import Callable

from kpybroker.protocol.errors import ErrorCode, KafkaError, default_message
from kpybroker.quotas.client_quota_manager import INT_MAX
from kpybroker.quotas.expiring_sensors import SENSOR_EXPIRY_MS
from kpybroker.quotas.metered_quotas import MeteredQuotas
from kpybroker.quotas.sampled_rate import QuotaWindow
from kpybroker.quotas.token_bucket import TokenBucket, bucket_throttle_time_ms

#: API key -> first version whose quota is strict (CreateTopics, DeleteTopics, CreatePartitions).
STRICT_SINCE_VERSION: dict[int, int] = {19: 6, 20: 5, 37: 3}


class ThrottlingQuotaExceededError(KafkaError):
    """THROTTLING_QUOTA_EXCEEDED for one topic, with Kafka's message."""

    def __init__(self, throttle_time_ms: int) -> None:
        code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
        super().__init__(code, default_message(code))
        self.throttle_time_ms = throttle_time_ms


class ControllerMutationQuota:
    """One request's use of a client's mutation quota (Kafka's ``ControllerMutationQuota``).

    The bucket is shared by every request of the client group; the throttle time is this
    request's own, from its last refusal or debt, less the time elapsed since.
    """

    __slots__ = ("_bucket", "_last_recorded_ms", "_last_throttle_ms", "_rate", "strict")

    def __init__(
        self,
        bucket: TokenBucket | None,
        rate: Callable[[], float | None],
        *,
        strict: bool,
    ) -> None:
        self._bucket = bucket
        self._rate = rate
        self.strict = strict
        self._last_throttle_ms = 0
        self._last_recorded_ms = 0

    @property
    def is_exceeded(self) -> bool:
        """Whether a strict quota has refused a mutation of this request."""
        return self.strict and self._last_throttle_ms > 0

    def record(self, permits: float, now_ms: int) -> None:
        """Charge ``permits`` mutations (partitions) at ``now_ms``.

        Raises ``ThrottlingQuotaExceededError`` when strict and the bucket is in debt; the
        mutation must then not be made.
        """
        bucket = self._bucket
        rate = self._rate()
        if bucket is None or rate is None:
            return
        if self.strict:
            tokens = bucket.measure(rate, now_ms)
            if tokens < 0:
                self._note_debt(tokens, rate, now_ms)
                raise ThrottlingQuotaExceededError(self._last_throttle_ms)
            bucket.record(permits, rate, now_ms)
        else:
            bucket.record(permits, rate, now_ms)
            tokens = bucket.measure(rate, now_ms)
            if tokens < 0:
                self._note_debt(tokens, rate, now_ms)

    def throttle_time_ms(self, now_ms: int) -> int:
        """What is left at ``now_ms`` of the last throttle time (the request may have waited
        for its topics to be created since)."""
        return max(0, self._last_throttle_ms - (now_ms - self._last_recorded_ms))

    def _note_debt(self, tokens: float, rate: float, now_ms: int) -> None:
        self._last_throttle_ms = min(bucket_throttle_time_ms(tokens, rate), INT_MAX)
        self._last_recorded_ms = now_ms


#: The quota of a client when no mutation quota is configured at all: accepts everything.
UNBOUNDED_QUOTA = ControllerMutationQuota(None, lambda: None, strict=False)


class ControllerMutationQuotaManager(MeteredQuotas[TokenBucket]):
    """Kafka's ``ControllerMutationQuotaManager``: configured bounds and per-group buckets.

    ``window`` is ``controller.quota.window.num`` x ``controller.quota.window.size.seconds``:
    the burst a rested bucket allows is ``samples * window seconds * rate``.
    """

    def __init__(
        self,
        window: QuotaWindow | None = None,
        *,
        sensor_expiry_ms: int = SENSOR_EXPIRY_MS,
        max_sensors: int | None = None,
    ) -> None:
        super().__init__(
            window, TokenBucket, sensor_expiry_ms=sensor_expiry_ms, max_sensors=max_sensors
        )

    def new_quota(
        self, user: str, client_id: str, api_key: int, api_version: int, now_ms: int
    ) -> ControllerMutationQuota:
        """The quota of one CreateTopics, DeleteTopics or CreatePartitions request: strict
        from the version that has THROTTLING_QUOTA_EXCEEDED, permissive below it."""
        strict = api_version >= STRICT_SINCE_VERSION[api_key]
        return self._new_quota(user, client_id, now_ms, strict=strict)

    def new_permissive_quota(
        self, user: str, client_id: str, now_ms: int
    ) -> ControllerMutationQuota:
        """The quota of topics auto-created for a Metadata or FindCoordinator request."""
        return self._new_quota(user, client_id, now_ms, strict=False)

    def _new_quota(
        self, user: str, client_id: str, now_ms: int, *, strict: bool
    ) -> ControllerMutationQuota:
        overrides = self._overrides
        if not overrides.enabled:
            return UNBOUNDED_QUOTA
        tags = overrides.metric_tags(user, client_id)
        if overrides.limit(tags) is None:
            # Kafka meters the group against a bound of Long.MAX_VALUE, whose bucket never
            # empties and is full as soon as a real bound is set again: no bucket is the same.
            self._meters.discard(tags)
            return UNBOUNDED_QUOTA
        bucket = self._meters.use(tags, now_ms)
        return ControllerMutationQuota(bucket, lambda: overrides.limit(tags), strict=strict)
