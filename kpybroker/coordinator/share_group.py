"""A KIP-932 share group and its members: the data, derived state and Kafka's checks.

Mirrors Kafka's ``ShareGroup`` and ``ShareGroupMember``. As with consumer groups
(``consumer_group``), the group is built only by replaying its records
(``share_group_records``): what the log says is what the group is, and a
member is an immutable value whose changes are told apart by comparison.

A share group differs from a consumer group in three ways that shape this model:

- partitions are *shared*: a member's current assignment is its target at
  once (no revocation, no partition owned by one member at a time), so a
  member has no pending revocation and its state is always Stable;
- the group's state is only Empty (no members) or Stable, as Kafka reports it;
- a partition can be assigned only once its share state exists with the share
  coordinator. ``StatePartitions`` (Kafka's ``ShareGroupStatePartitionMetadataInfo``,
  the ShareGroupStatePartitionMetadata record) says which partitions of which
  topics are initialized, which are being initialized (and since when), and
  which topics' state is being deleted.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from kpybroker.coordinator.consumer_group import INITIAL_EPOCH, JOIN_EPOCH, LEAVE_EPOCH, Assignment
from kpybroker.protocol.errors import ErrorCode, KafkaError

SHARE_PROTOCOL_TYPE = "share"
#: A new member's previous epoch, as Kafka's ``ShareGroupMember.Builder`` starts it.
NO_PREVIOUS_EPOCH = -1
#: Kafka's ``MemberState.STABLE``: the only state a share group member is ever in.
STABLE_MEMBER = 0


class ShareGroupState(enum.Enum):
    """As ListGroups and ShareGroupDescribe name them."""

    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ShareMember:
    """One member: its subscription (from its heartbeats) and its current assignment.

    ``subscribed_topic_names`` is kept sorted and without duplicates: Kafka holds it
    as a set, so two subscriptions naming the same topics in another order are equal.
    """

    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    member_epoch: int = JOIN_EPOCH
    previous_member_epoch: int = NO_PREVIOUS_EPOCH
    state: int = STABLE_MEMBER
    assigned: Assignment = field(default_factory=dict)

    def subscription(self) -> tuple[object, ...]:
        """What the member metadata record stores (a change writes a new record)."""
        return (self.rack_id, self.client_id, self.client_host, self.subscribed_topic_names)

    def current_assignment(self) -> tuple[object, ...]:
        """What the current assignment record stores."""
        return (self.member_epoch, self.previous_member_epoch, self.state, self.assigned)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state == STABLE_MEMBER and self.member_epoch == target_epoch

    def left(self) -> ShareMember:
        """The member once its current assignment is deleted (Kafka's replay of the tombstone)."""
        return replace(
            self, member_epoch=LEAVE_EPOCH, previous_member_epoch=LEAVE_EPOCH, assigned={}
        )


def topic_names(names: Iterable[str]) -> tuple[str, ...]:
    """A subscription as the member keeps it (see ``ShareMember``)."""
    return tuple(sorted(set(names)))


class InitTopic(NamedTuple):
    """A topic's partitions in one of the share-state maps (Kafka's ``InitMapValue``);
    ``timestamp`` is when they were asked to be initialized (or when the record was
    replayed), which decides when an initialization that never finished is retried."""

    name: str
    partitions: frozenset[int]
    timestamp: int = -1


@dataclass(frozen=True, slots=True)
class StatePartitions:
    """Which share partitions of a group have their state with the share coordinator."""

    initializing: Mapping[bytes, InitTopic] = field(default_factory=dict)
    initialized: Mapping[bytes, InitTopic] = field(default_factory=dict)
    #: topic ID -> topic name, for topics whose state is being deleted.
    deleting: Mapping[bytes, str] = field(default_factory=dict)


def combine(
    current: Mapping[bytes, InitTopic], added: Mapping[bytes, InitTopic]
) -> dict[bytes, InitTopic]:
    """Kafka's ``combineInitMaps``: the union of partitions per topic, the name and timestamp
    of ``added`` where it has the topic."""
    combined = dict(current)
    for topic_id, topic in added.items():
        before = current.get(topic_id)
        partitions = topic.partitions if before is None else before.partitions | topic.partitions
        combined[topic_id] = InitTopic(topic.name, partitions, topic.timestamp)
    return combined


def without(
    current: Mapping[bytes, InitTopic], removed: Mapping[bytes, Iterable[int]]
) -> dict[bytes, InitTopic]:
    """``current`` less the given partitions; a topic left with none goes."""
    kept: dict[bytes, InitTopic] = {}
    for topic_id, topic in current.items():
        partitions = topic.partitions - frozenset(removed.get(topic_id, ()))
        if partitions:
            kept[topic_id] = topic._replace(partitions=partitions)
    return kept


class ShareGroup:
    """A share group as its records describe it."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # Groups start at epoch 1 with an empty target at epoch 1, so the first computed
        # assignment is epoch 2 (Kafka 4.3+, KAFKA-20268, for share groups too).
        self.group_epoch = INITIAL_EPOCH
        self.metadata_hash = 0
        self.assignment_epoch = INITIAL_EPOCH
        #: When the target assignment was last computed (from its record): the next one waits
        #: for the group's assignment interval after it (KIP-1263 assignment batching).
        self.assignment_timestamp = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Assignment] = {}
        #: None until the group's first ShareGroupStatePartitionMetadata record (Kafka tells
        #: that apart from a record with nothing in it).
        self.state_partitions: StatePartitions | None = None
        self.dead = False

    def __repr__(self) -> str:
        return (
            f"ShareGroup({self.group_id!r}, {self.state.value}, epoch={self.group_epoch}, "
            f"members={list(self.members)})"
        )

    def copy(self) -> ShareGroup:
        """A snapshot to restore if a change cannot be written (members are immutable)."""
        other = ShareGroup(self.group_id)
        other.group_epoch = self.group_epoch
        other.metadata_hash = self.metadata_hash
        other.assignment_epoch = self.assignment_epoch
        other.assignment_timestamp = self.assignment_timestamp
        other.members = dict(self.members)
        other.target = dict(self.target)
        other.state_partitions = self.state_partitions
        return other

    # -- derived state -------------------------------------------------------------

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(self) -> Counter[str]:
        """How many members subscribe to each topic."""
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update(member.subscribed_topic_names)
        return counts

    def target_of(self, member_id: str) -> Assignment:
        return self.target.get(member_id, {})

    def initialized_partitions(self) -> dict[bytes, frozenset[int]]:
        """The partitions the assignor may hand out (their share state exists)."""
        state = self.state_partitions
        if state is None:
            return {}
        return {t: topic.partitions for t, topic in state.initialized.items()}

    # -- Kafka's checks --------------------------------------------------------------

    def member(self, member_id: str) -> ShareMember:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {self.group_id}.",
            )
        return member

    def validate_empty(self) -> None:
        """Kafka's ``validateEmptyGroup``: DeleteGroups and the offset admin APIs need it."""
        if self.dead:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        if self.members:
            raise KafkaError.with_default_message(ErrorCode.NON_EMPTY_GROUP)

    validate_delete = validate_empty
