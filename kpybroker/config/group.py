"""Group configs: their defaults under a given broker config, and validation, as Kafka's.

A group's effective config is its own overrides (as stored, as text) on top of values that
come from the broker config through each group config's synonym, as Kafka's
``extractGroupConfigMap`` builds them; ``validate_group_configs`` is Kafka 4.4's
``GroupConfig.validate``, with its order of checks and its messages, against the broker's
bounds (``group.consumer.min.session.timeout.ms`` and the like).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kpybroker.config.broker_config import BrokerConfig
from kpybroker.config.core import ConfigError, check_names_and_values, java_str, java_trim
from kpybroker.config.group_table import GROUP_CONFIGS

#: Group configs whose value the broker's bounds limit, in the order Kafka checks them
#: (``GroupConfig.validateValues``): (lowest allowed, highest allowed), each a broker config
#: or None for no bound on that side.
BOUNDS: tuple[tuple[str, str | None, str | None], ...] = (
    ("consumer.heartbeat.interval.ms",
     "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    ("consumer.session.timeout.ms",
     "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    ("consumer.assignment.interval.ms",
     "group.consumer.min.assignment.interval.ms", "group.consumer.max.assignment.interval.ms"),
    ("share.heartbeat.interval.ms",
     "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    ("share.session.timeout.ms",
     "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
    ("share.record.lock.duration.ms",
     "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    ("share.delivery.count.limit",
     "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit"),
    ("share.partition.max.record.locks",
     "group.share.min.partition.max.record.locks", "group.share.max.partition.max.record.locks"),
    ("share.assignment.interval.ms",
     "group.share.min.assignment.interval.ms", "group.share.max.assignment.interval.ms"),
    ("streams.heartbeat.interval.ms",
     "group.streams.min.heartbeat.interval.ms", "group.streams.max.heartbeat.interval.ms"),
    ("streams.session.timeout.ms",
     "group.streams.min.session.timeout.ms", "group.streams.max.session.timeout.ms"),
    ("streams.num.standby.replicas", None, "group.streams.max.standby.replicas"),
    ("streams.assignment.interval.ms",
     "group.streams.min.assignment.interval.ms", "group.streams.max.assignment.interval.ms"),
    ("streams.task.offset.interval.ms", "group.streams.min.task.offset.interval.ms", None),
    ("streams.num.warmup.replicas", None, "group.streams.max.warmup.replicas"),
)  # fmt: skip

#: (session timeout, heartbeat interval) pairs: the one must exceed the other.
SESSION_AND_HEARTBEAT = (
    ("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    ("streams.session.timeout.ms", "streams.heartbeat.interval.ms"),
)

STREAMS_ASSIGNOR = "streams.assignor.name"
STREAMS_ASSIGNORS = "group.streams.assignors"
RACK_TAGS = "streams.rack.aware.assignment.tags"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
_JAVA_COMMA = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def group_defaults(broker_cfg: BrokerConfig) -> dict[str, object]:
    """Each group config's value for a group that does not override it.

    A config with a broker synonym takes the broker's value (streams.assignor.name the first
    of group.streams.assignors); the others take the table default.
    """
    defaults: dict[str, object] = {}
    for name, key in GROUP_CONFIGS.items():
        if not key.synonyms:
            defaults[name] = key.default
            continue
        value = broker_cfg.get(key.synonyms[0], key.default)
        if name == STREAMS_ASSIGNOR:
            assert isinstance(value, tuple)
            value = value[0] if value else None
        defaults[name] = value
    return defaults


def parse_group_configs(configs: Mapping[str, str]) -> dict[str, object]:
    """A group's stored overrides, typed (the known ones; stored values were validated)."""
    return {
        name: GROUP_CONFIGS[name].parse(raw)
        for name, raw in configs.items()
        if name in GROUP_CONFIGS
    }


def validate_group_configs(
    configs: Mapping[str, str | None], broker_cfg: BrokerConfig
) -> dict[str, object]:
    """Parse a group's whole new set of overrides into typed values, as Kafka validates it.

    Raises ``ConfigError`` (INVALID_CONFIG) with Kafka's message: an unknown name ("Unknown
    group config name: x"), duplicate rack tags, a value of the wrong type or below the
    config's own floor, then, in Kafka's order, a value outside the broker's bounds, an
    unregistered streams assignor, a session timeout not above the heartbeat interval, and a
    dead-letter topic starting with "__".
    """
    check_names_and_values(configs, GROUP_CONFIGS, "group")
    tags = configs.get(RACK_TAGS)
    if tags is not None:
        trimmed = java_trim(tags)
        items = _JAVA_COMMA.split(trimmed) if trimmed else []
        if len(set(items)) != len(items):
            raise ConfigError(RACK_TAGS, f"{RACK_TAGS} must not contain duplicate tag keys.")
    # ConfigDef.parse: in the table's order, so the first bad value is the table's first.
    parsed = {
        name: key.parse(raw)
        for name, key in GROUP_CONFIGS.items()
        if (raw := configs.get(name)) is not None
    }

    for name, low_key, high_key in BOUNDS:
        value = parsed.get(name)
        if value is None:
            continue
        assert isinstance(value, int)
        low = None if low_key is None else broker_cfg.get_int(low_key)
        high = None if high_key is None else broker_cfg.get_int(high_key)
        if low is not None and high is not None:
            if not low <= value <= high:
                raise ConfigError(name, f"{name} must be in the range {low} to {high} inclusive.")
        elif high is not None and value > high:
            raise ConfigError(name, f"{name} must be less than or equal to {high}")
        elif low is not None and value < low:
            raise ConfigError(name, f"{name} must be greater than or equal to {low}")
    if STREAMS_ASSIGNOR in parsed:
        assignors = broker_cfg.get_list(STREAMS_ASSIGNORS) or ()
        if parsed[STREAMS_ASSIGNOR] not in assignors:
            raise ConfigError(
                STREAMS_ASSIGNOR,
                f"{STREAMS_ASSIGNOR} '{java_str(parsed[STREAMS_ASSIGNOR])}' is not a registered "
                f"task assignor. Registered assignors are: {java_str(list(assignors))}.",
            )
    defaults = group_defaults(broker_cfg)
    for session_key, heartbeat_key in SESSION_AND_HEARTBEAT:
        if session_key in parsed or heartbeat_key in parsed:
            session = parsed.get(session_key, defaults[session_key])
            heartbeat = parsed.get(heartbeat_key, defaults[heartbeat_key])
            assert isinstance(session, int) and isinstance(heartbeat, int)
            if session <= heartbeat:
                raise ConfigError(
                    session_key, f"{session_key} must be greater than {heartbeat_key}"
                )
    dlq = parsed.get(DLQ_TOPIC)
    if isinstance(dlq, str) and dlq.startswith("__"):
        raise ConfigError(DLQ_TOPIC, f"{DLQ_TOPIC}: DLQ topic name must not start with '__'")
    return parsed
