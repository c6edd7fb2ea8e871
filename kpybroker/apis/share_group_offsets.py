"""The share group offset admin APIs (KIP-932): DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92).

A share group's "offset" on a partition is its share-partition start offset,
kept by the share coordinator; ``kafka-share-groups.sh --describe``,
``--reset-offsets`` and ``--delete-offsets`` use these APIs.

DescribeShareGroupOffsets versions: 1 adds each partition's lag (KIP-1226: the
partition's end offset, less the start offset, less the records past it
already delivered; -1 while unknown). A group's ``topics`` null asks for every
partition with share state. Alter and Delete need an empty group
(NON_EMPTY_GROUP); Alter creates the group if needed. All three are flexible.

Served only while share groups are on (``support.features.share_groups_enabled``),
else UNSUPPORTED_VERSION. Authorization, as Kafka's request handler:

- Describe: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group);
  a topic the caller may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED per
  partition (named topics) or left out (all topics).
- Alter: READ on the group, then READ on each topic (TOPIC_AUTHORIZATION_FAILED
  per partition); a topic the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION.
- Delete: DELETE on the group, then READ on each topic (TOPIC_AUTHORIZATION_FAILED,
  answered first).

A group-level error of Alter or Delete (the group's, or the coordinator's) is
answered alone at the top, as Kafka does.
"""

from __future__ import annotations

import asyncio

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.features import share_groups_enabled
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, default_message
from kpybroker.protocol.messages import (
    alter_share_group_offsets,
    delete_share_group_offsets,
    describe_share_group_offsets,
)
from kpybroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponsePartition,
    AlterShareGroupOffsetsResponseTopic,
)
from kpybroker.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponseTopic,
)
from kpybroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsResponseGroup,
    DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
)
from kpybroker.security.acls.model import AclOperation, ResourceType

GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
TOPIC_REFUSED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


@api(describe_share_group_offsets, 0, 1)
async def handle_describe_share_group_offsets(
    ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    groups = await asyncio.gather(*(_describe_group(ctx, g) for g in request.groups))
    return DescribeShareGroupOffsetsResponse(groups=list(groups))


async def _describe_group(
    ctx: RequestContext, request: DescribeShareGroupOffsetsRequestGroup
) -> DescribeShareGroupOffsetsResponseGroup:
    group_id = request.group_id
    if not share_groups_enabled(ctx):
        return DescribeShareGroupOffsetsResponseGroup(
            group_id=group_id, error_code=ErrorCode.UNSUPPORTED_VERSION
        )
    if not ctx.authorize(AclOperation.DESCRIBE, GROUP, group_id):
        return DescribeShareGroupOffsetsResponseGroup(
            group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED
        )
    groups = ctx.services.groups
    if request.topics is None:
        answer = await groups.describe_share_group_offsets(request)
        visible = ctx.authorized_names(
            AclOperation.DESCRIBE, TOPIC, [t.topic_name for t in answer.topics]
        )
        answer.topics = [t for t in answer.topics if t.topic_name in visible]
        return answer
    if not request.topics:
        return DescribeShareGroupOffsetsResponseGroup(group_id=group_id)
    allowed = ctx.authorized_names(
        AclOperation.DESCRIBE, TOPIC, [t.topic_name for t in request.topics]
    )
    asked = DescribeShareGroupOffsetsRequestGroup(
        group_id=group_id, topics=[t for t in request.topics if t.topic_name in allowed]
    )
    answer = await groups.describe_share_group_offsets(asked)
    if answer.error_code:
        return answer
    for topic in request.topics:
        if topic.topic_name not in allowed:
            answer.topics.append(
                DescribeShareGroupOffsetsResponseTopic(
                    topic_name=topic.topic_name,
                    partitions=[
                        DescribeShareGroupOffsetsResponsePartition(
                            partition_index=p,
                            start_offset=-1,
                            error_code=TOPIC_REFUSED,
                            error_message=default_message(TOPIC_REFUSED),
                        )
                        for p in topic.partitions
                    ],
                )
            )
    return answer


@api(alter_share_group_offsets, 0, 0)
async def handle_alter_share_group_offsets(
    ctx: RequestContext, request: AlterShareGroupOffsetsRequest
) -> AlterShareGroupOffsetsResponse:
    if not share_groups_enabled(ctx):
        return _alter_refused(ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorize(AclOperation.READ, GROUP, request.group_id):
        return _alter_refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    cluster = ctx.services.cluster.topics()
    readable = ctx.authorized_names(
        AclOperation.READ, TOPIC, [t.topic_name for t in request.topics]
    )
    refused: list[AlterShareGroupOffsetsResponseTopic] = []
    passed = []
    for topic in request.topics:
        if topic.topic_name not in readable:
            error = TOPIC_REFUSED
        elif topic.topic_name not in cluster:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            passed.append(topic)
            continue
        meta = cluster.get(topic.topic_name)
        answer = AlterShareGroupOffsetsResponseTopic(
            topic_name=topic.topic_name,
            partitions=[
                AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index,
                    error_code=error,
                    error_message=default_message(error),
                )
                for p in topic.partitions
            ],
        )
        if meta is not None:
            answer.topic_id = meta.topic_id.bytes
        refused.append(answer)
    response = await ctx.services.groups.alter_share_group_offsets(request.group_id, passed)
    if response.error_code:
        return AlterShareGroupOffsetsResponse(
            error_code=response.error_code, error_message=response.error_message
        )
    response.responses = _merged(refused + response.responses)
    return response


def _merged(
    topics: list[AlterShareGroupOffsetsResponseTopic],
) -> list[AlterShareGroupOffsetsResponseTopic]:
    """Kafka's ``AlterShareGroupOffsetsResponse.Builder.merge``: one answer per topic name."""
    by_name: dict[str, AlterShareGroupOffsetsResponseTopic] = {}
    for topic in topics:
        kept = by_name.setdefault(topic.topic_name, topic)
        if kept is not topic:
            kept.partitions.extend(topic.partitions)
    return list(by_name.values())


def _alter_refused(error: ErrorCode) -> AlterShareGroupOffsetsResponse:
    return AlterShareGroupOffsetsResponse(error_code=error, error_message=default_message(error))


@api(delete_share_group_offsets, 0, 0)
async def handle_delete_share_group_offsets(
    ctx: RequestContext, request: DeleteShareGroupOffsetsRequest
) -> DeleteShareGroupOffsetsResponse:
    if not share_groups_enabled(ctx):
        return _delete_refused(ErrorCode.UNSUPPORTED_VERSION)
    if not ctx.authorize(AclOperation.DELETE, GROUP, request.group_id):
        return _delete_refused(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    names = [t.topic_name for t in request.topics]
    readable = ctx.authorized_names(AclOperation.READ, TOPIC, names)
    refused = [
        DeleteShareGroupOffsetsResponseTopic(
            topic_name=name, error_code=TOPIC_REFUSED, error_message=default_message(TOPIC_REFUSED)
        )
        for name in names
        if name not in readable
    ]
    response = await ctx.services.groups.delete_share_group_offsets(
        request.group_id, [n for n in names if n in readable]
    )
    if response.error_code:
        return response
    response.responses = refused + response.responses
    return response


def _delete_refused(error: ErrorCode) -> DeleteShareGroupOffsetsResponse:
    return DeleteShareGroupOffsetsResponse(error_code=error, error_message=default_message(error))
