"""The groups' dynamic configs as the coordinator reads them, from the metadata cache.

Kafka's group coordinator keeps the group configs of its metadata image in a
``GroupConfigManager``; this is the same view over ``ClusterMetadata``, which
follows ``/config/groups`` on every broker. Only what the coordinator acts on is
read: a consumer or share group's session timeout and heartbeat interval, and a share
group's assignment interval. Reads are from the cache; nothing here waits.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kpybroker.config import GROUP_CONFIGS, ConfigError
from kpybroker.coordinator.interface import NO_OVERRIDES, GroupOverrides

if TYPE_CHECKING:
    from kpybroker.metadata.cluster_metadata import ClusterMetadata

log = logging.getLogger(__name__)

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
SHARE_ASSIGNMENT_INTERVAL = "share.assignment.interval.ms"


class ClusterGroupConfigs:
    """``GroupConfigs`` over the broker's metadata cache."""

    def __init__(self, cluster: ClusterMetadata) -> None:
        self.cluster = cluster
        # group -> (the stored configs they were parsed from, the overrides): heartbeats ask
        # for the same groups over and over, and stored configs rarely change.
        self._parsed: dict[str, tuple[dict[str, str], GroupOverrides]] = {}

    def __call__(self, group_id: str) -> GroupOverrides:
        stored = self.cluster.group_config(group_id)
        if not stored:
            self._parsed.pop(group_id, None)
            return NO_OVERRIDES
        cached = self._parsed.get(group_id)
        if cached is not None and cached[0] == stored:
            return cached[1]
        overrides = GroupOverrides(
            consumer_session_timeout_ms=_int(group_id, stored, SESSION_TIMEOUT),
            consumer_heartbeat_interval_ms=_int(group_id, stored, HEARTBEAT_INTERVAL),
            share_session_timeout_ms=_int(group_id, stored, SHARE_SESSION_TIMEOUT),
            share_heartbeat_interval_ms=_int(group_id, stored, SHARE_HEARTBEAT_INTERVAL),
            share_assignment_interval_ms=_int(group_id, stored, SHARE_ASSIGNMENT_INTERVAL),
        )
        self._parsed[group_id] = (dict(stored), overrides)
        return overrides


def _int(group_id: str, stored: Mapping[str, str], name: str) -> int | None:
    """A stored override as a number; one that does not parse (written by someone else) is
    ignored, as if unset."""
    raw = stored.get(name)
    if raw is None:
        return None
    try:
        value = GROUP_CONFIGS[name].parse(raw)
    except ConfigError:
        log.warning("ignoring group %r's invalid %s=%r", group_id, name, raw)
        return None
    assert isinstance(value, int)
    return value
