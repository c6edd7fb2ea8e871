"""Every group config (KIP-848, KIP-932, KIP-1071), one entry each, with its broker synonym.

A group config overrides, for one group, a setting the coordinator otherwise takes from the
broker; it is set with IncrementalAlterConfigs (``kafka-configs.sh --entity-type groups``) on a
GROUP resource, whether or not the group exists, and stored under ``/config/groups/<group>``.
The set, types, defaults, valid values and internal flags are Kafka 4.4's (``GroupConfig``).
``synonyms`` names the broker config that supplies the value of a group that does not
override it (Kafka's ``GroupConfig.ALL_GROUP_CONFIG_SYNONYMS``); a config with none takes
the default given here. Group configs can always be altered (``mode=PER_GROUP``).

kpybroker acts on the consumer and share protocols' session timeouts and heartbeat intervals
(``enforced``, with whatever other share settings the share partitions read); the others are
validated, stored and described as Kafka does (the streams groups kpybroker does not have).
The checks Kafka makes against the broker's bounds (``group.consumer.min.session.timeout.ms``
and the like) are in ``config/group.py``.
"""

from __future__ import annotations

import re

from kpybroker.config.core import (
    ConfigError,
    ConfigKey,
    ConfigType,
    Importance,
    OneOf,
    Predicate,
    Range,
    UpdateMode,
    Validator,
    index_keys,
)

BOOLEAN, STRING, INT, LONG, LIST = (
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.LIST,
)
MEDIUM, LOW = Importance.MEDIUM, Importance.LOW
PER_GROUP = UpdateMode.PER_GROUP

BY_DURATION = "by_duration:"
# java.time.Duration.parse: PnDTnHnMn.nS, each part signed, case-insensitive.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def java_duration_ms(text: str) -> float | None:
    """An ISO-8601 duration as Java's ``Duration.parse`` reads it, in ms; None if it does not."""
    match = _DURATION.fullmatch(text)
    if match is None:
        return None
    sign, days, time_part, hours, minutes, seconds, fraction = match.groups()
    if time_part == "T" or (days is None and time_part is None):
        return None
    total = int(days or 0) * 86_400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
    second_count = int(seconds or 0)
    nanos = int((fraction or "").ljust(9, "0")) if fraction else 0
    if seconds is not None and seconds.startswith("-"):
        nanos = -nanos
    value = (total + second_count) * 1000 + nanos / 1_000_000
    return -value if sign == "-" else value


def _share_auto_offset_reset(key: str, value: object) -> str | None:
    """Kafka's ``ShareGroupAutoOffsetResetStrategy.Validator``: earliest, latest, or
    by_duration: and a duration that is not negative (all case-sensitive but the duration)."""
    assert isinstance(value, str)
    if value in ("earliest", "latest"):
        return None
    if value.startswith(BY_DURATION):
        duration = java_duration_ms(value[len(BY_DURATION) :])
        if duration is not None and duration >= 0:
            return None
    return (
        f"Invalid value `{value}` for configuration {key}. The value must be either "
        "'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
    )


class NonEmptyItems(Validator):
    """Kafka's ``ValidList.anyNonDuplicateValues(true, false)``: any items, none of them empty
    (the group's own duplicate check comes first, in ``config/group.py``)."""

    def validate(self, key: str, value: object) -> None:
        assert isinstance(value, tuple)
        if any(not item for item in value):
            raise ConfigError(key, f"Configuration '{key}' values must not be empty.")

    def __str__(self) -> str:
        return ""


SHARE_AUTO_OFFSET_RESET = Predicate(
    _share_auto_offset_reset, "[latest, earliest, by_duration:PnDTnHnMn.nS]"
)

# fmt: off
GROUP_CONFIGS: dict[str, ConfigKey] = index_keys([
    # --- Consumer groups (KIP-848) ----------------------------------------------------------------
    ConfigKey("consumer.session.timeout.ms", INT, 45_000, MEDIUM, valid=Range(1), mode=PER_GROUP,
              enforced=True, synonyms=("group.consumer.session.timeout.ms",),
              doc="Session timeout of the group's consumer-protocol members; within "
                  "group.consumer.min/max.session.timeout.ms."),
    ConfigKey("consumer.heartbeat.interval.ms", INT, 5000, MEDIUM, valid=Range(1),
              mode=PER_GROUP, enforced=True, synonyms=("group.consumer.heartbeat.interval.ms",),
              doc="Heartbeat interval told to the group's consumer-protocol members; within "
                  "group.consumer.min/max.heartbeat.interval.ms, below the session timeout."),
    ConfigKey("consumer.assignment.interval.ms", INT, 1000, MEDIUM, valid=Range(0),
              mode=PER_GROUP, synonyms=("group.consumer.assignment.interval.ms",),
              doc="Interval between assignment updates of the consumer group. kpybroker "
                  "computes the target assignment at once."),
    ConfigKey("consumer.assignor.offload.enable", BOOLEAN, True, MEDIUM, mode=PER_GROUP,
              internal=True, synonyms=("group.consumer.assignor.offload.enable",),
              doc="Compute the group's assignments on a background thread."),

    # --- Share groups (KIP-932) -------------------------------------------------------------------
    ConfigKey("share.session.timeout.ms", INT, 45_000, MEDIUM, valid=Range(1), mode=PER_GROUP,
              enforced=True, synonyms=("group.share.session.timeout.ms",),
              doc="Session timeout of the share group's members."),
    ConfigKey("share.heartbeat.interval.ms", INT, 5000, MEDIUM, valid=Range(1), mode=PER_GROUP,
              enforced=True, synonyms=("group.share.heartbeat.interval.ms",),
              doc="Heartbeat interval of the share group's members."),
    ConfigKey("share.record.lock.duration.ms", INT, 30_000, MEDIUM, valid=Range(1000),
              mode=PER_GROUP, synonyms=("group.share.record.lock.duration.ms",),
              enforced=True,
              doc="How long a record delivered to the share group stays locked to its consumer."),
    ConfigKey("share.delivery.count.limit", INT, 5, MEDIUM, valid=Range(2), mode=PER_GROUP,
              synonyms=("group.share.delivery.count.limit",),
              enforced=True,
              doc="Deliveries of a record to the share group before it is archived."),
    ConfigKey("share.partition.max.record.locks", INT, 2000, MEDIUM, valid=Range(100),
              mode=PER_GROUP, synonyms=("group.share.partition.max.record.locks",),
              enforced=True, doc="Most locked records per share partition."),
    ConfigKey("share.auto.offset.reset", STRING, "latest", MEDIUM, valid=SHARE_AUTO_OFFSET_RESET,
              mode=PER_GROUP,
              enforced=True,
              doc="Where the share group starts on a partition: earliest, latest, or "
                  "by_duration:<ISO-8601 duration> before now."),
    ConfigKey("share.isolation.level", STRING, "read_uncommitted", MEDIUM,
              valid=OneOf("read_committed", "read_uncommitted"), mode=PER_GROUP,
              enforced=True, doc="Whether the share group sees records of aborted transactions "
                  "(read_uncommitted) or only committed ones (read_committed)."),
    ConfigKey("share.renew.acknowledge.enable", BOOLEAN, True, MEDIUM, mode=PER_GROUP,
              doc="Whether the share group's consumers may renew their record locks."),
    ConfigKey("share.assignment.interval.ms", INT, 1000, MEDIUM, valid=Range(0), mode=PER_GROUP,
              synonyms=("group.share.assignment.interval.ms",), enforced=True,
              doc="Least time between two target assignments of the share group; within "
                  "group.share.min/max.assignment.interval.ms."),
    ConfigKey("share.assignor.offload.enable", BOOLEAN, True, MEDIUM, mode=PER_GROUP,
              internal=True, synonyms=("group.share.assignor.offload.enable",),
              doc="Compute the share group's assignments on a background thread."),

    # --- Streams groups (KIP-1071; kpybroker has none) --------------------------------------------
    ConfigKey("streams.session.timeout.ms", INT, 45_000, MEDIUM, valid=Range(1), mode=PER_GROUP,
              synonyms=("group.streams.session.timeout.ms",),
              doc="Session timeout of the streams group's members."),
    ConfigKey("streams.heartbeat.interval.ms", INT, 5000, MEDIUM, valid=Range(1),
              mode=PER_GROUP, synonyms=("group.streams.heartbeat.interval.ms",),
              doc="Heartbeat interval of the streams group's members."),
    ConfigKey("streams.num.standby.replicas", INT, 0, MEDIUM, valid=Range(0), mode=PER_GROUP,
              synonyms=("group.streams.num.standby.replicas",),
              doc="Standby replicas of each task of the streams group."),
    ConfigKey("streams.initial.rebalance.delay.ms", INT, 3000, MEDIUM, valid=Range(0),
              mode=PER_GROUP, synonyms=("group.streams.initial.rebalance.delay.ms",),
              doc="How long a new streams group waits for more members before its first "
                  "rebalance."),
    ConfigKey("streams.assignment.interval.ms", INT, 1000, MEDIUM, valid=Range(0),
              mode=PER_GROUP, synonyms=("group.streams.assignment.interval.ms",),
              doc="Interval between assignment updates of the streams group."),
    ConfigKey("streams.assignor.offload.enable", BOOLEAN, True, MEDIUM, mode=PER_GROUP,
              internal=True, synonyms=("group.streams.assignor.offload.enable",),
              doc="Compute the streams group's assignments on a background thread."),
    ConfigKey("streams.task.offset.interval.ms", INT, 60_000, MEDIUM, valid=Range(1),
              mode=PER_GROUP, internal=True, synonyms=("group.streams.task.offset.interval.ms",),
              doc="How often members report the changelog offsets of their warm-up tasks."),
    ConfigKey("streams.num.warmup.replicas", INT, 2, MEDIUM, valid=Range(0), mode=PER_GROUP,
              internal=True, synonyms=("group.streams.num.warmup.replicas",),
              doc="Most warm-up task replicas of the streams group."),
    ConfigKey("streams.rack.aware.assignment.tags", LIST, (), LOW, valid=NonEmptyItems(),
              mode=PER_GROUP, synonyms=("group.streams.rack.aware.assignment.tags",),
              doc="Client tag keys over which the streams group's standby replicas are spread."),
    ConfigKey("streams.acceptable.recovery.lag", LONG, 10_000, MEDIUM, valid=Range(0),
              mode=PER_GROUP, internal=True, synonyms=("group.streams.acceptable.recovery.lag",),
              doc="Largest lag at which a member counts as caught up for an active task."),
    ConfigKey("streams.assignor.name", STRING, None, MEDIUM, mode=PER_GROUP,
              synonyms=("group.streams.assignors",),
              doc="Task assignor of the streams group, one of group.streams.assignors; "
                  "unset means the first of them."),

    # --- Dead-letter queue of share groups (KIP-1191) ---------------------------------------------
    ConfigKey("errors.deadletterqueue.topic.name", STRING, "", MEDIUM, mode=PER_GROUP,
              doc="Topic the share group writes records it gives up on to; empty means none. "
                  "It must not start with __."),
    ConfigKey("errors.deadletterqueue.copy.record.enable", BOOLEAN, False, MEDIUM,
              mode=PER_GROUP,
              doc="Copy the whole record to the dead-letter queue, not only its context "
                  "headers."),
])
# fmt: on
