"""Share groups as the API handlers see them: the share half of Kafka's ``GroupCoordinatorService``.

The shard decides (``share_shard``); this part does what needs I/O around it,
as Kafka's service does: it routes each group to its shard, and talks to the
share coordinator through the persister (``SharePersister``):

- after a heartbeat that found partitions without share state, it initializes
  them in the background (the heartbeat is answered at once, as in Kafka 4.4)
  and feeds the outcome back to the shard (``initialized`` or ``uninitialized``);
- DescribeShareGroupOffsets reads each partition's state summary (start offset,
  leader epoch, and for v1 the lag: the partition's end offset, less the start
  offset, less the records past it already delivered);
- AlterShareGroupOffsets initializes the partitions at the given start offsets
  at a new state epoch, DeleteShareGroupOffsets and DeleteGroups delete state,
  each between two shard events.

Persister calls are per partition and run concurrently. A ``persister`` of None
stands for a broker without share coordinator (Kafka's ``NoOpStatePersister``):
initializing and deleting succeed at once and no state can be read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, TypeVar

from kpybroker.coordinator.interface import Caller, Effects, Token
from kpybroker.coordinator.share_group_admin import AlterResult, DeleteOffsetsPlan, alter_error
from kpybroker.coordinator.share_group_protocol import (
    ShareHeartbeatResult,
    heartbeat_error,
    validate_heartbeat,
)
from kpybroker.coordinator.share_group_state import ShareInitialization
from kpybroker.protocol.errors import ErrorCode, KafkaError, default_message
from kpybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequestTopic,
    AlterShareGroupOffsetsResponse,
)
from kpybroker.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from kpybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from kpybroker.protocol.messages.share_group_describe import DescribedShareGroup
from kpybroker.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kpybroker.share_coordinator.persister import (
    UNINITIALIZED_START_OFFSET,
    PartitionState,
    ShareKey,
    SharePersister,
)

if TYPE_CHECKING:
    from kpybroker.cluster.replica_manager import ReplicaManager
    from kpybroker.coordinator.runtime import CoordinatorRuntime
    from kpybroker.coordinator.shard import CoordinatorShard

log = logging.getLogger(__name__)

R = TypeVar("R")
#: Kafka's ``PartitionFactory.DEFAULT_LEADER_EPOCH`` and ``UNINITIALIZED_LAG``.
DEFAULT_LEADER_EPOCH = 0
UNINITIALIZED_LAG = -1
#: The leader epoch a summary read carries (ReadShareGroupStateSummary's default).
SUMMARY_LEADER_EPOCH = 0

Partitions = Mapping[bytes, Iterable[int]]


class ShareGroupService:
    """The share group requests of the group coordinator, routed and carried out."""

    def __init__(
        self,
        runtime: CoordinatorRuntime,
        replicas: ReplicaManager,
        persister: SharePersister | None = None,
    ) -> None:
        self.runtime = runtime
        self.replicas = replicas
        self.persister = persister

    async def _call(
        self,
        group_id: str,
        event: Callable[[CoordinatorShard, Token], Effects],
        on_error: Callable[[ErrorCode], R],
    ) -> R:
        try:
            shard = self.runtime.shard_for(group_id)
            return await self.runtime.call(shard, lambda token: event(shard, token))
        except KafkaError as exc:
            return on_error(exc.code)

    # -- ShareGroupHeartbeat and ShareGroupDescribe ------------------------------------

    async def heartbeat(
        self, caller: Caller, request: ShareGroupHeartbeatRequest
    ) -> ShareGroupHeartbeatResponse:
        try:
            validate_heartbeat(request)
        except KafkaError as exc:
            return heartbeat_error(exc.code, exc.message)
        result: ShareHeartbeatResult = await self._call(
            request.group_id,
            lambda shard, token: shard.share.heartbeat(token, caller, request),
            lambda error: ShareHeartbeatResult(heartbeat_error(error)),
        )
        if result.initialize is not None:
            self.runtime.start_task(self.initialize(result.initialize))
        return result.response

    def describe(self, group_ids: Iterable[str]) -> list[DescribedShareGroup]:
        described = []
        for group_id in group_ids:
            if not group_id:
                described.append(
                    DescribedShareGroup(group_id="", error_code=ErrorCode.INVALID_GROUP_ID)
                )
                continue
            try:
                described.append(self.runtime.shard_for(group_id).share.describe(group_id))
            except KafkaError as exc:
                described.append(DescribedShareGroup(group_id=group_id, error_code=exc.code))
        return described

    # -- share-state initialization ------------------------------------------------------

    async def initialize(self, plan: ShareInitialization) -> dict[tuple[bytes, int], ErrorCode]:
        """Initialize the plan's partitions, then tell the shard: all initialized, or (any
        error, as Kafka does) none of them, so that a later heartbeat asks again."""
        errors = await self._initialize_state(plan)
        failed = any(errors.values())
        if failed:
            log.error("Unable to initialize share group state for %s: %s", plan.group_id, errors)
        partitions = plan.partitions()

        def event(shard: CoordinatorShard, token: Token) -> Effects:
            if failed:
                return shard.share.uninitialized(token, plan.group_id, partitions)
            return shard.share.initialized(token, plan.group_id, partitions)

        outcome = await self._call(plan.group_id, event, lambda error: error)
        if outcome:
            log.warning(
                "share state metadata of group %s not updated: %s", plan.group_id, outcome.name
            )
        return errors

    async def _initialize_state(
        self, plan: ShareInitialization
    ) -> dict[tuple[bytes, int], ErrorCode]:
        keys = [
            (ShareKey(plan.group_id, topic_id, partition), start)
            for topic_id, offsets in plan.start_offsets.items()
            for partition, start in offsets.items()
        ]
        persister = self.persister
        if persister is None:
            return {(k.topic_id, k.partition): ErrorCode.NONE for k, _ in keys}
        codes = await _gather(persister.initialize(k, plan.state_epoch, start) for k, start in keys)
        return {(k.topic_id, k.partition): code for (k, _), code in zip(keys, codes, strict=True)}

    # -- DescribeShareGroupOffsets -------------------------------------------------------

    async def describe_offsets(
        self, request: DescribeShareGroupOffsetsRequestGroup
    ) -> DescribeShareGroupOffsetsResponseGroup:
        """One group's start offsets (and lag): of the topics named, or (topics null) of
        every partition with share state."""
        group_id = request.group_id
        if not self.runtime.active:
            return _describe_error(group_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        wanted: list[tuple[str, bytes, list[int]]] = []
        absent: list[DescribeShareGroupOffsetsResponseTopic] = []
        images = self.runtime.topics_image
        if request.topics is None:
            try:
                initialized = self.runtime.shard_for(group_id).share.initialized_partitions(
                    group_id
                )
            except KafkaError as exc:
                return _describe_error(group_id, exc.code)
            for topic_id, partitions in initialized.items():
                image = images.by_id(topic_id)
                if image is not None:
                    wanted.append((image.name, topic_id, sorted(partitions)))
        else:
            for topic in request.topics:
                image = images.by_name(topic.topic_name)
                if image is None:
                    # No such topic: no offsets, which is not an error (as OffsetFetch).
                    absent.append(_absent_topic(topic.topic_name, topic.partitions))
                else:
                    wanted.append((topic.topic_name, image.topic_id, list(topic.partitions)))
        try:
            topics = await self._summaries(group_id, wanted)
        except Exception as exc:  # a persister failure fails the group, as in Kafka
            log.exception("reading the share state summary of %s failed", group_id)
            return _describe_error(group_id, ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
        return DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=topics + absent)

    async def _summaries(
        self, group_id: str, wanted: list[tuple[str, bytes, list[int]]]
    ) -> list[DescribeShareGroupOffsetsResponseTopic]:
        keys = [ShareKey(group_id, topic_id, p) for _, topic_id, ps in wanted for p in ps]
        summaries = iter(await _gather(self._summary(k) for k in keys))
        topics = []
        for name, topic_id, partitions in wanted:
            answers = [self._described(name, p, *next(summaries)) for p in partitions]
            topics.append(
                DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=topic_id, partitions=answers
                )
            )
        return topics

    async def _summary(self, key: ShareKey) -> tuple[ErrorCode, PartitionState | None]:
        if self.persister is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        return await self.persister.read_summary(key, SUMMARY_LEADER_EPOCH)

    def _described(
        self, topic: str, partition: int, error: ErrorCode, state: PartitionState | None
    ) -> DescribeShareGroupOffsetsResponsePartition:
        """A partition without state has start offset -1 (no error); the lag is known once
        the start offset and the delivered count are (``shouldComputeSharePartitionLag``)."""
        answer = DescribeShareGroupOffsetsResponsePartition(
            partition_index=partition,
            start_offset=UNINITIALIZED_START_OFFSET,
            leader_epoch=DEFAULT_LEADER_EPOCH,
            lag=UNINITIALIZED_LAG,
        )
        if error or state is None:
            return answer
        answer.start_offset, answer.leader_epoch = state.start_offset, state.leader_epoch
        if state.start_offset != UNINITIALIZED_START_OFFSET and state.delivery_complete_count >= 0:
            end = self._end_offset(topic, partition)
            if end is not None:
                answer.lag = end - state.start_offset - state.delivery_complete_count
        return answer

    def _end_offset(self, topic: str, partition: int) -> int | None:
        """The partition's end offset for a read_uncommitted reader (the high watermark), when
        this broker leads it; Kafka asks the leader elsewhere, kpybroker leaves the lag
        unknown (-1) then."""
        try:
            return self.replicas.partition_for(topic, partition).high_watermark
        except KafkaError:
            return None

    # -- AlterShareGroupOffsets ------------------------------------------------------------

    async def alter_offsets(
        self, group_id: str, topics: list[AlterShareGroupOffsetsRequestTopic]
    ) -> AlterShareGroupOffsetsResponse:
        if not self.runtime.active:
            return alter_error(KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        if not group_id:
            return alter_error(KafkaError(ErrorCode.INVALID_GROUP_ID))
        result: AlterResult = await self._call(
            group_id,
            lambda shard, token: shard.share.alter_offsets(token, group_id, topics),
            lambda error: AlterResult(alter_error(KafkaError(error))),
        )
        plan = result.initialize
        if plan is None or not plan.start_offsets:
            return result.response
        errors = await self._initialize_state(plan)
        if not any(errors.values()):
            await self._call(
                group_id,
                lambda shard, token: shard.share.initialized(token, group_id, plan.partitions()),
                lambda error: error,
            )
            return result.response
        # Kafka's buildErrorResponse: each partition the persister refused gets its error;
        # the partitions stay initializing (the request failed, nothing is undone).
        for topic in result.response.responses:
            for p in topic.partitions:
                error = errors.get((topic.topic_id, p.partition_index), ErrorCode.NONE)
                if not p.error_code and error:
                    p.error_code, p.error_message = error, default_message(error)
        return result.response

    # -- DeleteShareGroupOffsets -----------------------------------------------------------

    async def delete_offsets(
        self, group_id: str, topic_names: list[str]
    ) -> DeleteShareGroupOffsetsResponse:
        if not self.runtime.active:
            return _delete_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group_id:
            return _delete_error(ErrorCode.INVALID_GROUP_ID)
        plan: DeleteOffsetsPlan = await self._call(
            group_id,
            lambda shard, token: shard.share.initiate_delete_offsets(token, group_id, topic_names),
            DeleteOffsetsPlan,
        )
        if plan.error_code:
            return _delete_error(plan.error_code, plan.error_message)
        errors = list(plan.errors)
        if not plan.delete:
            return DeleteShareGroupOffsetsResponse(responses=errors)
        outcome = await self._delete_state(group_id, plan.delete)
        deleted = []
        for topic_id, error in outcome.items():
            image = self.runtime.topics_image.by_id(topic_id)
            answer = DeleteShareGroupOffsetsResponseTopic(
                topic_name="" if image is None else image.name, topic_id=topic_id
            )
            if error:
                answer.error_code, answer.error_message = error, default_message(error)
                errors.append(answer)
            else:
                deleted.append(answer)
        if deleted:
            done = [t.topic_id for t in deleted]
            error = await self._call(
                group_id,
                lambda shard, token: shard.share.complete_delete_offsets(token, group_id, done),
                lambda error: error,
            )
            if error:
                return _delete_error(error)
        return DeleteShareGroupOffsetsResponse(responses=deleted + errors)

    async def _delete_state(self, group_id: str, partitions: Partitions) -> dict[bytes, ErrorCode]:
        """Delete the partitions' state; per topic, the first error of its partitions."""
        keys = [ShareKey(group_id, t, p) for t, ps in partitions.items() for p in sorted(ps)]
        persister = self.persister
        if persister is None:
            return dict.fromkeys(partitions, ErrorCode.NONE)
        codes = await _gather(persister.delete(k) for k in keys)
        outcome = dict.fromkeys(partitions, ErrorCode.NONE)
        for key, code in zip(keys, codes, strict=True):
            if code and not outcome[key.topic_id]:
                outcome[key.topic_id] = code
        return outcome

    # -- DeleteGroups ------------------------------------------------------------------------

    async def delete_state_of_groups(
        self, shard: CoordinatorShard, group_ids: list[str]
    ) -> dict[str, ErrorCode]:
        """DeleteGroups' first step (Kafka's ``deleteShareGroups``): the share state of the
        empty share groups among ``group_ids`` is deleted; the groups that must not go on to
        the usual deletion, with their error (NON_EMPTY_GROUP, or the persister's)."""
        plans: dict[str, tuple[ErrorCode, Partitions]] = await self.runtime.call(
            shard, lambda token: shard.share.delete_groups_plan(token, group_ids)
        )
        failed = {g: code for g, (code, _) in plans.items() if code}
        for group_id, (code, partitions) in plans.items():
            if not code:
                outcome = await self._delete_state(group_id, partitions)
                error = next((e for e in outcome.values() if e), ErrorCode.NONE)
                if error:
                    log.error("Error deleting share group %s due to error %s", group_id, error)
                    failed[group_id] = error
        return failed


async def _gather(calls: Iterable[Awaitable[R]]) -> list[R]:
    return list(await asyncio.gather(*calls))


def _describe_error(
    group_id: str, error: ErrorCode, message: str | None = None
) -> DescribeShareGroupOffsetsResponseGroup:
    return DescribeShareGroupOffsetsResponseGroup(
        group_id=group_id, error_code=error, error_message=message or default_message(error)
    )


def _absent_topic(name: str, partitions: Iterable[int]) -> DescribeShareGroupOffsetsResponseTopic:
    return DescribeShareGroupOffsetsResponseTopic(
        topic_name=name,
        partitions=[
            DescribeShareGroupOffsetsResponsePartition(
                partition_index=p, start_offset=UNINITIALIZED_START_OFFSET
            )
            for p in partitions
        ],
    )


def _delete_error(error: ErrorCode, message: str | None = None) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(
        error_code=error, error_message=message or default_message(error)
    )
