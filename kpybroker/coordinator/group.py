"""A classic group and its members: the data, its invariants and Kafka's validation rules.

Mirrors Kafka's ``ClassicGroup`` and ``ClassicGroupMember``. A member waiting
in JoinGroup or SyncGroup holds the reply token of that request
(``join_waiter``, ``sync_waiter``); answering it is the state machine's job
(``membership``), so nothing here produces effects. Validation failures raise
``KafkaError`` with Kafka's error code.

The state machine (Kafka's transitions; any state may go to Dead):

    Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
      ▲                 ▲     │                                    │ leader's SyncGroup
      └─ nobody rejoined┘     └──────────◀── join, leave, expiry ──┤ stored
                              ◀──────────── join, leave, expiry ── Stable ◀┘
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kpybroker.coordinator.interface import Token
from kpybroker.coordinator.offsets_topic_records import OffsetAndMetadata
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)

CONSUMER_PROTOCOL_TYPE = "consumer"
Protocols = list[tuple[str, bytes]]


class GroupState(enum.Enum):
    """The states, named as DescribeGroups and ListGroups report them."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

VALID_PREVIOUS_STATES = {
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    EMPTY: frozenset({PREPARING_REBALANCE}),
    DEAD: frozenset(GroupState),
}


@dataclass(eq=False, slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_waiter: Token | None = None
    sync_waiter: Token | None = None
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str | None) -> bytes:
        """The member's metadata (subscription) for ``protocol``."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: Iterable[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        allowed = set(candidates)
        return next(name for name, _ in self.protocols if name in allowed)

    def has_satisfied_heartbeat(self) -> bool:
        """Whether the session timer firing now spares the member.

        A member parked in JoinGroup or SyncGroup counts as alive (it cannot
        heartbeat meanwhile), unless it is new: a new member that never
        completes its first join is dropped.
        """
        if self.is_new:
            return False
        return self.join_waiter is not None or self.sync_waiter is not None


class ClassicGroup:
    """One group's membership, generation, protocol and rebalance bookkeeping."""

    def __init__(
        self,
        group_id: str,
        clock: Callable[[], int],
        *,
        state: GroupState = EMPTY,
        generation: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        leader_id: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.clock = clock
        self.state = state
        self.previous_state = state
        self.generation = generation
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        # When the group entered its state; None for groups loaded from records too old to say.
        self.state_timestamp: int | None = clock()
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join: set[str] = set()
        self.pending_sync: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.new_member_added = False
        self.subscribed_topics: frozenset[str] | None = None

    def __repr__(self) -> str:
        return (
            f"ClassicGroup({self.group_id!r}, {self.state.value}, generation={self.generation}, "
            f"members={list(self.members)})"
        )

    # -- membership ------------------------------------------------------------

    def is_in(self, state: GroupState) -> bool:
        return self.state is state

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, join_waiter: Token | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"static member {member.group_instance_id} is already a member")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(name for name, _ in member.protocols)
        member.join_waiter = join_waiter
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(name for name, _ in member.protocols)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)

    def update_member(
        self,
        member: Member,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        join_waiter: Token | None,
    ) -> None:
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self.supported_protocols.update(name for name, _ in protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_waiter = join_waiter

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member its new member ID, keeping everything else (Kafka's order)."""
        old = self.members.pop(old_id)
        new = dataclasses.replace(
            old, member_id=new_id, join_waiter=None, sync_waiter=None, is_new=False
        )
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        return new

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].join_waiter is not None:
            return True
        for member in self.members.values():
            if member.join_waiter is not None:
                self.leader_id = member.member_id
                return True
        return False

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = client_id if group_instance_id is None else group_instance_id
        return f"{prefix}-{uuid.uuid4()}"

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.join_waiter is None]

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.join_waiter is not None)

    def has_all_members_joined(self) -> bool:
        return not self.pending_join and self.num_awaiting_join() == len(self.members)

    def rebalance_timeout_ms(self) -> int:
        """The longest rebalance timeout among the members (how long a join phase may last)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocol -------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        """Whether a member with these protocols may join: one must be common to all."""
        if self.is_in(EMPTY):
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == size for name in names
        )

    def select_protocol(self) -> str:
        """The protocol with most votes among those every member supports (Kafka's vote)."""
        size = len(self.members)
        candidates = {name for name, count in self.supported_protocols.items() if count == size}
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return votes.most_common(1)[0][0]

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The topics the members subscribe to, or None when that is unknown.

        Read with version 0 of the consumer protocol, the prefix of every
        version, as Kafka does; malformed metadata makes the answer unknown.
        """
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                subscription, _ = ConsumerProtocolSubscription.decode(
                    member.metadata(self.protocol_name), 2, 0
                )
                topics.update(subscription.topics)
        except (DecodeError, struct.error, UnicodeDecodeError, IndexError, ValueError):
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's answer, which is yes for a consumer group whose subscriptions are unknown."""
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    # -- state ----------------------------------------------------------------

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[PREPARING_REBALANCE]

    def transition_to(self, state: GroupState) -> None:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise ValueError(f"group {self.group_id} cannot go from {self.state} to {state}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = self.clock()

    def init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(EMPTY)
        self.pending_sync.clear()

    # -- Kafka's validation rules ---------------------------------------------

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """The instance ID (if any) must map to this member ID, and the member must exist."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if existing != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
        if member_id not in self.members:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)

    def validate_generation(
        self, member_id: str, group_instance_id: str | None, generation: int
    ) -> None:
        """A live group's member, at the group's generation (SyncGroup, Heartbeat)."""
        if self.is_in(DEAD):
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        self.validate_member(member_id, group_instance_id)
        if generation != self.generation:
            raise KafkaError(ErrorCode.ILLEGAL_GENERATION)

    def validate_offset_commit(
        self,
        member_id: str,
        group_instance_id: str | None,
        generation: int,
        *,
        transactional: bool = False,
    ) -> None:
        """Members commit at their generation; anyone else (generation -1) only while Empty.

        A ``transactional`` commit (TxnOffsetCommit) without member and
        generation is accepted in any live state, as its versions before 3
        carry neither, and the group's state is not enforced (Kafka's rules).
        """
        if self.is_in(DEAD):
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if generation < 0 and self.is_in(EMPTY):
            return
        if generation >= 0 or member_id or group_instance_id is not None:
            self.validate_member(member_id, group_instance_id)
            if generation != self.generation:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        elif not transactional and not self.is_in(EMPTY):
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        if not transactional and self.is_in(COMPLETING_REBALANCE):
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)

    def validate_offset_delete(self) -> None:
        if self.is_in(DEAD):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        if not self.is_in(EMPTY) and not self.uses_consumer_protocol():
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def validate_delete(self) -> None:
        if self.is_in(DEAD):
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
        if not self.is_in(EMPTY):
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP)

    def offset_expiry_base(self) -> Callable[[OffsetAndMetadata], int] | None:
        """From when an offset's retention runs, or None while the group's offsets must stay.

        Kafka's ``offsetExpirationCondition``: an empty group's offsets expire
        a retention period after it became empty; a stable consumer group's
        offsets of topics it no longer subscribes to, a period after their
        commit; a group that only commits (no protocol type), likewise.
        """
        if self.protocol_type is None:
            return lambda offset: offset.commit_timestamp
        if self.is_in(EMPTY):
            since = self.state_timestamp
            return lambda offset: offset.commit_timestamp if since is None else since
        if (
            self.uses_consumer_protocol()
            and self.subscribed_topics is not None
            and self.is_in(STABLE)
        ):
            return lambda offset: offset.commit_timestamp
        return None
