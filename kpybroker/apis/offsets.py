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

Authorization, as Kafka's request handler, before any existence check:
OffsetCommit needs READ on the group (every partition asked for is otherwise
GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED for
its partitions); OffsetDelete DELETE on the group (a top-level error) and
READ on each topic. OffsetFetch needs DESCRIBE on each group (its group
error; v1, which has none, puts it on every partition asked for) and on each
topic: a refused topic asked for is answered TOPIC_AUTHORIZATION_FAILED after
the coordinator's topics, one the principal may not see is left out of an
all-topics answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kpybroker.apis.groups import caller_of
from kpybroker.apis.support.authorization import may_read_group
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.coordinator.committed_offsets import PartitionErrors, commit_error_response
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
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)
from kpybroker.security.acls.model import AclOperation, ResourceType

if TYPE_CHECKING:
    from collections.abc import Callable

GROUPED_FETCH_FROM = 8
FETCH_TOP_LEVEL_ERROR_FROM = 2


def answer_refused_and_unknown(ctx: RequestContext, request: Any, answers: PartitionErrors) -> None:
    """Answer the request's partitions of topics the principal may not READ, then those that
    do not exist; leave only the others in it (Kafka checks in this order, so a refused
    principal does not learn which topics exist)."""
    readable = ctx.authorized_names(
        AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    known = []
    for topic in request.topics:
        if topic.name not in readable:
            answers.add_all([topic], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        meta = ctx.services.topics.get(topic.name)
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
    if not may_read_group(ctx, request.group_id):
        return commit_error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    answers = PartitionErrors(OffsetCommitResponseTopic, OffsetCommitResponsePartition)
    answer_refused_and_unknown(ctx, request, answers)
    if request.topics:
        response = await ctx.services.groups.commit_offsets(caller_of(ctx), request)
        answers.merge(response.topics)
    return OffsetCommitResponse(topics=answers.result())


@api(offset_delete, 0, 0)
async def handle_offset_delete(
    ctx: RequestContext, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    answers = PartitionErrors(OffsetDeleteResponseTopic, OffsetDeleteResponsePartition)
    answer_refused_and_unknown(ctx, request, answers)
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
        return OffsetFetchResponse(groups=[fetch_group(ctx, fetch, g) for g in request.groups])
    # v1-7 topics have the same fields (name, partition_indexes) as v8+ ones.
    group = OffsetFetchRequestGroup(group_id=request.group_id, topics=request.topics)
    return single_group_response(ctx.api_version, request, fetch_group(ctx, fetch, group))


def fetch_group(
    ctx: RequestContext,
    fetch: Callable[[OffsetFetchRequestGroup], OffsetFetchResponseGroup],
    group: OffsetFetchRequestGroup,
) -> OffsetFetchResponseGroup:
    """One group's committed offsets, as far as the principal may DESCRIBE the group and
    each topic (Kafka's ``fetchAllOffsetsForGroup`` and ``fetchOffsetsForGroup``)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
        return OffsetFetchResponseGroup(
            group_id=group.group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    if group.topics is None:
        answer = fetch(group)
        if not answer.error_code:
            visible = ctx.authorized_names(
                AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in answer.topics)
            )
            answer.topics = [t for t in answer.topics if t.name in visible]
        return answer
    describable = ctx.authorized_names(
        AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in group.topics)
    )
    asked = OffsetFetchRequestGroup(
        group_id=group.group_id,
        member_id=group.member_id,
        member_epoch=group.member_epoch,
        topics=[t for t in group.topics if t.name in describable],
    )
    answer = fetch(asked)
    if not answer.error_code:
        answer.topics = [*answer.topics, *refused_topics(group, describable)]
    return answer


def refused_topics(
    group: OffsetFetchRequestGroup, describable: set[str]
) -> list[OffsetFetchResponseTopics]:
    """The answers to the topics asked for that the principal may not DESCRIBE."""
    return [
        OffsetFetchResponseTopics(
            name=t.name,
            partitions=[
                OffsetFetchResponsePartitions(
                    partition_index=i,
                    committed_offset=-1,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                )
                for i in t.partition_indexes
            ],
        )
        for t in group.topics
        if t.name not in describable
    ]


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
