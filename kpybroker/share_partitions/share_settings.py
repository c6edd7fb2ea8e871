"""A share group's settings as its partitions' leader applies them.

Each is the group's own config (``kafka-configs.sh --entity-type groups``)
where it sets one, else the broker's ``group.share.*`` synonym, else Kafka's
default: the one rule of ``config.group.group_defaults``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from kpybroker.config.group import group_defaults, parse_group_configs

if TYPE_CHECKING:
    from kpybroker.config import BrokerConfig

READ_COMMITTED = "read_committed"


class ShareSettings(NamedTuple):
    record_lock_duration_ms: int
    delivery_count_limit: int
    max_record_locks: int
    auto_offset_reset: str
    isolation_level: str


def share_group_settings(
    broker_config: BrokerConfig, group_configs: Mapping[str, str]
) -> ShareSettings:
    values = {**group_defaults(broker_config), **parse_group_configs(group_configs)}
    return ShareSettings(
        record_lock_duration_ms=int(values["share.record.lock.duration.ms"]),  # type: ignore[call-overload]
        delivery_count_limit=int(values["share.delivery.count.limit"]),  # type: ignore[call-overload]
        max_record_locks=int(values["share.partition.max.record.locks"]),  # type: ignore[call-overload]
        auto_offset_reset=str(values["share.auto.offset.reset"]),
        isolation_level=str(values["share.isolation.level"]),
    )


class ShareSettingsCache:
    """``share_group_settings`` for each group, recomputed only when the broker config
    (replaced on a dynamic change) or the group's stored configs change: every share fetch
    asks."""

    def __init__(
        self,
        broker_config: Callable[[], BrokerConfig],
        group_configs: Callable[[str], Mapping[str, str]],
    ) -> None:
        self.broker_config = broker_config
        self.group_configs = group_configs
        self._cached: dict[str, tuple[BrokerConfig, dict[str, str], ShareSettings]] = {}

    def __call__(self, group_id: str) -> ShareSettings:
        config, stored = self.broker_config(), self.group_configs(group_id)
        cached = self._cached.get(group_id)
        if cached is not None and cached[0] is config and cached[1] == stored:
            return cached[2]
        settings = share_group_settings(config, stored)
        self._cached[group_id] = (config, dict(stored), settings)
        return settings
