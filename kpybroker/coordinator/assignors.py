"""The server-side assignors of KIP-848 consumer groups: ``uniform`` and ``range``.

An assignor sees the members (what each subscribes to, its rack, its
previous target) and the subscribed topics (partition count, the racks of
each partition's replicas), and returns every member's new target. Both keep
what they can of the previous target, so a rebalance moves as few partitions
as the new balance needs; the reconciliation then moves them safely.

- ``uniform`` (Kafka's ``UniformAssignor``, the default): every member gets
  as many partitions as the others, give or take one, among the topics it
  subscribes to; partitions stay where they were unless the balance needs
  them elsewhere. A member with a rack gets, where there is a choice, the
  partitions with a replica on its rack.
- ``range`` (Kafka's ``RangeAssignor``): per topic, the members subscribed to
  it, sorted by member ID (instance ID for static members), get contiguous
  ranges, the first ones one more when the count does not divide; topics
  with the same partition count are therefore co-partitioned.

Work is proportional to partitions times members per rebalance, never per
heartbeat.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from kpybroker.coordinator.consumer_group import Assignment


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of a member."""

    member_id: str
    topics: frozenset[bytes]
    rack: str | None = None
    instance_id: str | None = None
    previous: Assignment = field(default_factory=dict)

    @property
    def sort_key(self) -> str:
        return self.instance_id or self.member_id


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A subscribed topic: its partitions and the racks of each partition's replicas."""

    topic_id: bytes
    partitions: int
    racks: tuple[frozenset[str], ...] = ()

    def racks_of(self, partition: int) -> frozenset[str]:
        return self.racks[partition] if partition < len(self.racks) else frozenset()


Targets = dict[str, dict[bytes, frozenset[int]]]
TopicPartition = tuple[bytes, int]


class UniformAssignor:
    name = "uniform"

    def assign(self, members: list[MemberSpec], topics: Mapping[bytes, TopicSpec]) -> Targets:
        members = sorted(members, key=lambda m: m.sort_key)
        owners: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
        taken: set[TopicPartition] = set()
        # 1. Keep what each member had and may still have.
        for member in members:
            for topic_id, partitions in member.previous.items():
                topic = topics.get(topic_id)
                if topic is None or topic_id not in member.topics:
                    continue
                for partition in sorted(partitions):
                    key = (topic_id, partition)
                    if partition < topic.partitions and key not in taken:
                        owners[member.member_id].append(key)
                        taken.add(key)
        eligible = _eligible_members(members, topics)
        # 2. Members above their fair share give the surplus back.
        quota = _fair_quotas(members, eligible)
        for member in members:
            mine = owners[member.member_id]
            while len(mine) > quota[member.member_id]:
                taken.discard(mine.pop())
        # 3. Free partitions go to the least loaded eligible member, same rack first.
        by_id = {m.member_id: m for m in members}
        for key in sorted(k for k in eligible if k not in taken):
            candidates = eligible[key]
            if not candidates:
                continue
            racks = topics[key[0]].racks_of(key[1])
            best = min(
                candidates,
                key=lambda m: (
                    len(owners[m]) >= quota[m],
                    len(owners[m]),
                    by_id[m].rack not in racks if racks else False,
                    by_id[m].sort_key,
                ),
            )
            owners[best].append(key)
            taken.add(key)
        # 4. Even out what stickiness left uneven: from the most to the least loaded.
        _balance(owners, eligible)
        return {member_id: _grouped(keys) for member_id, keys in owners.items()}


def _balance(
    owners: dict[str, list[TopicPartition]], eligible: Mapping[TopicPartition, list[str]]
) -> None:
    """Move partitions from a member holding two or more than another that could take one."""
    moved = True
    while moved:
        moved = False
        for poor in sorted(owners, key=lambda m: len(owners[m])):
            for rich in sorted(owners, key=lambda m: -len(owners[m])):
                if len(owners[rich]) - len(owners[poor]) < 2:
                    break
                for key in reversed(owners[rich]):
                    if poor in eligible.get(key, ()):
                        owners[rich].remove(key)
                        owners[poor].append(key)
                        moved = True
                        break
                if moved:
                    break
            if moved:
                break


def _eligible_members(
    members: list[MemberSpec], topics: Mapping[bytes, TopicSpec]
) -> dict[TopicPartition, list[str]]:
    subscribers: dict[bytes, list[str]] = {}
    for member in members:
        for topic_id in member.topics:
            if topic_id in topics:
                subscribers.setdefault(topic_id, []).append(member.member_id)
    return {
        (topic_id, partition): ids
        for topic_id, ids in subscribers.items()
        for partition in range(topics[topic_id].partitions)
    }


def _fair_quotas(
    members: list[MemberSpec], eligible: Mapping[TopicPartition, list[str]]
) -> dict[str, int]:
    """The most a member keeps: its share of the partitions it could take, spread evenly
    among those who could take them too, rounded up (exact when all subscribe alike)."""
    share: dict[str, float] = {m.member_id: 0.0 for m in members}
    for ids in eligible.values():
        for member_id in ids:
            share[member_id] += 1 / len(ids)
    return {member_id: math.ceil(round(value, 6)) for member_id, value in share.items()}


class RangeAssignor:
    name = "range"

    def assign(self, members: list[MemberSpec], topics: Mapping[bytes, TopicSpec]) -> Targets:
        targets: Targets = {m.member_id: {} for m in members}
        for topic_id, topic in topics.items():
            subscribed = sorted((m for m in members if topic_id in m.topics), key=_range_order)
            if not subscribed:
                continue
            per_member, extra = divmod(topic.partitions, len(subscribed))
            start = 0
            for index, member in enumerate(subscribed):
                count = per_member + (1 if index < extra else 0)
                if count:
                    targets[member.member_id][topic_id] = frozenset(range(start, start + count))
                start += count
        return targets


def _range_order(member: MemberSpec) -> str:
    return member.sort_key


def _grouped(keys: list[TopicPartition]) -> dict[bytes, frozenset[int]]:
    grouped: dict[bytes, set[int]] = {}
    for topic_id, partition in keys:
        grouped.setdefault(topic_id, set()).add(partition)
    return {topic_id: frozenset(partitions) for topic_id, partitions in grouped.items()}


Assignor = UniformAssignor | RangeAssignor
ASSIGNORS: dict[str, type[Assignor]] = {"uniform": UniformAssignor, "range": RangeAssignor}
# Kafka's class names for them, which group.consumer.assignors may give instead.
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def configured_assignors(names: list[str] | tuple[str, ...]) -> dict[str, Assignor]:
    """``group.consumer.assignors`` as assignors by name, the default first."""
    assignors: dict[str, Assignor] = {}
    for name in names:
        short = CLASS_NAMES.get(name, name)
        if short not in ASSIGNORS:
            raise ValueError(f"unknown consumer group assignor {name!r}")
        assignors[short] = ASSIGNORS[short]()
    return assignors
