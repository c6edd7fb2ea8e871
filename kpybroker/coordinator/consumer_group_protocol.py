"""KIP-848's consumer group protocol for the groups of one ``__consumer_offsets`` partition.

ConsumerGroupHeartbeat does everything, following Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` step for step:

1. The member joins (epoch 0), heartbeats, or leaves (epoch -1; -2 for a
   static member that will be back). Its subscription, rack, rebalance
   timeout and assignor are updated; a changed subscription, or changed
   metadata of the subscribed topics, bumps the group epoch.
2. When the group epoch is ahead of the target assignment's, the assignor
   computes a new target (only the members whose target changed get a
   record).
3. The member's current assignment moves towards its target
   (``reconciliation``): partitions are revoked before others get them.

Every change is a list of records, replayed into the group at once and
appended to the log; the answer waits until they are written (and
replicated). If the write fails, the group returns to what it was.

Timers: a member's session (``group.consumer.session.timeout.ms``,
restarted by each heartbeat) and, while it must revoke partitions, its
rebalance timeout; either fences the member when it runs out.

A group's own ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``
(group configs, read through ``GroupConfigs``) replace the broker's, kept within
``group.consumer.{min,max}.*`` as Kafka keeps them (``GroupConfig.evaluate``); a change
applies from the member's next heartbeat.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from kpybroker.coordinator.assignors import MemberSpec, TopicSpec, configured_assignors
from kpybroker.coordinator.consumer_group import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from kpybroker.coordinator.consumer_group_records import (
    current_assignment_record,
    epoch_record,
    group_tombstones,
    member_record,
    member_tombstones,
    replay,
    target_epoch_record,
    target_record,
)
from kpybroker.coordinator.interface import (
    CONSUMER_REBALANCE_TIMER,
    CONSUMER_SESSION_TIMER,
    Caller,
    Effects,
    GroupConfigs,
    TimerKey,
    Token,
    TopicsImage,
    coordinator_error,
    no_group_configs,
)
from kpybroker.coordinator.offsets_topic_records import ConsumerGroupRecord, CoordinatorRecord
from kpybroker.coordinator.reconciliation import Owned, reconcile
from kpybroker.coordinator.request_checks import invalid_request, not_empty, within
from kpybroker.coordinator.topic_regex import compile_topic_regex
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.consumer_group_describe import (
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    DescribedTopicPartitions,
    MemberAssignment,
)
from kpybroker.protocol.messages.consumer_group_heartbeat import (
    Assignment as ResponseAssignment,
)
from kpybroker.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from kpybroker.protocol.messages.list_groups import ListedGroup

if TYPE_CHECKING:
    from kpybroker.coordinator.coordinator_settings import CoordinatorSettings

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL_TYPE = "consumer"
# ConsumerGroupHeartbeat v1 makes the client generate its member ID (KIP-1082).
CLIENT_MEMBER_ID_FROM = 1
# The member type ConsumerGroupDescribe v1 reports for a member of the consumer protocol.
CONSUMER_MEMBER_TYPE = 1


class Downgrade(Protocol):
    """What removing a member asks first: whether the group goes back to the classic
    protocol instead (``consumer_group_migration``)."""

    def downgrade_records(
        self, out: Effects, group: ConsumerGroup, leaving: ConsumerMember
    ) -> list[CoordinatorRecord] | None: ...


def heartbeat_error(code: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(error_code=code, error_message=message)


class ConsumerGroups:
    """The consumer-protocol groups of one partition and their heartbeats."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        clock: Callable[[], int],
        topics: TopicsImage,
        group_configs: GroupConfigs = no_group_configs,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.topics = topics
        self.group_configs = group_configs
        self.groups: dict[str, ConsumerGroup] = {}
        self.assignors = configured_assignors(settings.consumer_assignors)
        self.default_assignor = next(iter(self.assignors))
        #: The downgrade to a classic group (set by the shard, which owns both kinds).
        self.migration: Downgrade | None = None

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's consumer.session.timeout.ms, else the broker's."""
        settings = self.settings
        return within(
            self.group_configs(group_id).consumer_session_timeout_ms,
            settings.consumer_session_timeout_ms,
            settings.consumer_min_session_timeout_ms,
            settings.consumer_max_session_timeout_ms,
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's consumer.heartbeat.interval.ms, else the broker's."""
        settings = self.settings
        return within(
            self.group_configs(group_id).consumer_heartbeat_interval_ms,
            settings.consumer_heartbeat_interval_ms,
            settings.consumer_min_heartbeat_interval_ms,
            settings.consumer_max_heartbeat_interval_ms,
        )

    def replay(self, record: ConsumerGroupRecord) -> None:
        replay(self.groups, record, self._create)

    def _create(self, group_id: str) -> ConsumerGroup:
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    # -- ConsumerGroupHeartbeat ----------------------------------------------------

    def heartbeat(
        self,
        out: Effects,
        token: Token,
        caller: Caller,
        request: ConsumerGroupHeartbeatRequest,
        before: list[CoordinatorRecord],
    ) -> None:
        """Handle one heartbeat; ``before`` are records to write first (the tombstone of an
        empty classic group this group replaces)."""
        try:
            self.validate(caller, request)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                group, records, response = self.leave(out, request)
            else:
                group, records, response = self.join_or_heartbeat(caller, request)
        except KafkaError as exc:
            out.reply(token, heartbeat_error(exc.code, exc.message))
            return

        def written(done: Effects, error: ErrorCode) -> None:
            done.reply(token, heartbeat_error(coordinator_error(error)) if error else response)

        self.commit(out, group.group_id, before + records, written)
        if request.member_epoch >= JOIN_EPOCH and response.member_id:
            self.touch(out, group.group_id, response.member_id)

    def validate(self, caller: Caller, request: ConsumerGroupHeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        not_empty(request.group_id, "GroupId can't be empty.")
        not_empty(request.instance_id, "InstanceId can't be empty.")
        not_empty(request.rack_id, "RackId can't be empty.")
        epoch = request.member_epoch
        if caller.api_version >= CLIENT_MEMBER_ID_FROM or epoch != JOIN_EPOCH:
            not_empty(request.member_id, "MemberId can't be empty.", null_too=True)
        if epoch == JOIN_EPOCH:
            if request.rebalance_timeout_ms == -1:
                raise invalid_request("RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise invalid_request("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise invalid_request(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                    "(re-)joining."
                )
        elif epoch == STATIC_LEAVE_EPOCH:
            if request.instance_id is None:
                raise invalid_request("InstanceId can't be null.")
        elif epoch < LEAVE_EPOCH:
            raise invalid_request("MemberEpoch is invalid.")
        if request.subscribed_topic_regex is not None:
            compile_topic_regex(request.subscribed_topic_regex)
        assignor = request.server_assignor
        if assignor is not None and assignor not in self.assignors:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {assignor} is not supported. Supported assignors: "
                f"{', '.join(self.assignors)}.",
            )

    def join_or_heartbeat(
        self, caller: Caller, request: ConsumerGroupHeartbeatRequest
    ) -> tuple[ConsumerGroup, list[CoordinatorRecord], ConsumerGroupHeartbeatResponse]:
        joining = request.member_epoch == JOIN_EPOCH
        group = self.groups.get(request.group_id)
        if group is None:
            if not joining:
                raise group_not_found(request.group_id)
            group = ConsumerGroup(request.group_id)
        member_id = request.member_id or _new_member_id()
        records: list[CoordinatorRecord] = []
        member = self.member_for(group, member_id, request, records)
        self.check_size(group, member.member_id)
        updated = replace(
            member,
            instance_id=_or(request.instance_id, member.instance_id),
            rack_id=_or(request.rack_id, member.rack_id),
            rebalance_timeout_ms=(
                member.rebalance_timeout_ms
                if request.rebalance_timeout_ms == -1
                else request.rebalance_timeout_ms
            ),
            server_assignor=_or(request.server_assignor, member.server_assignor),
            subscribed_topic_names=(
                member.subscribed_topic_names
                if request.subscribed_topic_names is None
                else tuple(request.subscribed_topic_names)
            ),
            subscribed_topic_regex=_or(
                request.subscribed_topic_regex, member.subscribed_topic_regex
            ),
            client_id=caller.client_id,
            client_host=caller.client_host,
        )
        owned = None
        if request.topic_partitions is not None:
            owned = [(tp.topic_id, tp.partitions) for tp in request.topic_partitions]
        reconciled = self.advance(group, member, updated, owned, records)
        response = ConsumerGroupHeartbeatResponse(
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
        )
        full_request = joining or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.topic_partitions is not None
        )
        if full_request or reconciled.assigned != member.assigned:
            response.assignment = ResponseAssignment(
                topic_partitions=[
                    TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                    for topic_id, partitions in reconciled.assigned.items()
                ]
            )
        return group, records, response

    def advance(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        updated: ConsumerMember,
        owned: Owned | None,
        records: list[CoordinatorRecord],
    ) -> ConsumerMember:
        """Kafka's three steps for a member's request (a heartbeat, or a classic member's
        JoinGroup): store the member and maybe bump the group epoch, compute a new target
        when the epoch is ahead of it, and reconcile the member towards its target. The
        records go to ``records``; the reconciled member is returned."""
        member_id = updated.member_id
        group_id = group.group_id
        bump = False
        if updated.subscription() != member.subscription() or member_id not in group.members:
            records.append(member_record(group_id, updated))
            bump = (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        members = {**group.members, updated.member_id: updated}
        if member.member_id != updated.member_id:
            members.pop(member.member_id, None)
        topics = self.subscribed_topics(members.values())
        metadata_hash = topics_hash(topics)
        group_epoch = group.group_epoch
        if bump or metadata_hash != group.metadata_hash:
            group_epoch += 1
            records.append(epoch_record(group_id, group_epoch, metadata_hash))
            log.info("[GroupId %s] Bumped group epoch to %d.", group_id, group_epoch)
        if group_epoch > group.assignment_epoch:
            target = self.new_target(group, members, topics, group_epoch, updated, records)
            target_epoch = group_epoch
        else:
            target = group.target_of(updated.member_id, updated.instance_id)
            target_epoch = group.assignment_epoch
        stored = group.members.get(member_id)

        def partition_epoch(topic_id: bytes, partition: int) -> int:
            """Who else owns the partition: what this member held before it rejoined is free."""
            if (
                stored is not None
                and stored is not member
                and (
                    partition in stored.assigned.get(topic_id, ())
                    or partition in stored.pending_revocation.get(topic_id, ())
                )
            ):
                return -1
            return group.current_partition_epoch(topic_id, partition)

        reconciled = (
            updated
            if updated.is_reconciled_to(target_epoch)
            else reconcile(updated, target_epoch, target, partition_epoch, owned)
        )
        if reconciled.current_assignment() != member.current_assignment() or member_id not in (
            group.members
        ):
            records.append(current_assignment_record(group_id, reconciled))
        return reconciled

    def member_for(
        self,
        group: ConsumerGroup,
        member_id: str,
        request: ConsumerGroupHeartbeatRequest,
        records: list[CoordinatorRecord],
    ) -> ConsumerMember:
        """The member the heartbeat is from, created or (static) taking over its instance."""
        epoch = request.member_epoch
        instance_id = request.instance_id
        existing = group.members.get(member_id)
        if epoch == JOIN_EPOCH:
            static = group.static_member(instance_id)
            if static is not None and static.member_id != member_id:
                if static.member_epoch != STATIC_LEAVE_EPOCH:
                    raise KafkaError(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {instance_id} cannot join "
                        f"the group because the instance id is owned by {static.member_id} "
                        "member.",
                    )
                # The instance is back under a new member ID: it takes over the old one's
                # subscription and assignment.
                records += member_tombstones(group.group_id, static.member_id)
                moved = replace(
                    static,
                    member_id=member_id,
                    member_epoch=JOIN_EPOCH,
                    previous_member_epoch=JOIN_EPOCH,
                )
                records.append(member_record(group.group_id, moved))
                records.append(
                    target_record(group.group_id, member_id, group.target_of(static.member_id))
                )
                records.append(current_assignment_record(group.group_id, moved))
                log.info(
                    "[GroupId %s] Static member with instance id %s re-joins as %s, replacing %s.",
                    group.group_id,
                    instance_id,
                    member_id,
                    static.member_id,
                )
                return moved
            if existing is not None:
                # Rejoining with epoch 0 (after being fenced): it starts afresh.
                return replace(
                    existing,
                    member_epoch=JOIN_EPOCH,
                    previous_member_epoch=JOIN_EPOCH,
                    state=MemberState.STABLE,
                    assigned={},
                    pending_revocation={},
                )
            log.info("[GroupId %s] Member %s joins the consumer group.", group.group_id, member_id)
            return ConsumerMember(member_id)
        if existing is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {group.group_id}.",
            )
        if instance_id is not None and group.static_members.get(instance_id) != member_id:
            raise KafkaError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by "
                "another member.",
            )
        check_member_epoch(existing, epoch, request.topic_partitions)
        return existing

    def check_size(self, group: ConsumerGroup, member_id: str) -> None:
        limit = self.settings.consumer_max_size
        if member_id not in group.members and len(group.members) >= limit:
            raise KafkaError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {limit} members.",
            )

    def subscribed_topics(self, members: Iterable[ConsumerMember]) -> dict[bytes, TopicSpec]:
        """The existing topics the members subscribe to, by name or regular expression."""
        names: set[str] = set()
        patterns: set[str] = set()
        for member in members:
            names.update(member.subscribed_topic_names)
            if member.subscribed_topic_regex:
                patterns.add(member.subscribed_topic_regex)
        if patterns:
            names.update(self.regex_matches(patterns))
        specs: dict[bytes, TopicSpec] = {}
        for name in sorted(names):
            topic = self.topics.by_name(name)
            if topic is not None:
                specs[topic.topic_id] = TopicSpec(topic.topic_id, topic.partitions, topic.racks)
        return specs

    def regex_matches(self, patterns: Iterable[str]) -> set[str]:
        compiled = [compile_topic_regex(p) for p in patterns]
        return {
            name
            for name in self.topics.names()
            if not self.topics.is_internal(name) and any(p.fullmatch(name) for p in compiled)
        }

    def new_target(
        self,
        group: ConsumerGroup,
        members: dict[str, ConsumerMember],
        topics: dict[bytes, TopicSpec],
        epoch: int,
        updated: ConsumerMember,
        records: list[CoordinatorRecord],
    ) -> Assignment:
        """Run the group's assignor; records for the members whose target changed."""
        name = self.preferred_assignor(members.values())
        specs = [
            MemberSpec(
                member.member_id,
                frozenset(
                    topic_id
                    for topic_name in self.member_topics(member)
                    if (topic := self.topics.by_name(topic_name)) is not None
                    and (topic_id := topic.topic_id) in topics
                ),
                member.rack_id,
                member.instance_id,
                group.target_of(member.member_id),
            )
            for member in members.values()
        ]
        targets = self.assignors[name].assign(specs, topics)
        for member_id, assignment in targets.items():
            if assignment != group.target.get(member_id):
                records.append(target_record(group.group_id, member_id, assignment))
        records.append(target_epoch_record(group.group_id, epoch, self.clock()))
        log.info(
            "[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
            group.group_id,
            epoch,
            name,
        )
        return targets.get(updated.member_id, {})

    def member_topics(self, member: ConsumerMember) -> set[str]:
        """The topics ``member`` subscribes to, by name and by its regular expression."""
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= self.regex_matches([member.subscribed_topic_regex])
        return names

    def preferred_assignor(self, members: Iterable[ConsumerMember]) -> str:
        """The assignor most members ask for (Kafka's vote), else the configured default."""
        votes: dict[str, int] = {}
        for member in members:
            if member.server_assignor:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return self.default_assignor
        return max(sorted(votes), key=lambda name: votes[name])

    # -- leaving and fencing ----------------------------------------------------------

    def leave(
        self, out: Effects, request: ConsumerGroupHeartbeatRequest
    ) -> tuple[ConsumerGroup, list[CoordinatorRecord], ConsumerGroupHeartbeatResponse]:
        group = self.groups.get(request.group_id)
        if group is None:
            raise group_not_found(request.group_id)
        member_id, instance_id = request.member_id, request.instance_id
        response = ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=request.member_epoch
        )
        if instance_id is None:
            member = group.member(member_id)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Instance id {instance_id} is unknown.",
                )
            if member.member_id != member_id:
                raise KafkaError(
                    ErrorCode.FENCED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} was fenced by "
                    "another member.",
                )
            if request.member_epoch == STATIC_LEAVE_EPOCH:
                log.info(
                    "[GroupId %s] Static member %s with instance id %s temporarily left.",
                    group.group_id,
                    member_id,
                    instance_id,
                )
                away = replace(member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={})
                return group, [current_assignment_record(group.group_id, away)], response
        log.info("[GroupId %s] Member %s left the consumer group.", group.group_id, member_id)
        return group, self.removal_records(out, group, member), response

    def removal_records(
        self, out: Effects, group: ConsumerGroup, member: ConsumerMember
    ) -> list[CoordinatorRecord]:
        """Remove the member: the group goes back to the classic protocol if only classic
        members remain and the policy allows it, else its epoch is bumped."""
        if self.migration is not None and not member.uses_classic_protocol:
            records = self.migration.downgrade_records(out, group, member)
            if records is not None:
                return records
        return self.fence_records(group, member)

    def fence_records(
        self, group: ConsumerGroup, member: ConsumerMember
    ) -> list[CoordinatorRecord]:
        """Remove the member and bump the group epoch, so that the others rebalance."""
        records: list[CoordinatorRecord] = member_tombstones(group.group_id, member.member_id)
        others = [m for m in group.members.values() if m.member_id != member.member_id]
        epoch = group.group_epoch + 1
        records.append(
            epoch_record(group.group_id, epoch, topics_hash(self.subscribed_topics(others)))
        )
        if not others:
            # An empty group has nothing to assign: its target catches up (KAFKA-20442).
            records.append(target_epoch_record(group.group_id, epoch, self.clock()))
        return records

    def fence(self, out: Effects, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        log.info(
            "[GroupId %s] Member %s fenced from the group because %s",
            group.group_id,
            member.member_id,
            why,
        )
        self.commit(out, group.group_id, self.removal_records(out, group, member), None)

    def timer_fired(self, out: Effects, key: TimerKey, args: tuple[int, ...]) -> None:
        group = self.groups.get(key.group_id)
        member = group.members.get(key.member_id) if group is not None else None
        if group is None or member is None:
            return
        if key.kind == CONSUMER_SESSION_TIMER:
            self.fence(out, group, member, "the member session expired.")
        elif key.kind == CONSUMER_REBALANCE_TIMER and member.member_epoch == args[0]:
            self.fence(
                out,
                group,
                member,
                f"it failed to transition from epoch {args[0]} within "
                f"{member.rebalance_timeout_ms}ms.",
            )

    # -- applying a change ----------------------------------------------------------------

    def commit(
        self,
        out: Effects,
        group_id: str,
        records: list[CoordinatorRecord],
        written: Callable[[Effects, ErrorCode], None] | None,
    ) -> None:
        """Replay ``records`` now and append them; ``written`` learns the outcome. If the
        write fails, the group returns to what it was before them."""
        if not records:
            if written is not None:
                written(out, ErrorCode.NONE)
            return
        current = self.groups.get(group_id)
        saved = current.copy() if current is not None else None
        before = dict(current.members) if current is not None else {}
        for record in records:
            if isinstance(record, ConsumerGroupRecord):
                self.replay(record)
        self.update_timers(out, group_id, before, self.groups.get(group_id))

        def appended(done: Effects, error: ErrorCode) -> None:
            if error:
                if saved is None:
                    self.groups.pop(group_id, None)
                else:
                    self.groups[group_id] = saved
            if written is not None:
                written(done, error)

        out.append(records, appended)

    def update_timers(
        self,
        out: Effects,
        group_id: str,
        before: dict[str, ConsumerMember],
        after: ConsumerGroup | None,
    ) -> None:
        """Sessions of new members start, those of removed ones stop; a member that must
        revoke gets its rebalance timeout, one that is done has it cancelled."""
        now = after.members if after is not None else {}
        for member_id in before.keys() - now.keys():
            out.cancel_timer(TimerKey(CONSUMER_SESSION_TIMER, group_id, member_id))
            out.cancel_timer(TimerKey(CONSUMER_REBALANCE_TIMER, group_id, member_id))
        for member_id, member in now.items():
            old = before.get(member_id)
            if old is None or old.current_assignment() != member.current_assignment():
                self.schedule_rebalance_timer(out, group_id, member)

    def schedule_rebalance_timer(self, out: Effects, group_id: str, member: ConsumerMember) -> None:
        key = TimerKey(CONSUMER_REBALANCE_TIMER, group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            out.set_timer(key, max(member.rebalance_timeout_ms, 0), member.member_epoch)
        else:
            out.cancel_timer(key)

    def touch(self, out: Effects, group_id: str, member_id: str) -> None:
        """A heartbeat restarts the member's session."""
        out.set_timer(
            TimerKey(CONSUMER_SESSION_TIMER, group_id, member_id),
            self.session_timeout_ms(group_id),
        )

    # -- loading, unloading, deleting ------------------------------------------------------

    def loaded(self, out: Effects) -> None:
        """Loaded members must heartbeat within a session; revocations get their timeout."""
        for group in self.groups.values():
            for member in group.members.values():
                self.touch(out, group.group_id, member.member_id)
                self.schedule_rebalance_timer(out, group.group_id, member)

    def unload(self) -> None:
        for group in self.groups.values():
            group.dead = True
        self.groups.clear()

    def delete_records(self, group: ConsumerGroup) -> list[CoordinatorRecord]:
        """DeleteGroups of an empty group: its target epoch and its epoch go."""
        group.validate_delete()
        return list(group_tombstones(group.group_id))

    def forget(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.dead = True

    # -- descriptions --------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedConsumerGroup(
                group_id=group_id,
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} not found.",
            )
        return DescribedConsumerGroup(
            group_id=group_id,
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=self.preferred_assignor(group.members.values()),
            members=[
                DescribedConsumerGroupMember(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    subscribed_topic_regex=m.subscribed_topic_regex or "",
                    assignment=self.described_assignment(m.assigned),
                    target_assignment=self.described_assignment(group.target_of(m.member_id)),
                    member_type=CONSUMER_MEMBER_TYPE,
                )
                for m in group.members.values()
            ],
        )

    def described_assignment(self, assignment: Assignment) -> MemberAssignment:
        topics = []
        for topic_id, partitions in assignment.items():
            topic = self.topics.by_id(topic_id)
            if topic is not None:
                topics.append(
                    DescribedTopicPartitions(
                        topic_id=topic_id, topic_name=topic.name, partitions=sorted(partitions)
                    )
                )
        return MemberAssignment(topic_partitions=topics)

    def list_groups(self, states: set[str]) -> list[ListedGroup]:
        return [
            ListedGroup(
                group_id=group.group_id,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                group_state=group.state.value,
                group_type=CONSUMER_PROTOCOL_TYPE,
            )
            for group in self.groups.values()
            if not states or group.state.value.lower() in states
        ]


def group_not_found(group_id: str) -> KafkaError:
    return KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")


def check_member_epoch(
    member: ConsumerMember, received: int, owned: list[TopicPartitions] | None
) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: the current epoch, or the
    previous one from a member whose answer was lost and that owns nothing new."""
    if received > member.member_epoch:
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )
    if received < member.member_epoch and (
        received != member.previous_member_epoch or not _is_subset(owned, member.assigned)
    ):
        raise KafkaError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must abandon "
            "all its partitions and rejoin.",
        )


def _is_subset(owned: list[TopicPartitions] | None, assigned: Assignment) -> bool:
    if owned is None:
        return False
    return all(
        partition in assigned.get(tp.topic_id, ()) for tp in owned for partition in tp.partitions
    )


def topics_hash(topics: dict[bytes, TopicSpec]) -> int:
    """A stable 64-bit hash of the subscribed topics' metadata (IDs, partitions, racks).

    Kafka 4.1+ stores such a hash too (KIP-1101); its exact function differs, so a log
    written by Kafka costs one extra rebalance when kpybroker first reads it.
    """
    if not topics:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for topic_id in sorted(topics):
        spec = topics[topic_id]
        digest.update(topic_id)
        digest.update(spec.partitions.to_bytes(4, "big"))
        for racks in spec.racks:
            digest.update(",".join(sorted(racks)).encode() + b";")
    (value,) = struct.unpack(">q", digest.digest())
    return value


def _or(value: str | None, current: str | None) -> str | None:
    return current if value is None else value


def _new_member_id() -> str:
    """A member ID for a v0 client that sent none (Kafka's ``Uuid.randomUuid().toString()``)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
