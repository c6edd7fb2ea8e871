"""What every client quota manager holds: its type's configured bounds and a meter per group.

Kafka's ``ClientQuotaManager`` and ``ControllerMutationQuotaManager`` share this part: the
bounds by user and client id (``QuotaOverrides``) and one meter per metric-tags group,
forgotten after an hour unused (``ExpiringSensors``). They differ only in the meter (a
sampled rate, or a token bucket) and in what a request does with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from kpybroker.quotas.entity import ClientQuotaEntity
from kpybroker.quotas.expiring_sensors import SENSOR_EXPIRY_MS, ExpiringSensors
from kpybroker.quotas.quota_overrides import MetricTags, QuotaOverrides
from kpybroker.quotas.sampled_rate import QuotaWindow

M = TypeVar("M")


class MeteredQuotas(Generic[M]):
    """One quota type's bounds, and the meter ``create_meter`` makes for each metered group."""

    def __init__(
        self,
        window: QuotaWindow | None,
        create_meter: Callable[[QuotaWindow], M],
        *,
        sensor_expiry_ms: int = SENSOR_EXPIRY_MS,
        max_sensors: int | None = None,
    ) -> None:
        self.window = window or QuotaWindow()
        self._overrides = QuotaOverrides()
        meter_window = self.window
        self._meters: ExpiringSensors[MetricTags, M] = ExpiringSensors(
            lambda: create_meter(meter_window), expiry_ms=sensor_expiry_ms, max_entries=max_sensors
        )

    @property
    def quotas_enabled(self) -> bool:
        return self._overrides.enabled

    @property
    def metered_groups(self) -> int:
        """How many meters are kept in memory now (one per live metric-tags group)."""
        return len(self._meters)

    def update_quota(self, entity: ClientQuotaEntity, bound: float | None) -> None:
        """Set ``entity``'s quota, or remove it with None (a config change of the entity).

        A change applies at once to what is already measured, as in Kafka. Once the last
        quota of this type is removed, every meter is dropped (Kafka keeps them until they
        expire, unused).
        """
        self._overrides.set(entity, bound)
        if not self._overrides.enabled:
            self._meters.clear()

    def configured_quota(self, entity: ClientQuotaEntity) -> float | None:
        """The bound configured for exactly ``entity``, if any."""
        return self._overrides.get(entity)

    def quota_for(self, user: str, client_id: str) -> float | None:
        """The bound that applies to this client (None: unlimited)."""
        return self._overrides.quota_for(user, client_id)
