"""The group coordinator as the API handlers see it (Kafka's ``GroupCoordinatorService``).

Each method takes a decoded request (normalised to one form across versions
by its handler), applies Kafka's request-level checks (INVALID_GROUP_ID,
INVALID_SESSION_TIMEOUT), routes the group to the shard of its
``__consumer_offsets`` partition, and turns routing failures (not the
coordinator, still loading) into the API's error response. Version-specific
shaping of the answer stays in the handlers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

from kpybroker.coordinator.committed_offsets import commit_error_response
from kpybroker.coordinator.consumer_group_protocol import heartbeat_error
from kpybroker.coordinator.coordinator_settings import CoordinatorSettings
from kpybroker.coordinator.interface import Caller, Effects, Token
from kpybroker.coordinator.membership import join_error
from kpybroker.coordinator.runtime import CoordinatorRuntime
from kpybroker.coordinator.shard import CoordinatorShard
from kpybroker.coordinator.share_group_service import ShareGroupService
from kpybroker.coordinator.transactional_offsets import txn_commit_error_response
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
)
from kpybroker.protocol.messages.consumer_group_describe import DescribedConsumerGroup
from kpybroker.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kpybroker.protocol.messages.delete_groups import DeletableGroupResult
from kpybroker.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsResponse,
)
from kpybroker.protocol.messages.describe_groups import DescribedGroup
from kpybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponseGroup,
)
from kpybroker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kpybroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kpybroker.protocol.messages.leave_group import LeaveGroupResponse, MemberIdentity
from kpybroker.protocol.messages.list_groups import ListedGroup
from kpybroker.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from kpybroker.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequestGroup,
    OffsetFetchResponseGroup,
)
from kpybroker.protocol.messages.share_group_describe import DescribedShareGroup
from kpybroker.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kpybroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kpybroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

if TYPE_CHECKING:
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.metadata.cluster_metadata import ClusterMetadata
    from kpybroker.share_coordinator.persister import SharePersister
    from kpybroker.topic_admin import TopicManager

R = TypeVar("R")
Event = Callable[[CoordinatorShard, Token], Effects]


class GroupCoordinator:
    """The classic, consumer (KIP-848) and share (KIP-932) group protocols and committed
    offsets, for the request handlers."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        cluster: ClusterMetadata,
        replicas: ReplicaManager,
        topics: TopicManager,
        persister: SharePersister | None = None,
    ) -> None:
        self.settings = settings
        self.cluster = cluster
        self.topics = topics
        self.runtime = CoordinatorRuntime(settings, cluster, replicas, topics)
        #: KIP-932 share groups, which reach the share coordinator through ``persister``.
        self.share = ShareGroupService(self.runtime, replicas, persister)

    async def start(self) -> None:
        await self.runtime.start()

    async def stop(self) -> None:
        await self.runtime.stop()

    async def _call(self, group_id: str, event: Event, on_error: Callable[[ErrorCode], R]) -> R:
        try:
            shard = self.runtime.shard_for(group_id)
            return await self.runtime.call(shard, lambda token: event(shard, token))
        except KafkaError as exc:
            return on_error(exc.code)

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` the coordinator's way (offsets.topic.*), if missing."""
        await self.runtime.ensure_topic()

    def committed_offsets(self) -> Iterator[tuple[str, str, int, int]]:
        """(group, topic, partition, offset) of each offset committed to the groups this
        broker coordinates: what consumer lag is measured from."""
        for shard in list(self.runtime.shards.values()):
            for group_id, topics in shard.offsets.offsets.items():
                for topic, partitions in topics.items():
                    for partition, committed in partitions.items():
                        yield group_id, topic, partition, committed.offset

    # -- FindCoordinator ------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition of ``group_id`` (AddOffsetsToTxn adds it)."""
        return self.runtime.partition_for(group_id)

    async def find_coordinator(self, group_id: str) -> tuple[ErrorCode, int]:
        """(error, broker id) of the leader of the group's partition, creating the topic first."""
        return await self.runtime.coordinator_of(group_id)

    # -- membership -------------------------------------------------------------------

    async def join_group(self, caller: Caller, request: JoinGroupRequest) -> JoinGroupResponse:
        settings = self.settings
        if not request.group_id:
            return join_error(ErrorCode.INVALID_GROUP_ID, request.member_id)
        if not (
            settings.min_session_timeout_ms
            <= request.session_timeout_ms
            <= settings.max_session_timeout_ms
        ):
            return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        return await self._call(
            request.group_id,
            lambda shard, token: shard.join(token, caller, request),
            lambda error: join_error(error, request.member_id),
        )

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        if not request.group_id:
            return SyncGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        return await self._call(
            request.group_id,
            lambda shard, token: shard.sync(token, request),
            lambda error: SyncGroupResponse(error_code=error),
        )

    async def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResponse:
        def on_error(error: ErrorCode) -> HeartbeatResponse:
            # A loading coordinator lost no session yet: Kafka answers blindly.
            if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                error = ErrorCode.NONE
            return HeartbeatResponse(error_code=error)

        if not request.group_id:
            return HeartbeatResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        return await self._call(
            request.group_id, lambda shard, token: shard.heartbeat(token, request), on_error
        )

    async def leave_group(self, group_id: str, members: list[MemberIdentity]) -> LeaveGroupResponse:
        if not group_id:
            return LeaveGroupResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        return await self._call(
            group_id,
            lambda shard, token: shard.leave(token, group_id, members),
            lambda error: LeaveGroupResponse(error_code=error),
        )

    # -- KIP-848 consumer groups -----------------------------------------------------

    async def consumer_group_heartbeat(
        self, caller: Caller, request: ConsumerGroupHeartbeatRequest
    ) -> ConsumerGroupHeartbeatResponse:
        if not request.group_id.strip():
            return heartbeat_error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        return await self._call(
            request.group_id,
            lambda shard, token: shard.consumer_group_heartbeat(token, caller, request),
            heartbeat_error,
        )

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return self._describe_each(
            group_ids,
            CoordinatorShard.describe_consumer_group,
            lambda group_id, code: DescribedConsumerGroup(group_id=group_id, error_code=code),
        )

    # -- KIP-932 share groups (``share_group_service``) --------------------------------

    async def share_group_heartbeat(
        self, caller: Caller, request: ShareGroupHeartbeatRequest
    ) -> ShareGroupHeartbeatResponse:
        return await self.share.heartbeat(caller, request)

    def describe_share_groups(self, group_ids: Iterable[str]) -> list[DescribedShareGroup]:
        return self.share.describe(group_ids)

    async def describe_share_group_offsets(
        self, request: DescribeShareGroupOffsetsRequestGroup
    ) -> DescribeShareGroupOffsetsResponseGroup:
        return await self.share.describe_offsets(request)

    async def alter_share_group_offsets(
        self, group_id: str, topics: list[AlterShareGroupOffsetsRequestTopic]
    ) -> AlterShareGroupOffsetsResponse:
        return await self.share.alter_offsets(group_id, topics)

    async def delete_share_group_offsets(
        self, group_id: str, topic_names: list[str]
    ) -> DeleteShareGroupOffsetsResponse:
        return await self.share.delete_offsets(group_id, topic_names)

    # -- offsets --------------------------------------------------------------------

    async def commit_offsets(
        self, caller: Caller, request: OffsetCommitRequest
    ) -> OffsetCommitResponse:
        return await self._call(
            request.group_id,
            lambda shard, token: shard.commit(token, caller, request),
            lambda error: commit_error_response(request, error),
        )

    def fetch_offsets(self, request: OffsetFetchRequestGroup) -> OffsetFetchResponseGroup:
        """The group's committed offsets; pending transactional ones are not among them."""
        return self._fetch(request, require_stable=False)

    def fetch_stable_offsets(self, request: OffsetFetchRequestGroup) -> OffsetFetchResponseGroup:
        """OffsetFetch with require_stable (v7+): a partition with a pending transactional
        offset answers UNSTABLE_OFFSET_COMMIT, so the consumer retries once it ends."""
        return self._fetch(request, require_stable=True)

    def _fetch(
        self, request: OffsetFetchRequestGroup, require_stable: bool
    ) -> OffsetFetchResponseGroup:
        try:
            shard = self.runtime.shard_for(request.group_id)
        except KafkaError as exc:
            return OffsetFetchResponseGroup(group_id=request.group_id, error_code=exc.code)
        return shard.fetch_offsets(request, require_stable)

    async def delete_offsets(self, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        if not request.group_id:
            return OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID)
        return await self._call(
            request.group_id,
            lambda shard, token: shard.delete_offsets(token, request),
            lambda error: OffsetDeleteResponse(error_code=error),
        )

    # -- transactional offsets ------------------------------------------------------

    async def commit_transactional_offsets(
        self, request: TxnOffsetCommitRequest
    ) -> TxnOffsetCommitResponse:
        """TxnOffsetCommit: the offsets stay pending until the transaction's end marker."""
        if not request.group_id:
            return txn_commit_error_response(request, ErrorCode.INVALID_GROUP_ID)
        return await self._call(
            request.group_id,
            lambda shard, token: shard.commit_transactional(token, request),
            lambda error: txn_commit_error_response(request, error),
        )

    async def complete_transaction(
        self, offsets_partition: int, producer_id: int, producer_epoch: int, committed: bool
    ) -> ErrorCode:
        """The end marker of ``producer_id``'s transaction is in ``offsets_partition``: commit
        or drop its pending offsets there (Kafka's ``completeTransaction``).

        NOT_COORDINATOR if this broker does not hold that partition's shard. The
        log checked ``producer_epoch`` when it wrote the marker; it is not needed here.
        """
        return self.runtime.complete_transaction(offsets_partition, producer_id, committed)

    # -- administration ---------------------------------------------------------------

    def describe_groups(self, group_ids: Iterable[str]) -> list[DescribedGroup]:
        return self._describe_each(
            group_ids,
            CoordinatorShard.describe,
            lambda group_id, code: DescribedGroup(group_id=group_id, error_code=code),
        )

    def _describe_each(
        self,
        group_ids: Iterable[str],
        describe: Callable[[CoordinatorShard, str], R],
        failed: Callable[[str, ErrorCode], R],
    ) -> list[R]:
        """Each group described by its shard, or ``failed`` with the routing error."""
        described = []
        for group_id in group_ids:
            try:
                described.append(describe(self.runtime.shard_for(group_id), group_id))
            except KafkaError as exc:
                described.append(failed(group_id, exc.code))
        return described

    def list_groups(
        self, states: Iterable[str], types: Iterable[str] = ()
    ) -> tuple[ErrorCode, list[ListedGroup]]:
        """Every group of every loaded shard; LOAD_IN_PROGRESS while a partition loads."""
        if not self.runtime.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        states, types = list(states), list(types)
        groups = [
            g for shard in self.runtime.shards.values() for g in shard.list_groups(states, types)
        ]
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.runtime.loading else ErrorCode.NONE
        return error, groups

    async def delete_groups(self, group_ids: list[str]) -> list[DeletableGroupResult]:
        """Delete groups shard by shard; results in the order the groups were named."""
        results: dict[str, DeletableGroupResult] = {}
        by_shard: dict[CoordinatorShard, list[str]] = {}
        for group_id in dict.fromkeys(group_ids):
            try:
                by_shard.setdefault(self.runtime.shard_for(group_id), []).append(group_id)
            except KafkaError as exc:
                results[group_id] = DeletableGroupResult(group_id=group_id, error_code=exc.code)
        for shard, ids in by_shard.items():
            results.update((r.group_id, r) for r in await self._delete_in(shard, ids))
        return [results[g] for g in dict.fromkeys(group_ids)]

    async def _delete_in(
        self, shard: CoordinatorShard, group_ids: list[str]
    ) -> list[DeletableGroupResult]:
        """Share groups' state goes first (Kafka's chained deletion); a share group whose
        state could not be deleted is answered with that error and kept."""
        try:
            failed = await self.share.delete_state_of_groups(shard, group_ids)
            rest = [g for g in group_ids if g not in failed]
            deleted = await self.runtime.call(shard, lambda token: shard.delete_groups(token, rest))
        except KafkaError as exc:
            return [DeletableGroupResult(group_id=g, error_code=exc.code) for g in group_ids]
        refused = [DeletableGroupResult(group_id=g, error_code=e) for g, e in failed.items()]
        return [*refused, *deleted]
