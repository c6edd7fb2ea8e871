"""Classic members inside consumer groups, and groups moving between the two protocols.

KIP-848's online migration, as Kafka's ``GroupMetadataManager`` does it:

- **Upgrade.** The first ConsumerGroupHeartbeat for a classic group with
  members (all of Kafka's ``consumer`` protocol type) turns it into a
  consumer group: each member keeps its ID, subscription and partitions, at
  an epoch equal to the classic generation, and its classic session timeout
  and protocols. Their pending JoinGroup and SyncGroup requests are answered
  REBALANCE_IN_PROGRESS, so they rejoin.
- **Classic members of a consumer group** go on with JoinGroup, SyncGroup,
  Heartbeat and LeaveGroup: a JoinGroup is the member's heartbeat of the new
  protocol (its subscription and owned partitions from the embedded consumer
  protocol, the assignment computed by the broker, the generation being the
  member epoch); SyncGroup hands it its assignment in the consumer
  protocol's bytes; a Heartbeat answers REBALANCE_IN_PROGRESS while it has
  partitions to give up or to receive, so it joins again.
- **Downgrade.** When the last member of the new protocol leaves (or is
  fenced) and classic members remain, the group becomes a classic group with
  their assignments, and starts a rebalance.

Both directions follow ``group.consumer.migration.policy`` (``upgrade``,
``downgrade``, ``bidirectional``, ``disabled``). Everything here returns or
replays records the same way as the rest of the coordinator, so a migrated
group survives restarts and failover like any other.
"""

from __future__ import annotations

import logging
import struct
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from kpybroker.coordinator.consumer_group import (
    Assignment,
    ClassicMetadata,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from kpybroker.coordinator.consumer_group_protocol import topics_hash
from kpybroker.coordinator.consumer_group_records import (
    current_assignment_record,
    epoch_record,
    group_tombstones,
    member_record,
    member_tombstones,
    target_epoch_record,
    target_record,
)
from kpybroker.coordinator.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup
from kpybroker.coordinator.interface import (
    CONSUMER_SESSION_TIMER,
    Caller,
    Effects,
    TimerKey,
    Token,
    coordinator_error,
)
from kpybroker.coordinator.membership import (
    REQUIRE_KNOWN_MEMBER_ID_FROM,
    heartbeat_key,
    join_error,
    join_key,
    sync_key,
)
from kpybroker.coordinator.offsets_topic_records import CoordinatorRecord, GroupRecord
from kpybroker.protocol._codec import DecodeError
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.consumer_protocol_assignment import (
    ConsumerProtocolAssignment,
)
from kpybroker.protocol.messages.consumer_protocol_assignment import (
    TopicPartition as AssignedTopicPartition,
)
from kpybroker.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from kpybroker.protocol.messages.group_metadata_value import GroupMetadataValue, MemberMetadata
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kpybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kpybroker.protocol.messages.leave_group import (
    LeaveGroupResponse,
    MemberIdentity,
    MemberResponse,
)
from kpybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

if TYPE_CHECKING:
    from kpybroker.coordinator.consumer_group_protocol import ConsumerGroups
    from kpybroker.coordinator.membership import Membership

log = logging.getLogger(__name__)

_VERSION = struct.Struct(">h")
# The newest versions of the embedded consumer protocol's structures.
SUBSCRIPTION_VERSIONS = 3
ASSIGNMENT_VERSIONS = 3
MALFORMED = (DecodeError, struct.error, UnicodeDecodeError, IndexError, ValueError)


class GroupMigration:
    """The classic protocol's requests on consumer groups, and the conversions."""

    def __init__(self, membership: Membership, consumer_groups: ConsumerGroups) -> None:
        self.membership = membership
        self.groups = consumer_groups
        policy = consumer_groups.settings.consumer_migration_policy.lower()
        self.upgrade_enabled = policy in ("upgrade", "bidirectional")
        self.downgrade_enabled = policy in ("downgrade", "bidirectional")

    # -- upgrade ------------------------------------------------------------------------

    def may_upgrade(self, classic: ClassicGroup) -> bool:
        """Kafka's ``validateOnlineUpgrade``."""
        if not self.upgrade_enabled:
            log.info("Cannot upgrade classic group %s: the online upgrade is disabled.", classic)
            return False
        if not classic.uses_consumer_protocol():
            return False
        return len(classic.members) <= self.groups.settings.consumer_max_size

    def upgrade(self, out: Effects, classic: ClassicGroup) -> list[CoordinatorRecord]:
        """Turn ``classic`` into a consumer group now; the records that say so."""
        group_id = classic.group_id
        for member in classic.members.values():
            self.membership.complete_join(
                out, member, join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id)
            )
            if member.sync_waiter is not None:
                out.reply(
                    member.sync_waiter,
                    SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS),
                )
                member.sync_waiter = None
            out.cancel_timer(heartbeat_key(classic, member.member_id))
        out.cancel_timer(join_key(classic))
        out.cancel_timer(sync_key(classic))
        epoch = classic.generation
        records: list[CoordinatorRecord] = [GroupRecord(group_id, None)]
        converted: list[ConsumerMember] = []
        for member in classic.members.values():
            metadata = member.metadata(classic.protocol_name)
            subscription = decode_subscription(metadata)
            assigned = self.topic_ids(decode_assignment(member.assignment))
            consumer = ConsumerMember(
                member.member_id,
                instance_id=member.group_instance_id,
                rack_id=subscription.rack_id,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=tuple(subscription.topics),
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                member_epoch=epoch,
                previous_member_epoch=epoch,
                assigned=assigned,
                classic=ClassicMetadata(member.session_timeout_ms, tuple(member.protocols)),
            )
            converted.append(consumer)
            records += [
                member_record(group_id, consumer),
                target_record(group_id, consumer.member_id, assigned),
                current_assignment_record(group_id, consumer),
            ]
        topics = self.groups.subscribed_topics(converted)
        records.append(epoch_record(group_id, epoch, topics_hash(topics)))
        records.append(target_epoch_record(group_id, epoch, self.groups.clock()))
        del self.membership.groups[group_id]
        for record in records:
            if not isinstance(record, GroupRecord):
                self.groups.replay(record)  # type: ignore[arg-type]
        for consumer in converted:
            self.touch(out, group_id, consumer)
        log.info("[GroupId %s] Upgraded from a classic group to a consumer group.", group_id)
        return records

    # -- classic requests on a consumer group -------------------------------------------

    def join(self, out: Effects, token: Token, caller: Caller, request: JoinGroupRequest) -> None:
        """Kafka's ``classicGroupJoinToConsumerGroup``."""
        group = self.groups.groups[request.group_id]
        member_id = request.member_id
        unknown = not member_id
        if unknown:
            member_id = str(uuid.uuid4())
        try:
            self.groups.check_size(group, member_id)
            self.check_protocols(group, request)
            if (
                unknown
                and request.group_instance_id is None
                and caller.api_version >= REQUIRE_KNOWN_MEMBER_ID_FROM
            ):
                out.reply(token, join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id))
                return
            member = self.joining_member(group, member_id, request)
            protocols = tuple((p.name, bytes(p.metadata)) for p in request.protocols)
            subscription = decode_subscription(protocols[0][1])
        except KafkaError as exc:
            out.reply(token, join_error(exc.code, request.member_id))
            return
        except MALFORMED:
            out.reply(token, join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
            return
        updated = replace(
            member,
            member_id=member_id,
            instance_id=request.group_instance_id,
            rack_id=subscription.rack_id or member.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            server_assignor=None,
            subscribed_topic_names=tuple(subscription.topics),
            client_id=caller.client_id,
            client_host=caller.client_host,
            classic=ClassicMetadata(request.session_timeout_ms, protocols),
        )
        owned = [
            (topic_id, partitions)
            for topic_id, partitions in self.topic_ids(
                {tp.topic: list(tp.partitions) for tp in subscription.owned_partitions}
            ).items()
        ]
        records: list[CoordinatorRecord] = []
        if member.member_id != member_id:  # a static member under a new member ID
            records += member_tombstones(group.group_id, member.member_id)
        reconciled = self.groups.advance(
            group, member, replace(updated, member_id=member_id), owned, records
        )
        response = JoinGroupResponse(
            member_id=member_id,
            generation_id=reconciled.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
            leader="",
            members=[],
        )

        def written(done: Effects, error: ErrorCode) -> None:
            if error:
                done.reply(token, join_error(coordinator_error(error), request.member_id))
            else:
                done.reply(token, response)

        self.groups.commit(out, group.group_id, records, written)
        self.touch(out, group.group_id, updated)

    def joining_member(
        self, group: ConsumerGroup, member_id: str, request: JoinGroupRequest
    ) -> ConsumerMember:
        instance_id = request.group_instance_id
        static = group.static_member(instance_id)
        if static is not None:
            return static  # a static member rejoining, perhaps under a new member ID
        existing = group.members.get(member_id)
        if existing is not None:
            if not existing.uses_classic_protocol:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            return existing
        if request.member_id:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        return ConsumerMember(member_id)

    def check_protocols(self, group: ConsumerGroup, request: JoinGroupRequest) -> None:
        """Kafka's ``throwIfClassicProtocolIsNotSupported``: the consumer protocol type, and
        a protocol every classic member of the group supports."""
        names = {p.name for p in request.protocols}
        if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        for member in group.members.values():
            if member.classic is not None and member.member_id != request.member_id:
                names &= member.classic.protocol_names()
        if not names:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)

    def sync(self, out: Effects, token: Token, request: SyncGroupRequest) -> None:
        """Kafka's ``classicGroupSyncToConsumerGroup``: the member's assignment, encoded."""
        group = self.groups.groups[request.group_id]
        try:
            member = self.classic_member(group, request.member_id, request.group_instance_id)
            if request.generation_id != member.member_epoch:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
            assert member.classic is not None
            name, metadata = member.classic.protocols[0]
            if (request.protocol_type not in (None, CONSUMER_PROTOCOL_TYPE)) or (
                request.protocol_name not in (None, name)
            ):
                raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if (
                group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS)
        except KafkaError as exc:
            out.reply(token, SyncGroupResponse(error_code=exc.code))
            return
        out.reply(
            token,
            SyncGroupResponse(
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=name,
                assignment=self.encode_assignment(member.assigned, metadata),
            ),
        )
        self.touch(out, group.group_id, member)

    def heartbeat(self, out: Effects, token: Token, request: HeartbeatRequest) -> None:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS while the
        member has partitions to give up or to receive."""
        group = self.groups.groups[request.group_id]
        try:
            member = self.classic_member(group, request.member_id, request.group_instance_id)
            if request.generation_id != member.member_epoch:
                raise KafkaError(ErrorCode.ILLEGAL_GENERATION)
        except KafkaError as exc:
            out.reply(token, HeartbeatResponse(error_code=exc.code))
            return
        self.touch(out, group.group_id, member)
        behind = (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not group.waiting_on_unreleased(member)
            )
        )
        out.reply(
            token,
            HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS if behind else 0),
        )

    def leave(
        self, out: Effects, token: Token, group_id: str, leaving: list[MemberIdentity]
    ) -> None:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: each member goes, the group epoch
        moves on (and the group may go back to the classic protocol)."""
        group = self.groups.groups[group_id]
        responses = []
        records: list[CoordinatorRecord] = []
        remaining = group.copy()
        for identity in leaving:
            error = ErrorCode.NONE
            try:
                member = self.leaving_member(remaining, identity)
            except KafkaError as exc:
                error = exc.code
            else:
                log.info("[GroupId %s] Member %s left (LeaveGroup).", group_id, member.member_id)
                records += self.groups.fence_records(remaining, member)
                remaining.remove_member(member.member_id)
                remaining.group_epoch += 1
            responses.append(
                MemberResponse(
                    member_id=identity.member_id,
                    group_instance_id=identity.group_instance_id,
                    error_code=error,
                )
            )
        response = LeaveGroupResponse(members=responses)
        self.groups.commit(out, group_id, records, lambda done, _error: done.reply(token, response))

    def leaving_member(self, group: ConsumerGroup, identity: MemberIdentity) -> ConsumerMember:
        if identity.group_instance_id is None:
            member = self.classic_member(group, identity.member_id, None)
        else:
            member = group.static_member(identity.group_instance_id)
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if identity.member_id and identity.member_id != member.member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
            if not member.uses_classic_protocol:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerMember:
        """The member a classic request names (Kafka's ``validateConsumerGroupMember`` and
        ``throwIfMemberDoesNotUseClassicProtocol``)."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise KafkaError(ErrorCode.FENCED_INSTANCE_ID)
        if not member.uses_classic_protocol:
            raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
        return member

    def touch(self, out: Effects, group_id: str, member: ConsumerMember) -> None:
        """A classic member's session runs on its own session timeout."""
        timeout = member.classic.session_timeout_ms if member.classic else None
        out.set_timer(
            TimerKey(CONSUMER_SESSION_TIMER, group_id, member.member_id),
            timeout if timeout is not None else self.groups.session_timeout_ms(group_id),
        )

    # -- downgrade ------------------------------------------------------------------------

    def downgrade_records(
        self, out: Effects, group: ConsumerGroup, leaving: ConsumerMember
    ) -> list[CoordinatorRecord] | None:
        """When ``leaving`` is the last member of the new protocol and classic ones remain,
        the records that make the group classic again (and the classic group, now); None
        when the group stays a consumer group (Kafka's ``validateOnlineDowngrade...``)."""
        others = [m for m in group.members.values() if m.member_id != leaving.member_id]
        if not others or not all(m.uses_classic_protocol for m in others):
            return None
        if not self.downgrade_enabled:
            log.info(
                "Cannot downgrade consumer group %s: the online downgrade is disabled.",
                group.group_id,
            )
            return None
        if len(others) > self.membership.settings.max_group_size:
            return None
        names = set.intersection(*(m.classic.protocol_names() for m in others if m.classic))
        protocol = next(
            (name for name, _ in others[0].classic.protocols if name in names),  # type: ignore[union-attr]
            None,
        )
        if protocol is None:
            return None
        group_id = group.group_id
        records: list[CoordinatorRecord] = []
        for member in group.members.values():
            records += member_tombstones(group_id, member.member_id)
        records += group_tombstones(group_id)
        value = GroupMetadataValue(
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            generation=group.group_epoch,
            protocol=protocol,
            leader=others[0].member_id,
            current_state_timestamp=self.groups.clock(),
            members=[
                MemberMetadata(
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.classic.session_timeout_ms,  # type: ignore[union-attr]
                    subscription=dict(m.classic.protocols)[protocol],  # type: ignore[union-attr]
                    assignment=self.encode_assignment(
                        m.assigned,
                        dict(m.classic.protocols)[protocol],  # type: ignore[union-attr]
                    ),
                )
                for m in others
            ],
        )
        classic_record = GroupRecord(group_id, value)
        records.append(classic_record)
        for member in group.members.values():
            out.cancel_timer(TimerKey(CONSUMER_SESSION_TIMER, group_id, member.member_id))
        self.groups.forget(group_id)
        self.membership.replay(classic_record)
        classic = self.membership.groups[group_id]
        for member in classic.members.values():
            self.membership.schedule_heartbeat(out, classic, member)
        self.membership.prepare_rebalance(out, classic)
        log.info("[GroupId %s] Downgraded from a consumer group to a classic group.", group_id)
        return records

    # -- the embedded consumer protocol ------------------------------------------------------

    def topic_ids(self, by_name: dict[str, list[int]]) -> dict[bytes, frozenset[int]]:
        ids = {}
        for name, partitions in by_name.items():
            topic = self.groups.topics.by_name(name)
            if topic is not None and partitions:
                ids[topic.topic_id] = frozenset(partitions)
        return ids

    def encode_assignment(self, assigned: Assignment, subscription: bytes) -> bytes:
        """ConsumerProtocolAssignment bytes at the version of the member's subscription."""
        version = min(_VERSION.unpack_from(subscription)[0], ASSIGNMENT_VERSIONS)
        topics = []
        for topic_id, partitions in assigned.items():
            topic = self.groups.topics.by_id(topic_id)
            if topic is not None:
                topics.append(
                    AssignedTopicPartition(topic=topic.name, partitions=sorted(partitions))
                )
        assignment = ConsumerProtocolAssignment(assigned_partitions=topics)
        return _VERSION.pack(version) + assignment.encode_bytes(version)


def decode_subscription(metadata: bytes) -> ConsumerProtocolSubscription:
    (version,) = _VERSION.unpack_from(metadata)
    subscription, _ = ConsumerProtocolSubscription.decode(
        metadata, _VERSION.size, min(version, SUBSCRIPTION_VERSIONS)
    )
    return subscription


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    if not data:
        return {}
    (version,) = _VERSION.unpack_from(data)
    assignment, _ = ConsumerProtocolAssignment.decode(
        data, _VERSION.size, min(version, ASSIGNMENT_VERSIONS)
    )
    return {tp.topic: list(tp.partitions) for tp in assignment.assigned_partitions}
