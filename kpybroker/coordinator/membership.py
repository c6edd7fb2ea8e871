"""Kafka's classic rebalance protocol for the groups of one ``__consumer_offsets`` partition.

JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the three timers that
drive them, follow Kafka's ``GroupMetadataManager`` (the 4.x coordinator)
step for step, with its names, so that each rule can be checked against it:

- The join phase ends when every known member has rejoined (and no member
  fetched a member ID it has not used yet), or when the longest rebalance
  timeout runs out; members that did not rejoin are then dropped, except
  static ones. A group leaving Empty first waits
  ``group.initial.rebalance.delay.ms``, extended while new members arrive.
- The sync phase ends when the leader's assignment is in the log; members
  that do not send SyncGroup within the rebalance timeout are dropped.
- A member's session timer restarts with each heartbeat (and offset commit);
  when it fires, a member not parked in JoinGroup or SyncGroup is removed.

Everything here is synchronous and I/O-free: each method writes what should
happen into the ``Effects`` it is given (see ``interface``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    Member,
)
from kpybroker.coordinator.interface import (
    HEARTBEAT_TIMER,
    JOIN_TIMER,
    SYNC_TIMER,
    Caller,
    Effects,
    TimerKey,
    Token,
    coordinator_error,
)
from kpybroker.coordinator.offsets_topic_records import GroupRecord
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.describe_groups import DescribedGroup, DescribedGroupMember
from kpybroker.protocol.messages.group_metadata_value import GroupMetadataValue, MemberMetadata
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kpybroker.protocol.messages.join_group import (
    JoinGroupRequest,
    JoinGroupResponse,
    JoinGroupResponseMember,
)
from kpybroker.protocol.messages.leave_group import (
    LeaveGroupResponse,
    MemberIdentity,
    MemberResponse,
)
from kpybroker.protocol.messages.list_groups import ListedGroup
from kpybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

log = logging.getLogger(__name__)

# JoinGroup v4+ makes an unknown dynamic member fetch its member ID first (KIP-394);
# v9+ lets a rejoining static leader skip the assignment (KIP-814).
REQUIRE_KNOWN_MEMBER_ID_FROM = 4
SKIP_ASSIGNMENT_FROM = 9


def join_error(code: ErrorCode, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(error_code=code, member_id=member_id)


@dataclass(slots=True)
class JoinAttempt:
    """One JoinGroup being handled: the request, its group, and where its outcome goes."""

    out: Effects
    token: Token
    caller: Caller
    request: JoinGroupRequest
    group: ClassicGroup

    def reply(self, response: JoinGroupResponse) -> None:
        self.out.reply(self.token, response)

    def fail(self, code: ErrorCode, member_id: str | None = None) -> None:
        """Answer ``code``, with the request's member ID unless another is given."""
        self.reply(join_error(code, self.request.member_id if member_id is None else member_id))

    def update(self, member: Member) -> None:
        """Take the request's protocols and timeouts; the member now waits for the join phase."""
        request = self.request
        self.group.update_member(
            member,
            protocol_list(request),
            request.rebalance_timeout_ms,
            request.session_timeout_ms,
            self.token,
        )


class Membership:
    """The classic groups of one partition and their rebalances."""

    def __init__(self, settings: CoordinatorSettings, clock: Callable[[], int]) -> None:
        self.settings = settings
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def create_group(self, group_id: str) -> ClassicGroup:
        group = self.groups[group_id] = ClassicGroup(group_id, self.clock)
        return group

    # -- JoinGroup ------------------------------------------------------------

    def join(self, out: Effects, token: Token, caller: Caller, request: JoinGroupRequest) -> None:
        member_id = request.member_id
        group = self.groups.get(request.group_id)
        is_new_group = group is None
        if group is None:
            if member_id:
                out.reply(token, join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            group = self.create_group(request.group_id)
        attempt = JoinAttempt(out, token, caller, request, group)
        appends = len(out.appends)
        if not self.accept_joining_member(group, member_id):
            group.remove(member_id)
            attempt.fail(ErrorCode.GROUP_MAX_SIZE_REACHED, "")
        elif group.is_in(DEAD):
            # Unloaded or deleted meanwhile: the client looks up the coordinator again.
            attempt.fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif not group.supports_protocols(request.protocol_type, protocol_names(request)):
            attempt.fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        elif not member_id:
            self.join_new_member(attempt)
        else:
            self.join_existing_member(attempt)
        if is_new_group and len(out.appends) == appends:
            # Kafka writes a new group at once, so that it survives a restart.
            out.append([self.empty_group_record(group)])

    def accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        """``group.max.size``: awaiting members count while preparing, members otherwise."""
        limit = self.settings.max_group_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_in(PREPARING_REBALANCE):
            known = group.has_member(member_id) and group.member(member_id).join_waiter is not None
            return known or group.num_awaiting_join() < limit
        return group.has_member(member_id) or len(group.members) < limit

    def join_new_member(self, attempt: JoinAttempt) -> None:
        group, request = attempt.group, attempt.request
        instance_id = request.group_instance_id
        new_member_id = group.generate_member_id(attempt.caller.client_id, instance_id)
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                self.replace_static_member(attempt, existing, new_member_id)
            else:
                self.add_member(attempt, new_member_id)
        elif attempt.caller.api_version >= REQUIRE_KNOWN_MEMBER_ID_FROM:
            # Held until it rejoins with this ID or its session times out.
            group.pending_join.add(new_member_id)
            attempt.out.set_timer(heartbeat_key(group, new_member_id), request.session_timeout_ms)
            attempt.fail(ErrorCode.MEMBER_ID_REQUIRED, new_member_id)
        else:
            self.add_member(attempt, new_member_id)

    def join_existing_member(self, attempt: JoinAttempt) -> None:
        group, request = attempt.group, attempt.request
        member_id = request.member_id
        if member_id in group.pending_join:
            if request.group_instance_id is not None:
                # Kafka throws IllegalStateException: a pending member is never static.
                attempt.fail(ErrorCode.UNKNOWN_SERVER_ERROR)
            else:
                self.add_member(attempt, member_id)
            return
        try:
            group.validate_member(member_id, request.group_instance_id)
        except KafkaError as exc:
            attempt.fail(exc.code)
            return
        member = group.member(member_id)
        unchanged = member.protocols == protocol_list(request)
        if group.is_in(COMPLETING_REBALANCE) and unchanged:
            # A member that missed the JoinGroup answer gets the same one again.
            attempt.reply(self.join_response(group, member, with_members=True))
        elif group.is_in(STABLE) and unchanged and not group.is_leader(member_id):
            # A follower with unchanged metadata may go straight to SyncGroup.
            attempt.reply(self.join_response(group, member, with_members=False))
        elif group.state in (PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE):
            # Rejoining, new metadata, or the leader asking for a rebalance (new partitions).
            self.update_member_and_rebalance(attempt, member)
        else:
            log.warning("member %s rejoins group %s, which is Empty", member_id, group.group_id)
            attempt.fail(ErrorCode.UNKNOWN_MEMBER_ID)

    def join_response(
        self, group: ClassicGroup, member: Member, *, with_members: bool
    ) -> JoinGroupResponse:
        """The current generation as ``member`` sees it (the leader gets every member)."""
        members = (
            current_members(group) if with_members and group.is_leader(member.member_id) else []
        )
        return JoinGroupResponse(
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    def add_member(self, attempt: JoinAttempt, member_id: str) -> None:
        group, request, caller = attempt.group, attempt.request, attempt.caller
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=caller.client_id,
            client_host=caller.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=protocol_list(request),
            is_new=True,
        )
        if group.is_in(PREPARING_REBALANCE) and group.previous_state is EMPTY:
            group.new_member_added = True
        group.add(member, attempt.token)
        # A new member cannot heartbeat before its first join completes; it is
        # dropped if that takes longer than this (its client then retries).
        timeout = self.settings.new_member_join_timeout_ms
        attempt.out.set_timer(heartbeat_key(group, member_id), timeout)
        self.maybe_prepare_rebalance_or_complete_join(attempt.out, group)

    def update_member_and_rebalance(self, attempt: JoinAttempt, member: Member) -> None:
        attempt.update(member)
        self.maybe_prepare_rebalance_or_complete_join(attempt.out, attempt.group)

    def replace_static_member(self, attempt: JoinAttempt, old_id: str, new_id: str) -> None:
        """A known static member rejoins under a new member ID; the old ID is fenced.

        In a Stable group whose protocol would not change, there is no
        rebalance: the new ID is written to the log and the member gets the
        current generation (a v9+ leader is told to skip the assignment;
        older leaders are answered with the old leader ID so that they do
        not assign).
        """
        out, group = attempt.out, attempt.group
        instance_id = attempt.request.group_instance_id
        current_leader = group.leader_id or ""
        self.fence(out, group.member(old_id))
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.schedule_heartbeat(out, group, member)
        previous = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        attempt.update(member)
        if group.is_in(STABLE) and group.protocol_name == group.select_protocol():
            assignment = {m.member_id: m.assignment for m in group.members.values()}

            def stored(done: Effects, error: ErrorCode) -> None:
                if error:
                    # Not stored: the old member ID stands again; the new one is refused.
                    waiting = member.join_waiter == attempt.token
                    group.update_member(member, *previous, None)
                    old = group.replace_static_member(instance_id, new_id, old_id)
                    self.schedule_heartbeat(done, group, old)
                    response = self.join_response(group, old, with_members=False)
                    response.error_code = coordinator_error(error)
                    response.member_id = ""
                    response.leader = current_leader
                    if waiting:
                        done.reply(attempt.token, response)
                    return
                skip = attempt.caller.api_version >= SKIP_ASSIGNMENT_FROM and group.is_leader(
                    new_id
                )
                response = self.join_response(group, member, with_members=skip)
                response.skip_assignment = skip
                if not skip:
                    response.leader = current_leader
                self.complete_join(done, member, response)

            out.append([self.group_record(group, assignment)], stored)
        elif group.is_in(STABLE):
            self.maybe_prepare_rebalance_or_complete_join(out, group)
        elif group.is_in(COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member ID.
            self.prepare_rebalance(out, group)
        else:
            self.maybe_complete_join_phase(out, group)

    # -- the join phase ---------------------------------------------------------

    def maybe_prepare_rebalance_or_complete_join(self, out: Effects, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(out, group)
        else:
            self.maybe_complete_join_phase(out, group)

    def maybe_complete_join_phase(self, out: Effects, group: ClassicGroup) -> None:
        """End the join phase early once all have rejoined (never the initial one: it waits)."""
        if (
            group.is_in(PREPARING_REBALANCE)
            and group.previous_state is not EMPTY
            and group.has_all_members_joined()
        ):
            self.complete_join_phase(out, group)

    def prepare_rebalance(self, out: Effects, group: ClassicGroup) -> None:
        if group.is_in(COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment(out, group, ErrorCode.REBALANCE_IN_PROGRESS)
        self.remove_sync_expiration(out, group)
        initial = group.is_in(EMPTY)
        if initial:
            delay = self.settings.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            out.set_timer(join_key(group), delay, delay, remaining)
        group.transition_to(PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group %s (generation %d)", group.group_id, group.generation
        )
        if not initial:
            if group.has_all_members_joined():
                self.complete_join_phase(out, group)
            else:
                out.set_timer(join_key(group), group.rebalance_timeout_ms())

    def initial_delay_expired(
        self, out: Effects, group: ClassicGroup, delay: int, remaining: int
    ) -> None:
        """Wait another delay while new members keep arriving, up to the rebalance timeout."""
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            next_delay = min(self.settings.initial_rebalance_delay_ms, remaining)
            out.set_timer(join_key(group), next_delay, next_delay, max(remaining - delay, 0))
        else:
            self.complete_join_phase(out, group)

    def complete_join_phase(self, out: Effects, group: ClassicGroup) -> None:
        """Drop dynamic members that did not rejoin, start the next generation, answer the joins."""
        out.cancel_timer(join_key(group))
        for member in group.not_yet_rejoined():
            if not member.is_static:
                self.drop_member(out, group, member)
        if group.is_in(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait for the session timeouts to empty the group.
            out.set_timer(join_key(group), group.rebalance_timeout_ms())
            return
        group.init_next_generation()
        if group.is_in(EMPTY):
            log.info("group %s is now empty (generation %d)", group.group_id, group.generation)
            out.append([self.group_record(group, {})])
            return
        log.info(
            "group %s generation %d has %d members, protocol %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
        )
        for member in group.members.values():
            self.complete_join(out, member, self.join_response(group, member, with_members=True))
            self.schedule_heartbeat(out, group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        out.set_timer(sync_key(group), group.rebalance_timeout_ms(), group.generation)

    # -- SyncGroup ------------------------------------------------------------

    def sync(self, out: Effects, token: Token, request: SyncGroupRequest) -> None:
        group = self.groups.get(request.group_id)
        if group is None or group.is_in(EMPTY):
            out.reply(token, SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
            return
        try:
            group.validate_generation(
                request.member_id, request.group_instance_id, request.generation_id
            )
            if inconsistent(request.protocol_type, group.protocol_type) or inconsistent(
                request.protocol_name, group.protocol_name
            ):
                raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        except KafkaError as exc:
            out.reply(token, SyncGroupResponse(error_code=exc.code))
            return
        member = group.member(request.member_id)
        if group.is_in(PREPARING_REBALANCE):
            out.reply(token, SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_in(STABLE):
            self.remove_pending_sync_member(out, group, member.member_id)
            out.reply(
                token,
                SyncGroupResponse(
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                ),
            )
        else:
            member.sync_waiter = token
            self.remove_pending_sync_member(out, group, member.member_id)
            if group.is_leader(member.member_id):
                self.store_assignment(out, group, request)

    def store_assignment(
        self, out: Effects, group: ClassicGroup, request: SyncGroupRequest
    ) -> None:
        """Write the leader's assignment (missing members get none); Stable once it is stored.

        The assignment bytes are stored and handed out as they came, unparsed.
        """
        assignment = {a.member_id: a.assignment for a in request.assignments}
        for member_id in group.members:
            assignment.setdefault(member_id, b"")
        generation = request.generation_id

        def stored(done: Effects, error: ErrorCode) -> None:
            # Another rebalance may have started while the record was written.
            if not group.is_in(COMPLETING_REBALANCE) or group.generation != generation:
                return
            if error:
                self.reset_and_propagate_assignment(done, group, coordinator_error(error))
                self.maybe_prepare_rebalance_or_complete_join(done, group)
                return
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, b"")
            self.propagate_assignment(done, group, ErrorCode.NONE)
            group.transition_to(STABLE)

        out.append([self.group_record(group, assignment)], stored)

    def reset_and_propagate_assignment(
        self, out: Effects, group: ClassicGroup, error: ErrorCode
    ) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(out, group, error)

    def propagate_assignment(self, out: Effects, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            if member.sync_waiter is None:
                continue
            out.reply(
                member.sync_waiter,
                SyncGroupResponse(
                    error_code=error,
                    protocol_type=group.protocol_type if ok else None,
                    protocol_name=group.protocol_name if ok else None,
                    assignment=member.assignment,
                ),
            )
            member.sync_waiter = None
            # Its session may have run out while it waited: start it afresh.
            self.schedule_heartbeat(out, group, member)

    def remove_pending_sync_member(self, out: Effects, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync or group.state not in (COMPLETING_REBALANCE, STABLE):
            out.cancel_timer(sync_key(group))

    def remove_sync_expiration(self, out: Effects, group: ClassicGroup) -> None:
        group.pending_sync.clear()
        out.cancel_timer(sync_key(group))

    # -- Heartbeat and LeaveGroup ---------------------------------------------

    def heartbeat(self, out: Effects, token: Token, request: HeartbeatRequest) -> None:
        group = self.groups.get(request.group_id)
        try:
            if group is None:
                raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)
            group.validate_generation(
                request.member_id, request.group_instance_id, request.generation_id
            )
        except KafkaError as exc:
            out.reply(token, HeartbeatResponse(error_code=exc.code))
            return
        error = ErrorCode.NONE
        if group.is_in(EMPTY):
            error = ErrorCode.UNKNOWN_MEMBER_ID
        else:
            self.schedule_heartbeat(out, group, group.member(request.member_id))
            if group.is_in(PREPARING_REBALANCE):
                error = ErrorCode.REBALANCE_IN_PROGRESS
        out.reply(token, HeartbeatResponse(error_code=error))

    def leave(
        self, out: Effects, token: Token, group_id: str, leaving: Iterable[MemberIdentity]
    ) -> None:
        """Remove members by member ID, or static ones by instance ID alone (admin removal)."""
        group = self.groups.get(group_id)
        if group is not None and group.is_in(DEAD):
            out.reply(token, LeaveGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        responses = [
            MemberResponse(
                member_id=identity.member_id,
                group_instance_id=identity.group_instance_id,
                error_code=self.leave_one(out, group, identity),
            )
            for identity in leaving
        ]
        if group is not None and any(r.error_code == ErrorCode.NONE for r in responses):
            if group.state in (STABLE, COMPLETING_REBALANCE):
                self.maybe_prepare_rebalance_or_complete_join(out, group)
            elif group.is_in(PREPARING_REBALANCE):
                self.maybe_complete_join_phase(out, group)
        out.reply(token, LeaveGroupResponse(members=responses))

    def leave_one(
        self, out: Effects, group: ClassicGroup | None, identity: MemberIdentity
    ) -> ErrorCode:
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member_id, instance_id = identity.member_id, identity.group_instance_id
        if not member_id:
            member_id = group.static_member_id(instance_id) if instance_id is not None else None
            if member_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
        elif member_id in group.pending_join:
            group.remove(member_id)
            out.cancel_timer(heartbeat_key(group, member_id))
            return ErrorCode.NONE
        else:
            try:
                group.validate_member(member_id, instance_id)
            except KafkaError as exc:
                return exc.code
        log.info(
            "member %s leaves group %s (reason: %s)", member_id, group.group_id, identity.reason
        )
        self.drop_member(out, group, group.member(member_id))
        return ErrorCode.NONE

    # -- timers -----------------------------------------------------------------

    def timer_fired(self, out: Effects, key: TimerKey, args: tuple[int, ...]) -> None:
        group = self.groups.get(key.group_id)
        if group is None or group.is_in(DEAD):
            return
        if key.kind == HEARTBEAT_TIMER:
            self.session_expired(out, group, key.member_id)
        elif key.kind == JOIN_TIMER and group.is_in(PREPARING_REBALANCE):
            if args:
                self.initial_delay_expired(out, group, *args)
            else:
                self.complete_join_phase(out, group)
        elif key.kind == SYNC_TIMER and args[0] == group.generation:
            self.sync_expired(out, group)

    def session_expired(self, out: Effects, group: ClassicGroup, member_id: str) -> None:
        if member_id in group.pending_join:
            log.info("pending member %s of group %s expired", member_id, group.group_id)
            group.remove(member_id)
            if group.is_in(PREPARING_REBALANCE) and group.has_all_members_joined():
                self.complete_join_phase(out, group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s failed its session timeout", member_id, group.group_id)
        self.drop_member(out, group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join(out, group)
        elif group.is_in(PREPARING_REBALANCE) and group.has_all_members_joined():
            self.complete_join_phase(out, group)

    def sync_expired(self, out: Effects, group: ClassicGroup) -> None:
        """Members that got the JoinGroup answer but never sent SyncGroup are dropped."""
        if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync:
            return
        missing = list(group.pending_sync)
        log.info("group %s drops members that did not sync: %s", group.group_id, missing)
        for member_id in missing:
            self.drop_member(out, group, group.member(member_id))
        self.prepare_rebalance(out, group)

    def schedule_heartbeat(self, out: Effects, group: ClassicGroup, member: Member) -> None:
        out.set_timer(heartbeat_key(group, member.member_id), member.session_timeout_ms)

    # -- waiting requests ---------------------------------------------------------

    def complete_join(self, out: Effects, member: Member, response: JoinGroupResponse) -> None:
        if member.join_waiter is not None:
            out.reply(member.join_waiter, response)
            member.join_waiter = None

    def fence(self, out: Effects, member: Member) -> None:
        """Answer whatever an instance's previous member ID still waits for: it is fenced."""
        self.complete_join(out, member, join_error(ErrorCode.FENCED_INSTANCE_ID, member.member_id))
        if member.sync_waiter is not None:
            out.reply(
                member.sync_waiter, SyncGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID)
            )
            member.sync_waiter = None

    def drop_member(self, out: Effects, group: ClassicGroup, member: Member) -> None:
        """Remove a member; a request it still has parked is answered UNKNOWN_MEMBER_ID.

        Kafka answers only a parked JoinGroup; a parked SyncGroup is answered
        here too, so that no request waits for a member that no longer exists.
        """
        self.complete_join(out, member, join_error(ErrorCode.UNKNOWN_MEMBER_ID))
        if member.sync_waiter is not None:
            out.reply(member.sync_waiter, SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
            member.sync_waiter = None
        out.cancel_timer(heartbeat_key(group, member.member_id))
        group.remove(member.member_id)

    # -- loading and unloading ---------------------------------------------------

    def replay(self, record: GroupRecord) -> None:
        """Rebuild a group from its last record in the log (a tombstone removes it)."""
        value = record.value
        if value is None:
            self.groups.pop(record.group, None)
            return
        group = ClassicGroup(
            record.group,
            self.clock,
            state=STABLE if value.members else EMPTY,
            generation=value.generation,
            protocol_type=value.protocol_type or None,
            protocol_name=value.protocol,
            leader_id=value.leader,
        )
        group.state_timestamp = (
            None if value.current_state_timestamp == -1 else value.current_state_timestamp
        )
        for m in value.members:
            group.add(
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=(
                        m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout
                    ),
                    session_timeout_ms=m.session_timeout,
                    protocol_type=value.protocol_type,
                    protocols=[(value.protocol, m.subscription)],
                    assignment=m.assignment,
                )
            )
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[record.group] = group

    def loaded(self, out: Effects) -> None:
        """Start the sessions of loaded members: they must heartbeat (or rejoin) in time."""
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_heartbeat(out, group, member)
            if len(group.members) > self.settings.max_group_size:
                self.prepare_rebalance(out, group)

    def unload(self, out: Effects) -> None:
        """This partition moved away: parked requests learn it, every group goes Dead."""
        for group in self.groups.values():
            for member in group.members.values():
                self.complete_join(out, member, join_error(ErrorCode.NOT_COORDINATOR))
                if member.sync_waiter is not None:
                    error = SyncGroupResponse(error_code=ErrorCode.NOT_COORDINATOR)
                    out.reply(member.sync_waiter, error)
                    member.sync_waiter = None
            group.transition_to(DEAD)
        self.groups.clear()

    # -- records and descriptions --------------------------------------------------

    def group_record(self, group: ClassicGroup, assignment: dict[str, bytes]) -> GroupRecord:
        members = [
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=assignment[m.member_id],
            )
            for m in group.members.values()
        ]
        return GroupRecord(
            group.group_id,
            GroupMetadataValue(
                protocol_type=group.protocol_type or "",
                generation=group.generation,
                protocol=group.protocol_name,
                leader=group.leader_id,
                current_state_timestamp=state_timestamp(group),
                members=members,
            ),
        )

    def empty_group_record(self, group: ClassicGroup) -> GroupRecord:
        value = GroupMetadataValue(
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=state_timestamp(group),
        )
        return GroupRecord(group.group_id, value)

    def describe(self, group_id: str) -> DescribedGroup:
        """DescribeGroups: metadata bytes only while Stable, assignments always, both unparsed."""
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(
                group_id=group_id,
                group_state=DEAD.value,
                error_message=f"Group {group_id} not found.",  # DescribeGroups v6+
            )
        stable = group.is_in(STABLE)
        return DescribedGroup(
            group_id=group_id,
            group_state=group.state.value,
            protocol_type=group.protocol_type or "",
            protocol_data=group.protocol_name if stable else "",
            members=[
                DescribedGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    member_metadata=m.metadata(group.protocol_name) if stable else b"",
                    member_assignment=m.assignment,
                )
                for m in group.members.values()
            ],
        )

    def list_groups(self, states: Iterable[str]) -> list[ListedGroup]:
        """ListGroups, filtered by state names compared without case (none: all)."""
        wanted = {s.strip().lower() for s in states}
        return [
            ListedGroup(
                group_id=group.group_id,
                protocol_type=group.protocol_type or "",
                group_state=group.state.value,
                group_type="classic",
            )
            for group in self.groups.values()
            if not wanted or group.state.value.lower() in wanted
        ]


def protocol_list(request: JoinGroupRequest) -> list[tuple[str, bytes]]:
    return [(p.name, p.metadata) for p in request.protocols]


def protocol_names(request: JoinGroupRequest) -> set[str]:
    return {p.name for p in request.protocols}


def current_members(group: ClassicGroup) -> list[JoinGroupResponseMember]:
    """Every member's metadata for the chosen protocol: what the leader assigns from."""
    return [
        JoinGroupResponseMember(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            metadata=m.metadata(group.protocol_name),
        )
        for m in group.members.values()
    ]


def inconsistent(requested: str | None, current: str | None) -> bool:
    """SyncGroup v5 names the protocol type and name; a mismatch is INCONSISTENT_GROUP_PROTOCOL."""
    return requested is not None and current is not None and requested != current


def state_timestamp(group: ClassicGroup) -> int:
    return -1 if group.state_timestamp is None else group.state_timestamp


def join_key(group: ClassicGroup) -> TimerKey:
    return TimerKey(JOIN_TIMER, group.group_id)


def sync_key(group: ClassicGroup) -> TimerKey:
    return TimerKey(SYNC_TIMER, group.group_id)


def heartbeat_key(group: ClassicGroup, member_id: str) -> TimerKey:
    return TimerKey(HEARTBEAT_TIMER, group.group_id, member_id)
