"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47).

OffsetCommit versions: 0 (ZooKeeper storage) and 1 (per-partition commit
timestamp) are gone in Kafka 4; 2 adds a retention time (until v4: an
explicit one is stored with an expire timestamp, value v1); 3 throttle time;
5 drops the retention time; 6 adds the committed leader epoch; 7 group.
instance.id; 8 is flexible; 9 answers GROUP_ID_NOT_FOUND (not
ILLEGAL_GENERATION) when a member commits to a group that does not exist.

OffsetFetch versions: 0 (ZooKeeper) is gone in Kafka 4; 2 lets topics be
null (every committed offset) and adds a top-level error; 3 throttle time;
5 returns leader epochs; 6 is flexible; 7 adds require_stable: a partition
with a pending transactional offset (TxnOffsetCommit, before its transaction
ends) then answers UNSTABLE_OFFSET_COMMIT and offset -1, so that a
read_committed consumer waits for it (without it the last committed offset
is answered); 8 fetches several groups at once, each with its own error;
9 adds the KIP-848 member ID and epoch, which classic groups ignore. A
partition without a commit answers offset -1 and metadata "".

OffsetDelete has one version. Only offsets of topics the group does not
consume can be deleted (GROUP_SUBSCRIBED_TO_TOPIC otherwise), all of them
while the group is Empty.

As in Kafka's request handler, partitions of unknown topics are answered
UNKNOWN_TOPIC_OR_PARTITION here and never reach the coordinator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kpybroker.apis.groups import caller_of
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.coordinator.committed_offsets import PartitionErrors
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import offset_commit, offset_delete, offset_fetch
from kpybroker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kpybroker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
)
from kpybroker.protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchResponse,
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)

if TYPE_CHECKING:
    from kpybroker.apis.support.context import Services

GROUPED_FETCH_FROM = 8
FETCH_TOP_LEVEL_ERROR_FROM = 2


def answer_unknown(services: Services, request: Any, answers: PartitionErrors) -> None:
    """Answer the request's partitions that do not exist; leave only the others in it."""
    known = []
    for topic in request.topics:
        meta = services.topics.get(topic.name)
        existing = meta.partitions if meta is not None else {}
        for p in topic.partitions:
            if p.partition_index not in existing:
                answers.add(topic.name, p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        topic.partitions = [p for p in topic.partitions if p.partition_index in existing]
        if topic.partitions:
            known.append(topic)
    request.topics = known


@api(offset_commit, 2, 9)
async def handle_offset_commit(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    answers = PartitionErrors(OffsetCommitResponseTopic, OffsetCommitResponsePartition)
    answer_unknown(ctx.services, request, answers)
    if request.topics:
        response = await ctx.services.groups.commit_offsets(caller_of(ctx), request)
        answers.merge(response.topics)
    return OffsetCommitResponse(topics=answers.result())


@api(offset_delete, 0, 0)
async def handle_offset_delete(
    ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    answers = PartitionErrors(OffsetDeleteResponseTopic, OffsetDeleteResponsePartition)
    answer_unknown(ctx.services, request, answers)
    # Called even with no partition left: the group's own errors still apply.
    response = await ctx.services.groups.delete_offsets(request)
    if response.error_code:
        return response
    answers.merge(response.topics)
    return OffsetDeleteResponse(topics=answers.result())


@api(offset_fetch, 1, 9)
async def handle_offset_fetch(
    ctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    groups = ctx.services.groups
    # Before v7 require_stable decodes as False.
    fetch = groups.fetch_stable_offsets if request.require_stable else groups.fetch_offsets
    if ctx.api_version >= GROUPED_FETCH_FROM:
        return OffsetFetchResponse(groups=[fetch(g) for g in request.groups])
    # v1-7 topics have the same fields (name, partition_indexes) as v8+ ones.
    group = OffsetFetchRequestGroup(group_id=request.group_id, topics=request.topics)
    return single_group_response(ctx.api_version, request, fetch(group))


def single_group_response(
    version: int, request: OffsetFetchRequest, group: OffsetFetchResponseGroup
) -> OffsetFetchResponse:
    """The v1-7 shape of one group's answer.

    v1 has no top-level error, so a group error is given to every partition
    asked for (as Kafka's older coordinator did) rather than dropped.
    """
    if group.error_code and version < FETCH_TOP_LEVEL_ERROR_FROM:
        topics = [
            OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    OffsetFetchResponsePartition(
                        partition_index=i, committed_offset=-1, error_code=group.error_code
                    )
                    for i in t.partition_indexes
                ],
            )
            for t in request.topics
        ]
        return OffsetFetchResponse(topics=topics)
    topics = [
        OffsetFetchResponseTopic(
            name=t.name,
            partitions=[
                OffsetFetchResponsePartition(
                    partition_index=p.partition_index,
                    committed_offset=p.committed_offset,
                    committed_leader_epoch=p.committed_leader_epoch,
                    metadata=p.metadata,
                    error_code=p.error_code,
                )
                for p in t.partitions
            ],
        )
        for t in group.topics
    ]
    return OffsetFetchResponse(topics=topics, error_code=group.error_code)
