"""The coordinator of one ``__consumer_offsets`` partition, as a state machine without I/O.

A shard holds the groups that hash to its partition (``partitioning``) and
their offsets; its share groups' events are in ``share`` (``share_shard``). It is
fed events and answers with ``Effects`` (see ``interface``); the runner
(``runtime``) carries them out. Requests that answer at once return their
response directly (reads: OffsetFetch, DescribeGroups, ListGroups); the others
reply through their token.

A shard is built by replaying its partition's records (``replay``) and end
markers (``replay_marker``), then ``loaded()`` starts the sessions of the
members found there, which must heartbeat or rejoin in time. ``unload()``
gives the partition up (issue 8 moves coordination with partition
leadership). Once loaded, a transaction's end marker written to the partition
is replayed the same way (``replay_marker``): it is already in the log, so
there is nothing to append.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from kpybroker.coordinator.committed_offsets import Expired, OffsetManager, commit_error_response
from kpybroker.coordinator.consumer_group import ConsumerGroup
from kpybroker.coordinator.consumer_group_migration import GroupMigration
from kpybroker.coordinator.consumer_group_protocol import ConsumerGroups, heartbeat_error
from kpybroker.coordinator.consumer_group_records import group_tombstones
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.group import DEAD, EMPTY, ClassicGroup
from kpybroker.coordinator.interface import (
    CONSUMER_REBALANCE_TIMER,
    CONSUMER_SESSION_TIMER,
    Append,
    Caller,
    Effects,
    GroupConfigs,
    TimerKey,
    Token,
    TopicsImage,
    coordinator_error,
    no_group_configs,
)
from kpybroker.coordinator.loader import Logged, LoggedMarker
from kpybroker.coordinator.membership import Membership, join_error
from kpybroker.coordinator.offsets_topic_records import (
    ConsumerGroupRecord,
    CoordinatorRecord,
    GroupRecord,
    OffsetRecord,
    ShareGroupRecord,
)
from kpybroker.coordinator.share_group import ShareGroup
from kpybroker.coordinator.share_group_protocol import SHARE_SESSION_TIMER
from kpybroker.coordinator.share_group_records import group_tombstones as share_tombstones
from kpybroker.coordinator.share_shard import ShareEvents
from kpybroker.coordinator.transactional_offsets import (
    TransactionalOffsets,
    txn_commit_error_response,
)
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.consumer_group_describe import DescribedConsumerGroup
from kpybroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kpybroker.protocol.messages.delete_groups import DeletableGroupResult
from kpybroker.protocol.messages.describe_groups import DescribedGroup
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kpybroker.protocol.messages.join_group import JoinGroupRequest
from kpybroker.protocol.messages.leave_group import LeaveGroupResponse, MemberIdentity
from kpybroker.protocol.messages.list_groups import ListedGroup
from kpybroker.protocol.messages.offset_commit import OffsetCommitRequest
from kpybroker.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequestGroup,
    OffsetFetchResponseGroup,
)
from kpybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kpybroker.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kpybroker.protocol.records import NO_PRODUCER_ID

CONSUMER_TIMERS = frozenset({CONSUMER_SESSION_TIMER, CONSUMER_REBALANCE_TIMER})


def is_empty(group: ClassicGroup | ConsumerGroup) -> bool:
    return group.is_empty() if isinstance(group, ConsumerGroup) else group.is_in(EMPTY)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class CoordinatorShard:
    def __init__(
        self,
        partition: int,
        settings: CoordinatorSettings,
        topics: TopicsImage,
        clock: Callable[[], int] = wall_clock_ms,
        group_configs: GroupConfigs = no_group_configs,
    ) -> None:
        self.partition = partition
        self.clock = clock
        self.membership = Membership(settings, clock)
        self.consumer_groups = ConsumerGroups(settings, clock, topics, group_configs)
        self.migration = self.consumer_groups.migration = GroupMigration(
            self.membership, self.consumer_groups
        )
        self.offsets = OffsetManager(self.membership, self.consumer_groups, settings, clock)
        self.transactions = TransactionalOffsets(self.offsets, settings, clock)
        self.share = ShareEvents(settings, clock, topics, group_configs, self._other_kind)
        self.share_groups = self.share.groups

    def _other_kind(self, group_id: str) -> bool:
        """Whether a classic or consumer group holds ``group_id`` (a share group cannot)."""
        return (
            self.membership.group(group_id) is not None
            or self.consumer_groups.group(group_id) is not None
        )

    def _not_consumer(self, group_id: str) -> KafkaError | None:
        """Kafka's answer to a consumer group request for a share group's ID."""
        if self.share_groups.group(group_id) is None:
            return None
        return KafkaError(
            ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
        )

    def __repr__(self) -> str:
        return f"CoordinatorShard({self.partition}, groups={len(self.membership.groups)})"

    # -- group membership -------------------------------------------------------

    def join(self, token: Token, caller: Caller, request: JoinGroupRequest) -> Effects:
        out = Effects()
        if self.share_groups.group(request.group_id) is not None:
            out.reply(token, join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return out
        consumer_group = self.consumer_groups.group(request.group_id)
        if consumer_group is not None and not consumer_group.is_empty():
            self.migration.join(out, token, caller, request)
            return out
        if consumer_group is not None:
            # An empty consumer group gives its ID to the classic group (its offsets stay).
            self.consumer_groups.commit(
                out, request.group_id, group_tombstones(request.group_id), None
            )
        self.membership.join(out, token, caller, request)
        return out

    def consumer_group_heartbeat(
        self, token: Token, caller: Caller, request: ConsumerGroupHeartbeatRequest
    ) -> Effects:
        out = Effects()
        shared = self._not_consumer(request.group_id)
        if shared is not None:
            out.reply(token, heartbeat_error(shared.code, shared.message))
            return out
        before: list[CoordinatorRecord] = []
        classic = self.membership.group(request.group_id)
        if classic is not None and request.member_epoch >= 0:
            joining = request.member_epoch == 0
            if joining and not classic.is_in(EMPTY) and self.migration.may_upgrade(classic):
                # KIP-848's online upgrade: the classic members carry on in a consumer group.
                before = self.migration.upgrade(out, classic)
            elif not classic.is_in(EMPTY):
                out.reply(
                    token,
                    heartbeat_error(
                        ErrorCode.GROUP_ID_NOT_FOUND,
                        f"Group {request.group_id} is not a consumer group.",
                    ),
                )
                return out
            else:
                # An empty classic group (perhaps only offsets) becomes a consumer group.
                self.membership.groups.pop(request.group_id, None)
                before.append(GroupRecord(request.group_id, None))
        self.consumer_groups.heartbeat(out, token, caller, request, before)
        return out

    def describe_consumer_group(self, group_id: str) -> DescribedConsumerGroup:
        if (
            self.membership.group(group_id) is not None
            or self.share_groups.group(group_id) is not None
        ):
            return DescribedConsumerGroup(
                group_id=group_id,
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} is not a consumer group.",
            )
        return self.consumer_groups.describe(group_id)

    def sync(self, token: Token, request: SyncGroupRequest) -> Effects:
        out = Effects()
        if self.share_groups.group(request.group_id) is not None:
            out.reply(token, SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        elif self.consumer_groups.group(request.group_id) is not None:
            self.migration.sync(out, token, request)
        else:
            self.membership.sync(out, token, request)
        return out

    def heartbeat(self, token: Token, request: HeartbeatRequest) -> Effects:
        out = Effects()
        if self.share_groups.group(request.group_id) is not None:
            out.reply(token, HeartbeatResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        elif self.consumer_groups.group(request.group_id) is not None:
            self.migration.heartbeat(out, token, request)
        else:
            self.membership.heartbeat(out, token, request)
        return out

    def leave(self, token: Token, group_id: str, members: Iterable[MemberIdentity]) -> Effects:
        out = Effects()
        if self.share_groups.group(group_id) is not None:
            out.reply(token, LeaveGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        elif self.consumer_groups.group(group_id) is not None:
            self.migration.leave(out, token, group_id, list(members))
        else:
            self.membership.leave(out, token, group_id, members)
        return out

    def describe(self, group_id: str) -> DescribedGroup:
        """DescribeGroups: a consumer or share group is Dead to it, its message (v6) says why."""
        if (
            self.consumer_groups.group(group_id) is not None
            or self.share_groups.group(group_id) is not None
        ):
            return DescribedGroup(
                group_id=group_id,
                group_state=DEAD.value,
                error_message=f"Group {group_id} is not a classic group.",
            )
        return self.membership.describe(group_id)

    def list_groups(self, states: Iterable[str], types: Iterable[str] = ()) -> list[ListedGroup]:
        """ListGroups: states and types compared without case (an empty filter: all)."""
        states = {s.strip().lower() for s in states}
        kinds = {t.strip().lower() for t in types}
        listed = []
        if not kinds or "classic" in kinds:
            listed += self.membership.list_groups(states)
        if not kinds or "consumer" in kinds:
            listed += self.consumer_groups.list_groups(states)
        if not kinds or "share" in kinds:
            listed += self.share_groups.list_groups(states)
        return listed

    # -- offsets ------------------------------------------------------------------

    def commit(self, token: Token, caller: Caller, request: OffsetCommitRequest) -> Effects:
        out = Effects()
        if (shared := self._not_consumer(request.group_id)) is not None:
            out.reply(token, commit_error_response(request, shared.code))
        else:
            self.offsets.commit(out, token, caller, request)
        return out

    def commit_transactional(self, token: Token, request: TxnOffsetCommitRequest) -> Effects:
        out = Effects()
        if (shared := self._not_consumer(request.group_id)) is not None:
            out.reply(token, txn_commit_error_response(request, shared.code))
        else:
            self.transactions.commit(out, token, request)
        return out

    def fetch_offsets(
        self, request: OffsetFetchRequestGroup, require_stable: bool = False
    ) -> OffsetFetchResponseGroup:
        return self.offsets.fetch(request, require_stable)

    def delete_offsets(self, token: Token, request: OffsetDeleteRequest) -> Effects:
        out = Effects()
        if (shared := self._not_consumer(request.group_id)) is not None:
            out.reply(token, OffsetDeleteResponse(error_code=shared.code))
        else:
            self.offsets.delete(out, token, request)
        return out

    def topic_deleted(self, topic: str) -> Effects:
        out = Effects()
        self.offsets.topic_deleted(out, topic)
        self.share.admin.topic_deleted(out, topic)
        return out

    # -- group deletion and expiry ------------------------------------------------

    def delete_groups(self, token: Token, group_ids: Iterable[str]) -> Effects:
        """DeleteGroups: an empty group goes with its offsets (tombstones for all of them)."""
        out = Effects()
        results = []
        records: list[CoordinatorRecord] = []
        deleted: list[DeletableGroupResult] = []
        for group_id in group_ids:
            result = DeletableGroupResult(group_id=group_id)
            results.append(result)
            group = (
                self.membership.group(group_id)
                or self.consumer_groups.group(group_id)
                or self.share_groups.group(group_id)
            )
            try:
                if group is None:
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
                group.validate_delete()
            except KafkaError as exc:
                result.error_code = exc.code
                result.error_message = exc.message
                continue
            records += self.offsets.tombstones(group_id)
            if isinstance(group, ConsumerGroup):
                records += group_tombstones(group_id)
            elif isinstance(group, ShareGroup):
                records += share_tombstones(group)
            else:
                records.append(GroupRecord(group_id, None))
            deleted.append(result)
        if not records:
            out.reply(token, results)
            return out

        def appended(done: Effects, error: ErrorCode) -> None:
            for result in deleted:
                if error:
                    result.error_code = coordinator_error(error)
                else:
                    self.forget_group(result.group_id)
            done.reply(token, results)

        out.append(records, appended)
        return out

    def expire(self) -> Effects:
        """Delete expired offsets, and Empty groups left with none (Kafka's cleanup cycle)."""
        out = Effects()
        now = self.clock()
        groups: list[ClassicGroup | ConsumerGroup] = [
            *self.membership.groups.values(),
            *self.consumer_groups.groups.values(),
        ]
        for group in groups:
            expired, none_left = self.offsets.expired(group, now)
            records: list[CoordinatorRecord] = [
                OffsetRecord(group.group_id, e.topic, e.partition, None) for e in expired
            ]
            delete_group = none_left and is_empty(group)
            if delete_group:
                if isinstance(group, ConsumerGroup):
                    records += group_tombstones(group.group_id)
                else:
                    records.append(GroupRecord(group.group_id, None))
            if records:
                out.append(records, self.expiry_done(group.group_id, expired, delete_group))
        return out

    def expiry_done(
        self, group_id: str, expired: list[Expired], delete_group: bool
    ) -> Callable[[Effects, ErrorCode], None]:
        def appended(_done: Effects, error: ErrorCode) -> None:
            if error:
                return  # the next cycle tries again
            self.offsets.remove_expired(group_id, expired)
            group = self.membership.group(group_id) or self.consumer_groups.group(group_id)
            if delete_group and group is not None and is_empty(group):
                self.forget_group(group_id)

        return appended

    def forget_group(self, group_id: str) -> None:
        group = self.membership.groups.pop(group_id, None)
        if group is not None:
            group.transition_to(DEAD)
        self.consumer_groups.forget(group_id)
        self.share_groups.forget(group_id)
        self.offsets.remove_group(group_id)

    # -- the runner's events --------------------------------------------------------

    def timer_fired(self, key: TimerKey, args: tuple[int, ...]) -> Effects:
        out = Effects()
        if key.kind in CONSUMER_TIMERS:
            self.consumer_groups.timer_fired(out, key, args)
        elif key.kind == SHARE_SESSION_TIMER:
            self.share_groups.timer_fired(out, key)
        else:
            self.membership.timer_fired(out, key, args)
        return out

    def append_written(self, append: Append, base_offset: int) -> None:
        """The leader wrote the batch at ``base_offset`` (it may still fail to replicate)."""
        append.base_offset = base_offset
        self.offsets.written(append)

    def append_done(self, append: Append, error: ErrorCode) -> Effects:
        out = Effects()
        if append.on_done is not None:
            append.on_done(out, error)
        return out

    def replay(
        self, record: CoordinatorRecord, offset: int = -1, producer_id: int = NO_PRODUCER_ID
    ) -> None:
        """Apply a record read at ``offset``, from a batch of ``producer_id`` if transactional."""
        if isinstance(record, OffsetRecord):
            self.offsets.replay(record, offset, producer_id)
        elif isinstance(record, ConsumerGroupRecord):
            self.consumer_groups.replay(record)
        elif isinstance(record, ShareGroupRecord):
            self.share_groups.replay(record)
        else:
            self.membership.replay(record)

    def replay_logged(self, entries: Iterable[Logged]) -> None:
        """Apply what the loader read, in log order."""
        for entry in entries:
            if isinstance(entry, LoggedMarker):
                self.replay_marker(entry.producer_id, entry.committed)
            else:
                self.replay(entry.record, entry.offset, entry.producer_id)

    def replay_marker(self, producer_id: int, committed: bool) -> None:
        """The end marker of ``producer_id``'s transaction: its pending offsets commit or go."""
        self.transactions.end(producer_id, committed)

    def loaded(self) -> Effects:
        out = Effects()
        # A classic group that only offsets created, whose ID a consumer group holds, goes.
        for group_id in self.consumer_groups.groups.keys() & self.membership.groups.keys():
            if self.membership.groups[group_id].is_in(EMPTY):
                del self.membership.groups[group_id]
        self.membership.loaded(out)
        self.consumer_groups.loaded(out)
        self.share_groups.loaded(out)
        return out

    def unload(self) -> Effects:
        out = Effects()
        self.membership.unload(out)
        self.consumer_groups.unload()
        self.share_groups.unload()
        return out
