"""Which share partitions have their state: the coordinator's half of share-state initialization.

A share partition can be assigned only once its state (start offset, delivery
states) exists with the share coordinator. Kafka's group coordinator keeps
track of that in the ShareGroupStatePartitionMetadata record and asks the
share coordinator, through the persister, to create the state. The shard has
no I/O, so the work is split as in Kafka (``GroupMetadataManager`` decides,
``GroupCoordinatorService`` calls the persister):

1. a heartbeat (``plan_initialization``) notices subscribed partitions with no
   state, records them as *initializing* (with the time) and returns a
   ``ShareInitialization`` for the service to carry out: one persister
   ``initialize`` per partition at the group epoch, start offset -1 (the
   partition leader applies ``share.auto.offset.reset``), or 0 for new
   partitions of a topic the group already knows (KAFKA-20742);
2. the service feeds the outcome back: ``initialized`` moves the partitions to
   *initialized*, after which the next heartbeat bumps the group epoch and the
   assignor hands them out; ``uninitialized`` (an error) forgets them, so that
   a later heartbeat asks again. An initialization whose outcome was lost (the
   coordinator moved) is asked again once it is older than
   ``group.share.initialize.retry.interval.ms``.

The offset admin APIs use the same record: AlterShareGroupOffsets initializes
partitions at chosen start offsets, DeleteShareGroupOffsets and DeleteGroups
move topics to *deleting* until the persister has deleted their state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from kpybroker.coordinator.interface import TopicsImage
from kpybroker.coordinator.share_group import (
    InitTopic,
    ShareGroup,
    ShareMember,
    StatePartitions,
    combine,
    without,
)
from kpybroker.share_coordinator.persister import UNINITIALIZED_START_OFFSET

#: The start offset of a new partition of a topic the group already consumes (KAFKA-20742):
#: its first records must not be skipped by ``share.auto.offset.reset=latest``.
KNOWN_TOPIC_START_OFFSET = 0


class ShareInitialization(NamedTuple):
    """What the service asks the persister (Kafka's ``InitializeShareGroupStateParameters``):
    topic ID -> partition -> start offset, all at ``state_epoch``."""

    group_id: str
    state_epoch: int
    start_offsets: Mapping[bytes, Mapping[int, int]]

    def partitions(self) -> dict[bytes, frozenset[int]]:
        return {t: frozenset(offsets) for t, offsets in self.start_offsets.items()}


def state_of(group: ShareGroup) -> StatePartitions:
    return group.state_partitions or StatePartitions()


def plan_initialization(
    group: ShareGroup,
    group_epoch: int,
    subscribed: Iterable[str],
    topics: TopicsImage,
    now: int,
    retry_interval_ms: int,
) -> tuple[StatePartitions, ShareInitialization] | None:
    """Kafka's ``maybeCreateInitializeShareGroupStateRequest``: the subscribed partitions
    with neither state nor a recent initialization; the group's new share-state metadata
    (them added as initializing) and the request, or None when there are none."""
    state = state_of(group)
    recent = {t: v for t, v in state.initializing.items() if now - v.timestamp < retry_interval_ms}
    already = combine(state.initialized, recent)
    changes: dict[bytes, InitTopic] = {}
    for name in sorted(set(subscribed)):
        topic = topics.by_name(name)
        if topic is None:
            continue
        done = already[topic.topic_id].partitions if topic.topic_id in already else frozenset()
        if len(done) < topic.partitions:
            missing = frozenset(range(topic.partitions)) - done
            changes[topic.topic_id] = InitTopic(topic.name, missing, now)
    if not changes:
        return None
    known = state.initialized.keys() | state.initializing.keys()
    new_state = StatePartitions(
        initializing=combine(state.initializing, changes),
        initialized=state.initialized,
        deleting={t: name for t, name in state.deleting.items() if t not in changes},
    )
    offsets = {
        topic_id: dict.fromkeys(
            sorted(topic.partitions),
            KNOWN_TOPIC_START_OFFSET if topic_id in known else UNINITIALIZED_START_OFFSET,
        )
        for topic_id, topic in changes.items()
    }
    return new_state, ShareInitialization(group.group_id, group_epoch, offsets)


def initialized_assignment_pending(group: ShareGroup, members: Mapping[str, ShareMember]) -> bool:
    """Kafka's ``initializedAssignmentPending``: a subscribed topic has initialized
    partitions that the target assignment does not hand out yet."""
    initialized = state_of(group).initialized
    if not members or not initialized:
        return False
    names = {name for m in members.values() for name in m.subscribed_topic_names}
    if not names:
        return False
    assigned: dict[bytes, set[int]] = {}
    for assignment in group.target.values():
        for topic_id, partitions in assignment.items():
            assigned.setdefault(topic_id, set()).update(partitions)
    return any(
        topic.name in names and assigned.get(topic_id) != topic.partitions
        for topic_id, topic in initialized.items()
    )


def mark_initialized(
    group: ShareGroup, partitions: Mapping[bytes, frozenset[int]], topics: TopicsImage, now: int
) -> StatePartitions:
    """Kafka's ``initializeShareGroupState``: the partitions move from initializing to
    initialized."""
    state = state_of(group)
    added = {
        topic_id: InitTopic(_name(topics, topic_id), frozenset(ps), now)
        for topic_id, ps in partitions.items()
    }
    return StatePartitions(
        initializing=without(state.initializing, partitions),
        initialized=combine(state.initialized, added),
        deleting=state.deleting,
    )


def mark_uninitialized(
    group: ShareGroup, partitions: Mapping[bytes, frozenset[int]]
) -> StatePartitions | None:
    """Kafka's ``uninitializeShareGroupState``: the partitions are no longer initializing
    (a later heartbeat asks again); None when there is nothing to change."""
    state = group.state_partitions
    if state is None or not state.initializing or not partitions:
        return None
    return StatePartitions(
        initializing=without(state.initializing, partitions),
        initialized=state.initialized,
        deleting=state.deleting,
    )


def _name(topics: TopicsImage, topic_id: bytes) -> str:
    topic = topics.by_id(topic_id)
    return "<UNKNOWN>" if topic is None else topic.name
