"""A KIP-848 consumer group and its members: the data, derived state and Kafka's checks.

Mirrors Kafka's ``ConsumerGroup`` and ``ConsumerGroupMember``. The group is
built only by replaying its records (``consumer_group_records``), both when a
partition loads and when the coordinator decides a change: what the log says
is what the group is. A member is an immutable value; a change is a new
member, so comparing the old and the new says which records to write.

Assignments map a topic ID (the 16 bytes of the wire) to a frozenset of
partition numbers. The group keeps which member epoch owns each partition
(assigned or still being revoked): a partition is free to move to another
member only once nobody owns it.

The group's state is derived, as in Kafka: Empty without members, Assigning
while the group epoch is ahead of the target assignment's, Reconciling while
a member has not reached the target epoch, Stable otherwise.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from kpybroker.coordinator.offsets_topic_records import OffsetAndMetadata
from kpybroker.protocol.errors import ErrorCode, KafkaError

Assignment = Mapping[bytes, frozenset[int]]
EMPTY_ASSIGNMENT: Assignment = {}

# Member epochs with a meaning in ConsumerGroupHeartbeat.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
INITIAL_EPOCH = 1
# Kafka's first OffsetCommit version for members of consumer groups.
MEMBER_EPOCH_COMMITS_FROM = 9


class ConsumerGroupState(enum.Enum):
    """As ListGroups, DescribeGroups and ConsumerGroupDescribe name them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.IntEnum):
    """A member's reconciliation state, with Kafka's byte values (the record stores it)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class ClassicMetadata:
    """What a member speaking the classic protocol inside a consumer group sent in its
    JoinGroup: its session timeout and its protocols (name, subscription bytes)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    """One member: its subscription (from its heartbeats) and its current assignment."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = JOIN_EPOCH
    previous_member_epoch: int = JOIN_EPOCH
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    #: Set for a member that speaks the classic protocol (JoinGroup, SyncGroup, Heartbeat).
    classic: ClassicMetadata | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def subscription(self) -> tuple[object, ...]:
        """What the member metadata record stores (a change writes a new record)."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.rebalance_timeout_ms,
            self.server_assignor,
            self.classic,
        )

    def current_assignment(self) -> tuple[object, ...]:
        """What the current assignment record stores."""
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            self.assigned,
            self.pending_revocation,
        )

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def with_epoch(self, epoch: int) -> ConsumerMember:
        """The member moved to ``epoch``; the one it leaves becomes its previous epoch."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)


def owned(assignment: Assignment) -> Iterator[tuple[bytes, int]]:
    for topic_id, partitions in assignment.items():
        for partition in partitions:
            yield topic_id, partition


def assignment_size(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


class ConsumerGroup:
    """A consumer-protocol group as its records describe it."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        # A new group starts at epoch 1 with an empty target at epoch 1, so its first
        # computed assignment is epoch 2 (Kafka 4.3+, KAFKA-20268).
        self.group_epoch = INITIAL_EPOCH
        self.metadata_hash = 0
        self.assignment_epoch = INITIAL_EPOCH
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, Assignment] = {}
        self.static_members: dict[str, str] = {}
        self.partition_epochs: dict[tuple[bytes, int], int] = {}
        self.dead = False
        #: Topics the members' regular expressions matched when last evaluated.
        self.regex_topics: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return (
            f"ConsumerGroup({self.group_id!r}, {self.state.value}, epoch={self.group_epoch}, "
            f"members={list(self.members)})"
        )

    def copy(self) -> ConsumerGroup:
        """A snapshot to restore if a change cannot be written (members are immutable)."""
        other = ConsumerGroup(self.group_id)
        other.group_epoch = self.group_epoch
        other.metadata_hash = self.metadata_hash
        other.assignment_epoch = self.assignment_epoch
        other.members = dict(self.members)
        other.target = dict(self.target)
        other.static_members = dict(self.static_members)
        other.partition_epochs = dict(self.partition_epochs)
        other.regex_topics = self.regex_topics
        return other

    # -- derived state -------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if all(m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.STABLE
        return ConsumerGroupState.RECONCILING

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topic_names(self) -> Counter[str]:
        """How many members subscribe to each topic by name."""
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update(member.subscribed_topic_names)
        return counts

    def regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values() if m.subscribed_topic_regex}

    def current_partition_epoch(self, topic_id: bytes, partition: int) -> int:
        """The epoch of the member owning the partition, -1 when nobody does."""
        return self.partition_epochs.get((topic_id, partition), -1)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still owned by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target_of(member.member_id).items():
            mine = member.assigned.get(topic_id, frozenset())
            for partition in partitions - mine:
                if self.current_partition_epoch(topic_id, partition) != -1:
                    return True
        return False

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return None if member_id is None else self.members.get(member_id)

    def target_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """The member's target; a static member taking over its instance under a new ID
        has the target of the ID it replaces."""
        if member_id not in self.target and instance_id in self.static_members:
            member_id = self.static_members[instance_id]
        return self.target.get(member_id, EMPTY_ASSIGNMENT)

    # -- changes (only the record replay calls these) -------------------------------

    def put_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._own(member)

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == (
            member_id
        ):
            del self.static_members[member.instance_id]

    def _own(self, member: ConsumerMember) -> None:
        for key in owned(member.assigned):
            self.partition_epochs[key] = member.member_epoch
        for key in owned(member.pending_revocation):
            self.partition_epochs[key] = member.member_epoch

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for key in owned(assignment):
                if self.partition_epochs.get(key) == member.member_epoch:
                    del self.partition_epochs[key]

    # -- Kafka's checks --------------------------------------------------------------

    def member(self, member_id: str) -> ConsumerMember:
        member = self.members.get(member_id)
        if member is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {self.group_id}.",
            )
        return member

    def validate_offset_commit(
        self,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        *,
        api_version: int,
        transactional: bool = False,
    ) -> None:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: the member's current epoch, or an
        outsider (epoch -1) while the group is empty. A ``transactional`` commit
        (TxnOffsetCommit) naming no member at all is accepted in any state, as Kafka's
        does since KAFKA-18060: versions before 3 cannot name one, and the producer's
        older ``sendOffsetsToTransaction`` does not."""
        if member_epoch < 0 and not self.members:
            return
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return
        member = self.member(member_id)
        if member.uses_classic_protocol:
            if member_epoch != member.member_epoch:
                raise KafkaError(
                    ErrorCode.ILLEGAL_GENERATION,
                    f"The received generation id {member_epoch} does not match the expected "
                    f"member epoch {member.member_epoch}.",
                )
            return
        if not transactional and api_version < MEMBER_EPOCH_COMMITS_FROM:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                "OffsetCommit version 9 or above must be used by members using the modern "
                "group protocol",
            )
        self.validate_member_epoch(member_epoch, member.member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ``validateOffsetFetch``: anyone without member ID and epoch, or a member at
        its current epoch."""
        if member_id is None and member_epoch < 0:
            return
        member = self.member(member_id or "")
        self.validate_member_epoch(member_epoch, member.member_epoch)

    @staticmethod
    def validate_member_epoch(received: int, expected: int) -> None:
        if received != expected:
            raise KafkaError(
                ErrorCode.STALE_MEMBER_EPOCH,
                f"The received member epoch {received} does not match the expected member "
                f"epoch {expected}.",
            )

    def validate_offset_delete(self) -> None:
        """A consumer group's offsets may go in any state, but not those of topics it
        subscribes to (checked per topic)."""
        if self.dead:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)

    def validate_delete(self) -> None:
        if self.dead:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        if self.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names() or topic in self.regex_topics

    def offset_expiry_base(self) -> Callable[[OffsetAndMetadata], int] | None:
        """Kafka's expiration condition for consumer groups: offsets expire only while the
        group is empty, a retention period after their commit."""
        if self.members:
            return None
        return lambda offset: offset.commit_timestamp
