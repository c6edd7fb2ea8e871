"""KIP-932's share group protocol for the groups of one ``__consumer_offsets`` partition.

ShareGroupHeartbeat does everything, following Kafka 4.4's
``GroupMetadataManager.shareGroupHeartbeat``:

1. The member joins (epoch 0, with a member ID it made itself and the topics it
   subscribes to), heartbeats, or leaves (epoch -1). Its rack and subscription
   are updated; a changed subscription, changed metadata of the subscribed
   topics, or initialized share partitions that nobody has been given yet bump
   the group epoch.
2. When the group epoch is ahead of the target assignment's, the ``simple``
   assignor computes a new target over the partitions whose share state is
   initialized (``simple_assignor``); only the members whose target changed get
   a record. Kafka 4.3+ batches these (KIP-1263): a new target waits until
   ``group.share.assignment.interval.ms`` (or the group's
   ``share.assignment.interval.ms``) has passed since the last one was computed,
   so members that join together are assigned together; meanwhile a heartbeat
   gets the last target, at its epoch (a new member: nothing yet).
3. The member's assignment becomes its target at once: partitions are shared,
   nothing has to be revoked first (Kafka's ``ShareGroupAssignmentBuilder``).
4. Subscribed partitions without share state are recorded as initializing and
   handed to the service to initialize through the persister
   (``share_group_state``).

Every change is a list of records, replayed into the group at once and appended
to the log; the answer waits until they are written. If the write fails, the
group returns to what it was. A member's session (``group.share.session.timeout.ms``,
or the group's own ``share.session.timeout.ms``) restarts with each heartbeat
and fences the member when it runs out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

from kpybroker.coordinator import simple_assignor
from kpybroker.coordinator.assignors import TopicSpec
from kpybroker.coordinator.consumer_group import JOIN_EPOCH, LEAVE_EPOCH, Assignment
from kpybroker.coordinator.consumer_group_protocol import topics_hash
from kpybroker.coordinator.interface import (
    Caller,
    Effects,
    GroupConfigs,
    TimerKey,
    Token,
    TopicsImage,
    coordinator_error,
    no_group_configs,
)
from kpybroker.coordinator.offsets_topic_records import CoordinatorRecord, ShareGroupRecord
from kpybroker.coordinator.request_checks import invalid_request, not_empty, within
from kpybroker.coordinator.share_group import (
    SHARE_PROTOCOL_TYPE,
    STABLE_MEMBER,
    ShareGroup,
    ShareMember,
    topic_names,
)
from kpybroker.coordinator.share_group_records import (
    current_assignment_record,
    epoch_record,
    member_record,
    member_tombstones,
    replay,
    state_record,
    target_epoch_record,
    target_record,
)
from kpybroker.coordinator.share_group_state import (
    ShareInitialization,
    initialized_assignment_pending,
    plan_initialization,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.list_groups import ListedGroup
from kpybroker.protocol.messages.share_group_describe import (
    DescribedShareGroup,
    DescribedShareGroupMember,
    DescribedTopicPartitions,
    MemberAssignment,
)
from kpybroker.protocol.messages.share_group_heartbeat import (
    Assignment as ResponseAssignment,
)
from kpybroker.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

if TYPE_CHECKING:
    from kpybroker.coordinator.coordinator_settings import CoordinatorSettings

log = logging.getLogger(__name__)

SHARE_SESSION_TIMER = "share-session"

Written = Callable[[Effects, ErrorCode], None]


class ShareHeartbeatResult(NamedTuple):
    """A heartbeat's answer and, when it found partitions without share state, what the
    service must initialize (Kafka's ``Map.Entry<response, Optional<parameters>>``)."""

    response: ShareGroupHeartbeatResponse
    initialize: ShareInitialization | None = None


def heartbeat_error(code: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=code, error_message=message)


def validate_heartbeat(request: ShareGroupHeartbeatRequest) -> None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid`` (before the group is routed):
    v1 needs the member ID the client made, a first heartbeat its subscription."""
    not_empty(request.member_id, "MemberId can't be empty.")
    not_empty(request.group_id, "GroupId can't be empty.")
    not_empty(request.rack_id, "RackId can't be empty.")
    if request.member_epoch == JOIN_EPOCH:
        if not request.subscribed_topic_names:
            raise invalid_request("SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_EPOCH:
        raise invalid_request("MemberEpoch is invalid.")


def not_a_share_group(group_id: str) -> KafkaError:
    return KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")


def group_not_found(group_id: str) -> KafkaError:
    return KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")


class ShareGroups:
    """The share groups of one partition and their heartbeats."""

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
        self.groups: dict[str, ShareGroup] = {}

    def group(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def existing(self, group_id: str) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            raise group_not_found(group_id)
        return group

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's share.session.timeout.ms, else the broker's."""
        s = self.settings
        return within(
            self.group_configs(group_id).share_session_timeout_ms,
            s.share_session_timeout_ms,
            s.share_min_session_timeout_ms,
            s.share_max_session_timeout_ms,
        )

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's share.heartbeat.interval.ms, else the broker's."""
        s = self.settings
        return within(
            self.group_configs(group_id).share_heartbeat_interval_ms,
            s.share_heartbeat_interval_ms,
            s.share_min_heartbeat_interval_ms,
            s.share_max_heartbeat_interval_ms,
        )

    def assignment_interval_ms(self, group_id: str) -> int:
        """The group's share.assignment.interval.ms, else the broker's."""
        s = self.settings
        return within(
            self.group_configs(group_id).share_assignment_interval_ms,
            s.share_assignment_interval_ms,
            s.share_min_assignment_interval_ms,
            s.share_max_assignment_interval_ms,
        )

    def assignment_due(self, group: ShareGroup) -> bool:
        """Whether a new target may be computed now: the group's assignment interval has
        passed since the last one (a new group's never was)."""
        elapsed = self.clock() - group.assignment_timestamp
        return elapsed >= self.assignment_interval_ms(group.group_id)

    def replay(self, record: ShareGroupRecord) -> None:
        replay(self.groups, record, self._create, self.clock())

    def _create(self, group_id: str) -> ShareGroup:
        group = self.groups[group_id] = ShareGroup(group_id)
        return group

    # -- ShareGroupHeartbeat ----------------------------------------------------------

    def heartbeat(
        self, out: Effects, token: Token, caller: Caller, request: ShareGroupHeartbeatRequest
    ) -> None:
        """Handle one (validated) heartbeat; the reply is a ``ShareHeartbeatResult``."""
        initialize: ShareInitialization | None = None
        try:
            if request.member_epoch == LEAVE_EPOCH:
                group, records, response = self.leave(request)
            else:
                group, records, response, initialize = self.join_or_heartbeat(caller, request)
        except KafkaError as exc:
            out.reply(token, ShareHeartbeatResult(heartbeat_error(exc.code, exc.message)))
            return

        def written(done: Effects, error: ErrorCode) -> None:
            if error:
                result = ShareHeartbeatResult(heartbeat_error(coordinator_error(error)))
            else:
                result = ShareHeartbeatResult(response, initialize)
            done.reply(token, result)

        self.commit(out, group.group_id, records, written)
        if request.member_epoch >= JOIN_EPOCH:
            self.touch(out, group.group_id, request.member_id)

    def join_or_heartbeat(
        self, caller: Caller, request: ShareGroupHeartbeatRequest
    ) -> tuple[
        ShareGroup, list[CoordinatorRecord], ShareGroupHeartbeatResponse, ShareInitialization | None
    ]:
        group_id, member_id = request.group_id, request.member_id
        joining = request.member_epoch == JOIN_EPOCH
        group = self.groups.get(group_id)
        if group is None:
            if not joining:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            group = ShareGroup(group_id)
        self.check_size(group, member_id)
        member = self.member_for(group, member_id, request.member_epoch)
        names = request.subscribed_topic_names
        updated = replace(
            member,
            rack_id=member.rack_id if request.rack_id is None else request.rack_id,
            subscribed_topic_names=(
                member.subscribed_topic_names if names is None else topic_names(names)
            ),
            client_id=caller.client_id,
            client_host=caller.client_host,
        )
        records: list[CoordinatorRecord] = []
        subscription_changed = False
        if member_id not in group.members or updated.subscription() != member.subscription():
            records.append(member_record(group_id, updated))
            subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        members = {**group.members, member_id: updated}
        topics = self.subscribed_topics(members.values())
        metadata_hash = topics_hash(topics)
        bump = subscription_changed or (
            group.group_epoch == group.assignment_epoch
            and initialized_assignment_pending(group, members)
        )
        group_epoch = group.group_epoch
        if bump or metadata_hash != group.metadata_hash:
            bump = True
            group_epoch += 1
            records.append(epoch_record(group_id, group_epoch, metadata_hash))
            log.info("[GroupId %s] Bumped group epoch to %d.", group_id, group_epoch)
        if group_epoch > group.assignment_epoch and self.assignment_due(group):
            target = self.new_target(group, members, topics, group_epoch, member_id, records)
            target_epoch = group_epoch
        else:
            target = group.target_of(member_id)
            target_epoch = group.assignment_epoch
        reconciled = self.reconcile(updated, target_epoch, target, force=bump)
        if reconciled != updated or member_id not in group.members:
            records.append(current_assignment_record(group_id, reconciled))
        response = ShareGroupHeartbeatResponse(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.heartbeat_interval_ms(group_id),
        )
        if joining or names is not None or reconciled.assigned != member.assigned:
            response.assignment = ResponseAssignment(
                topic_partitions=[
                    TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                    for topic_id, partitions in sorted(reconciled.assigned.items())
                ]
            )
        initialize = None
        planned = plan_initialization(
            group,
            group_epoch,
            (name for m in members.values() for name in m.subscribed_topic_names),
            self.topics,
            self.clock(),
            self.settings.share_initialize_retry_interval_ms,
        )
        if planned is not None:
            new_state, initialize = planned
            records.append(state_record(group_id, new_state))
        return group, records, response, initialize

    def member_for(self, group: ShareGroup, member_id: str, epoch: int) -> ShareMember:
        """The member the heartbeat is from: created by a join, else known and at the
        epoch it was given (Kafka's ``throwIfShareGroupMemberEpochIsInvalid``)."""
        existing = group.members.get(member_id)
        if existing is None:
            if epoch != JOIN_EPOCH:
                group.member(member_id)  # UNKNOWN_MEMBER_ID
            log.info("[GroupId %s] Member %s joins the share group.", group.group_id, member_id)
            return ShareMember(member_id)
        if epoch == JOIN_EPOCH:
            return existing
        if epoch > existing.member_epoch:
            raise KafkaError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a greater member epoch ({epoch}) than the one "
                f"known by the group coordinator ({existing.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )
        if epoch < existing.member_epoch and epoch != existing.previous_member_epoch:
            raise KafkaError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a smaller member epoch ({epoch}) than the one "
                f"known by the group coordinator ({existing.member_epoch}), and it does not "
                f"match the previous member epoch ({existing.previous_member_epoch}). The "
                "member must abandon all its partitions and rejoin.",
            )
        return existing

    def check_size(self, group: ShareGroup, member_id: str) -> None:
        limit = self.settings.share_max_size
        if member_id not in group.members and len(group.members) >= limit:
            raise KafkaError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The share group has reached its maximum capacity of {limit} members.",
            )

    def subscribed_topics(self, members: Iterable[ShareMember]) -> dict[bytes, TopicSpec]:
        """The existing topics the members subscribe to."""
        specs: dict[bytes, TopicSpec] = {}
        for name in sorted({n for m in members for n in m.subscribed_topic_names}):
            topic = self.topics.by_name(name)
            if topic is not None:
                specs[topic.topic_id] = TopicSpec(topic.topic_id, topic.partitions, topic.racks)
        return specs

    def new_target(
        self,
        group: ShareGroup,
        members: Mapping[str, ShareMember],
        topics: Mapping[bytes, TopicSpec],
        epoch: int,
        member_id: str,
        records: list[CoordinatorRecord],
    ) -> Assignment:
        """Run the ``simple`` assignor over the initialized partitions of the subscribed
        topics; records for the members whose target changed, then the target epoch."""
        subscriptions = {
            m.member_id: frozenset(
                t.topic_id
                for name in m.subscribed_topic_names
                if (t := self.topics.by_name(name)) is not None and t.topic_id in topics
            )
            for m in members.values()
        }
        assignable = {
            topic_id: frozenset(p for p in partitions if p < topics[topic_id].partitions)
            for topic_id, partitions in group.initialized_partitions().items()
            if topic_id in topics
        }
        current = {m: group.target_of(m) for m in members}
        targets = simple_assignor.assign(subscriptions, current, assignable)
        for target_member, assignment in targets.items():
            # A member without a target yet always gets a record (Kafka's builder).
            if assignment != group.target.get(target_member):
                records.append(target_record(group.group_id, target_member, assignment))
        records.append(target_epoch_record(group.group_id, epoch, self.clock()))
        log.info(
            "[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor.",
            group.group_id,
            epoch,
            simple_assignor.NAME,
        )
        return targets.get(member_id, {})

    def reconcile(
        self, member: ShareMember, target_epoch: int, target: Assignment, *, force: bool
    ) -> ShareMember:
        """Kafka's ``ShareGroupAssignmentBuilder``: the member moves to the target's epoch
        with the target's partitions of the topics it subscribes to; ``force`` (its
        subscription or the group changed) re-filters them at the same epoch."""
        if not force and member.is_reconciled_to(target_epoch):
            return member
        subscribed = {
            t.topic_id
            for name in member.subscribed_topic_names
            if (t := self.topics.by_name(name)) is not None
        }
        assigned = {t: ps for t, ps in target.items() if t in subscribed}
        if target_epoch != member.member_epoch:
            return replace(
                member,
                state=STABLE_MEMBER,
                assigned=assigned,
                member_epoch=target_epoch,
                previous_member_epoch=member.member_epoch,
            )
        if force:
            return replace(member, assigned=assigned)
        return member

    # -- leaving and fencing ----------------------------------------------------------

    def leave(
        self, request: ShareGroupHeartbeatRequest
    ) -> tuple[ShareGroup, list[CoordinatorRecord], ShareGroupHeartbeatResponse]:
        group = self.existing(request.group_id)
        member = group.member(request.member_id)
        log.info("[GroupId %s] Member %s left the share group.", group.group_id, member.member_id)
        response = ShareGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=request.member_epoch
        )
        return group, self.fence_records(group, member), response

    def fence_records(self, group: ShareGroup, member: ShareMember) -> list[CoordinatorRecord]:
        """Remove the member and bump the group epoch; an emptied group's target epoch
        catches up (KAFKA-20442). That is no computed assignment: a member joining right
        after is assigned at once if the last one was long enough ago (as Kafka 4.4 does)."""
        records: list[CoordinatorRecord] = list(member_tombstones(group.group_id, member.member_id))
        others = [m for m in group.members.values() if m.member_id != member.member_id]
        epoch = group.group_epoch + 1
        records.append(
            epoch_record(group.group_id, epoch, topics_hash(self.subscribed_topics(others)))
        )
        if not others:
            records.append(target_epoch_record(group.group_id, epoch, group.assignment_timestamp))
        return records

    def timer_fired(self, out: Effects, key: TimerKey) -> None:
        group = self.groups.get(key.group_id)
        member = group.members.get(key.member_id) if group is not None else None
        if group is None or member is None:
            return
        log.info(
            "[GroupId %s] Member %s fenced from the group because the member session expired.",
            group.group_id,
            member.member_id,
        )
        self.commit(out, group.group_id, self.fence_records(group, member), None)

    # -- applying a change ----------------------------------------------------------------

    def commit(
        self,
        out: Effects,
        group_id: str,
        records: list[CoordinatorRecord],
        written: Written | None,
    ) -> None:
        """Replay ``records`` now and append them; ``written`` learns the outcome. If the
        write fails, the group returns to what it was before them."""
        if not records:
            if written is not None:
                written(out, ErrorCode.NONE)
            return
        current = self.groups.get(group_id)
        saved = current.copy() if current is not None else None
        before = set(current.members) if current is not None else set()
        for record in records:
            if isinstance(record, ShareGroupRecord):
                self.replay(record)
        after = self.groups.get(group_id)
        for member_id in before - (set(after.members) if after is not None else set()):
            out.cancel_timer(TimerKey(SHARE_SESSION_TIMER, group_id, member_id))

        def appended(done: Effects, error: ErrorCode) -> None:
            if error:
                if saved is None:
                    self.groups.pop(group_id, None)
                else:
                    self.groups[group_id] = saved
            if written is not None:
                written(done, error)

        out.append(records, appended)

    def touch(self, out: Effects, group_id: str, member_id: str) -> None:
        """A heartbeat restarts the member's session."""
        out.set_timer(
            TimerKey(SHARE_SESSION_TIMER, group_id, member_id), self.session_timeout_ms(group_id)
        )

    # -- loading, unloading, deleting ------------------------------------------------------

    def loaded(self, out: Effects) -> None:
        """Loaded members must heartbeat within a session."""
        for group in self.groups.values():
            for member_id in group.members:
                self.touch(out, group.group_id, member_id)

    def unload(self) -> None:
        for group in self.groups.values():
            group.dead = True
        self.groups.clear()

    def forget(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.dead = True

    # -- descriptions --------------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedShareGroup:
        """ShareGroupDescribe of one group (Kafka's ``ShareGroup.asDescribedGroup``)."""
        group = self.groups.get(group_id)
        if group is None:
            error = group_not_found(group_id)
            return DescribedShareGroup(
                group_id=group_id, error_code=error.code, error_message=error.message
            )
        return DescribedShareGroup(
            group_id=group_id,
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=simple_assignor.NAME,
            members=[
                DescribedShareGroupMember(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topic_names),
                    assignment=self.described_assignment(m.assigned),
                )
                for m in group.members.values()
            ],
        )

    def described_assignment(self, assignment: Assignment) -> MemberAssignment:
        """Topics the cluster no longer has are left out, as Kafka does."""
        topics = []
        for topic_id, partitions in sorted(assignment.items()):
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
                protocol_type=SHARE_PROTOCOL_TYPE,
                group_state=group.state.value,
                group_type=SHARE_PROTOCOL_TYPE,
            )
            for group in self.groups.values()
            if not states or group.state.value.lower() in states
        ]
