"""The coordinator of one ``__consumer_offsets`` partition, as a state machine without I/O.

A shard holds the groups that hash to its partition (``partitioning``) and
their offsets. It is fed events and answers with ``Effects`` (see
``interface``); the runner (``runtime``) carries them out. Requests that
answer at once return their response directly (reads: OffsetFetch,
DescribeGroups, ListGroups); the others reply through their token.

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

from kpybroker.coordinator.committed_offsets import Expired, OffsetManager
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.group import DEAD, EMPTY
from kpybroker.coordinator.interface import (
    Append,
    Caller,
    Effects,
    TimerKey,
    Token,
    coordinator_error,
)
from kpybroker.coordinator.loader import Logged, LoggedMarker
from kpybroker.coordinator.membership import Membership
from kpybroker.coordinator.offsets_topic_records import CoordinatorRecord, GroupRecord, OffsetRecord
from kpybroker.coordinator.transactional_offsets import TransactionalOffsets
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.delete_groups import DeletableGroupResult
from kpybroker.protocol.messages.describe_groups import DescribedGroup
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest
from kpybroker.protocol.messages.join_group import JoinGroupRequest
from kpybroker.protocol.messages.leave_group import MemberIdentity
from kpybroker.protocol.messages.list_groups import ListedGroup
from kpybroker.protocol.messages.offset_commit import OffsetCommitRequest
from kpybroker.protocol.messages.offset_delete import OffsetDeleteRequest
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequestGroup,
    OffsetFetchResponseGroup,
)
from kpybroker.protocol.messages.sync_group import SyncGroupRequest
from kpybroker.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kpybroker.protocol.records import NO_PRODUCER_ID


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class CoordinatorShard:
    def __init__(
        self,
        partition: int,
        settings: CoordinatorSettings,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.partition = partition
        self.clock = clock
        self.membership = Membership(settings, clock)
        self.offsets = OffsetManager(self.membership, settings, clock)
        self.transactions = TransactionalOffsets(self.offsets, settings, clock)

    def __repr__(self) -> str:
        return f"CoordinatorShard({self.partition}, groups={len(self.membership.groups)})"

    # -- group membership -------------------------------------------------------

    def join(self, token: Token, caller: Caller, request: JoinGroupRequest) -> Effects:
        out = Effects()
        self.membership.join(out, token, caller, request)
        return out

    def sync(self, token: Token, request: SyncGroupRequest) -> Effects:
        out = Effects()
        self.membership.sync(out, token, request)
        return out

    def heartbeat(self, token: Token, request: HeartbeatRequest) -> Effects:
        out = Effects()
        self.membership.heartbeat(out, token, request)
        return out

    def leave(self, token: Token, group_id: str, members: Iterable[MemberIdentity]) -> Effects:
        out = Effects()
        self.membership.leave(out, token, group_id, members)
        return out

    def describe(self, group_id: str) -> DescribedGroup:
        return self.membership.describe(group_id)

    def list_groups(self, states: Iterable[str]) -> list[ListedGroup]:
        return self.membership.list_groups(states)

    # -- offsets ------------------------------------------------------------------

    def commit(self, token: Token, caller: Caller, request: OffsetCommitRequest) -> Effects:
        out = Effects()
        self.offsets.commit(out, token, caller, request)
        return out

    def commit_transactional(self, token: Token, request: TxnOffsetCommitRequest) -> Effects:
        out = Effects()
        self.transactions.commit(out, token, request)
        return out

    def fetch_offsets(
        self, request: OffsetFetchRequestGroup, require_stable: bool = False
    ) -> OffsetFetchResponseGroup:
        return self.offsets.fetch(request, require_stable)

    def delete_offsets(self, token: Token, request: OffsetDeleteRequest) -> Effects:
        out = Effects()
        self.offsets.delete(out, token, request)
        return out

    def topic_deleted(self, topic: str) -> Effects:
        out = Effects()
        self.offsets.topic_deleted(out, topic)
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
            group = self.membership.group(group_id)
            try:
                if group is None:
                    raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND)
                group.validate_delete()
            except KafkaError as exc:
                result.error_code = exc.code
                continue
            records += self.offsets.tombstones(group_id)
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
        for group in list(self.membership.groups.values()):
            expired, none_left = self.offsets.expired(group, now)
            records: list[CoordinatorRecord] = [
                OffsetRecord(group.group_id, e.topic, e.partition, None) for e in expired
            ]
            delete_group = none_left and group.is_in(EMPTY)
            if delete_group:
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
            group = self.membership.group(group_id)
            if delete_group and group is not None and group.is_in(EMPTY):
                self.forget_group(group_id)

        return appended

    def forget_group(self, group_id: str) -> None:
        group = self.membership.groups.pop(group_id, None)
        if group is not None:
            group.transition_to(DEAD)
        self.offsets.remove_group(group_id)

    # -- the runner's events --------------------------------------------------------

    def timer_fired(self, key: TimerKey, args: tuple[int, ...]) -> Effects:
        out = Effects()
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
        self.membership.loaded(out)
        return out

    def unload(self) -> Effects:
        out = Effects()
        self.membership.unload(out)
        return out
