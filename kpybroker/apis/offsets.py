"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47).

OffsetCommit versions: 0 (ZooKeeper storage) and 1 (per-partition commit
timestamp) are gone in Kafka 4; 2 adds a retention time (until v4: an
explicit one is stored with an expire timestamp, value v1); 3 throttle time;
5 drops the retention time; 6 adds the committed leader epoch; 7 group.
instance.id; 8 is flexible; 9 answers GROUP_ID_NOT_FOUND (not
ILLEGAL_GENERATION) when a member commits to a group that does not exist;
10 names topics by ID instead of name, in the request and the answer, and
answers UNKNOWN_TOPIC_ID for the partitions of an ID the metadata does not
have.

OffsetFetch versions: 0 (ZooKeeper) is gone in Kafka 4; 2 lets topics be
null (every committed offset) and adds a top-level error; 3 throttle time;
5 returns leader epochs; 6 is flexible; 7 adds require_stable: a partition
with a pending transactional offset (TxnOffsetCommit, before its transaction
ends) then answers UNSTABLE_OFFSET_COMMIT and offset -1, so that a
read_committed consumer waits for it (without it the last committed offset
is answered); 8 fetches several groups at once, each with its own error;
9 adds the KIP-848 member ID and epoch, which classic groups ignore; 10
names topics by ID instead of name: a topic of unknown ID asked for is
answered UNKNOWN_TOPIC_ID (offset -1), and an all-topics answer leaves out
topics the metadata no longer has (it could not name them). A partition
without a commit answers offset -1 and metadata "".

OffsetDelete has one version. Only offsets of topics the group does not
consume can be deleted (GROUP_SUBSCRIBED_TO_TOPIC otherwise), all of them
while the group is Empty.

As in Kafka's request handler, partitions of unknown topics are answered
UNKNOWN_TOPIC_OR_PARTITION here and never reach the coordinator. Topics named
by ID (v10) are given their names here, before any other check, and the
coordinator sees names only.

Authorization, as Kafka's request handler, before any existence check:
OffsetCommit needs READ on the group (every partition asked for is otherwise
GROUP_AUTHORIZATION_FAILED) and on each topic (TOPIC_AUTHORIZATION_FAILED for
its partitions); OffsetDelete DELETE on the group (a top-level error) and
READ on each topic. OffsetFetch needs DESCRIBE on each group (its group
error; v1, which has none, puts it on every partition asked for) and on each
topic: a refused topic asked for is answered TOPIC_AUTHORIZATION_FAILED after
the coordinator's topics, one the principal may not see is left out of an
all-topics answer. An unknown topic ID (v10) is answered UNKNOWN_TOPIC_ID
whatever the principal may do, as Kafka does: it is checked before the topic
ACLs, which are asked by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kpybroker.apis.groups import caller_of
from kpybroker.apis.support.authorization import may_read_group
from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.coordinator.committed_offsets import (
    PartitionErrors,
    commit_error_response,
    topic_id_of,
)
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
    from collections.abc import Callable, Iterable

GROUPED_FETCH_FROM = 8
FETCH_TOP_LEVEL_ERROR_FROM = 2
TOPIC_IDS_FROM = 10


def name_topics_by_id(ctx: RequestContext, topics: Iterable[Any]) -> None:
    """Give each topic of a v10 request the name the metadata has for its ID, "" for an
    unknown ID (Kafka's handlers name them so before any other check)."""
    for topic in topics:
        found = ctx.services.topics.by_id(topic.topic_id)
        topic.name = "" if found is None else found.name


def answer_refused_and_unknown(
    ctx: RequestContext, request: Any, answers: PartitionErrors, *, by_id: bool = False
) -> None:
    """Answer the request's partitions of topics the principal may not READ, then those that
    do not exist; leave only the others in it (Kafka checks in this order, so a refused
    principal does not learn which topics exist). With ``by_id`` (topics named by ID) a
    topic of unknown ID is answered UNKNOWN_TOPIC_ID first, before any authorization."""
    if by_id:
        name_topics_by_id(ctx, request.topics)
    readable = ctx.authorized_names(
        AclOperation.READ,
        ResourceType.TOPIC,
        (t.name for t in request.topics if t.name or not by_id),
    )
    known = []
    for topic in request.topics:
        if by_id and not topic.name:
            answers.add_all([topic], ErrorCode.UNKNOWN_TOPIC_ID)
            continue
        if topic.name not in readable:
            answers.add_all([topic], ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            continue
        meta = ctx.services.topics.get(topic.name)
        existing = meta.partitions if meta is not None else {}
        for p in topic.partitions:
            if p.partition_index not in existing:
                answers.add(
                    topic.name,
                    p.partition_index,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    topic_id_of(topic),
                )
        topic.partitions = [p for p in topic.partitions if p.partition_index in existing]
        if topic.partitions:
            known.append(topic)
    request.topics = known


@api(offset_commit, 2, 10)
async def handle_offset_commit(
    ctx: RequestContext, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    by_id = ctx.api_version >= TOPIC_IDS_FROM
    if not may_read_group(ctx, request.group_id):
        return commit_error_response(request, ErrorCode.GROUP_AUTHORIZATION_FAILED, by_id=by_id)
    answers = PartitionErrors(OffsetCommitResponseTopic, OffsetCommitResponsePartition, by_id=by_id)
    answer_refused_and_unknown(ctx, request, answers, by_id=by_id)
    if request.topics:
        # The coordinator answers each topic with the name and ID it was given.
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


@api(offset_fetch, 1, 10)
async def handle_offset_fetch(
    ctx: RequestContext, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    groups = ctx.services.groups
    # Before v7 require_stable decodes as False.
    fetch = groups.fetch_stable_offsets if request.require_stable else groups.fetch_offsets
    if ctx.api_version >= GROUPED_FETCH_FROM:
        by_id = ctx.api_version >= TOPIC_IDS_FROM
        return OffsetFetchResponse(
            groups=[fetch_group(ctx, fetch, g, by_id=by_id) for g in request.groups]
        )
    # v1-7 topics have the same fields (name, partition_indexes) as v8+ ones.
    group = OffsetFetchRequestGroup(group_id=request.group_id, topics=request.topics)
    return single_group_response(ctx.api_version, request, fetch_group(ctx, fetch, group))


def fetch_group(
    ctx: RequestContext,
    fetch: Callable[[OffsetFetchRequestGroup], OffsetFetchResponseGroup],
    group: OffsetFetchRequestGroup,
    *,
    by_id: bool = False,
) -> OffsetFetchResponseGroup:
    """One group's committed offsets, as far as the principal may DESCRIBE the group and
    each topic (Kafka's ``fetchAllOffsetsForGroup`` and ``fetchOffsetsForGroup``).

    With ``by_id`` (v10) topics are named by ID: one of unknown ID asked for is answered
    UNKNOWN_TOPIC_ID, before any authorization, among the refused topics; an all-topics
    answer gives each topic its ID and leaves out those the metadata no longer has.
    """
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
            if by_id:
                answer.topics = with_topic_ids(ctx, answer.topics)
        return answer
    if by_id:
        name_topics_by_id(ctx, group.topics)
    named = [t for t in group.topics if t.name or not by_id]
    describable = ctx.authorized_names(
        AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in named)
    )
    asked = OffsetFetchRequestGroup(
        group_id=group.group_id,
        member_id=group.member_id,
        member_epoch=group.member_epoch,
        topics=[t for t in named if t.name in describable],
    )
    answer = fetch(asked)
    if not answer.error_code:
        if by_id:
            ids = {t.name: t.topic_id for t in asked.topics}
            for t in answer.topics:
                t.topic_id = ids[t.name]
        answer.topics = [*answer.topics, *refused_topics(group, describable, by_id=by_id)]
    return answer


def with_topic_ids(
    ctx: RequestContext, topics: list[OffsetFetchResponseTopics]
) -> list[OffsetFetchResponseTopics]:
    """The topics the metadata knows, each given its ID (a v10 answer cannot name the
    others: Kafka leaves them out)."""
    kept = []
    for topic in topics:
        found = ctx.services.topics.get(topic.name)
        if found is not None:
            topic.topic_id = found.topic_id
            kept.append(topic)
    return kept


def refused_topics(
    group: OffsetFetchRequestGroup, describable: set[str], *, by_id: bool = False
) -> list[OffsetFetchResponseTopics]:
    """The answers to the topics asked for that are not fetched, in request order: those of
    unknown ID (``by_id``) and those the principal may not DESCRIBE."""
    refused = []
    for t in group.topics:
        if by_id and not t.name:
            error = ErrorCode.UNKNOWN_TOPIC_ID
        elif t.name not in describable:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        else:
            continue
        refused.append(
            OffsetFetchResponseTopics(
                name=t.name,
                topic_id=topic_id_of(t),
                partitions=[
                    OffsetFetchResponsePartitions(
                        partition_index=i, committed_offset=-1, error_code=error
                    )
                    for i in t.partition_indexes
                ],
            )
        )
    return refused


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
