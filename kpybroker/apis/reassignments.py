"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46).

AlterPartitionReassignments versions: 0 is flexible; 1 lets the request forbid
changing a partition's replica count (INVALID_REPLICATION_FACTOR). Null
replicas cancel a partition's move. As in Kafka's ZooKeeper mode the
controller decides (admin clients send this to the controller named in
Metadata); another broker answers NOT_CONTROLLER. The answer comes once the
moves have started; they complete in the background (``kpybroker.cluster``).

ListPartitionReassignments version 0 is flexible: the moves in progress, of every
partition (null topics) or of those asked for, with their replicas and the
replicas being added and removed. Every broker answers it from its metadata cache.

Altering needs ALTER on the cluster, listing DESCRIBE; a refusal, checked first as
Kafka's controller does, is CLUSTER_AUTHORIZATION_FAILED with the "needs ... permission"
message at the top and on every partition asked for (listing echoes the partitions'
indexes only).
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.cluster.controller import NotControllerError
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import alter_partition_reassignments, list_partition_reassignments
from kpybroker.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kpybroker.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kpybroker.security.acls.model import AclOperation

REFUSED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@api(alter_partition_reassignments, 0, 1)
async def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return refused_alter(ctx, request)
    response = AlterPartitionReassignmentsResponse(
        allow_replication_factor_change=request.allow_replication_factor_change,
        error_message=None,
    )
    targets = {
        (topic.name, p.partition_index): p.replicas
        for topic in request.topics
        for p in topic.partitions
    }
    try:
        outcomes = await ctx.services.controller.reassign(
            targets, request.allow_replication_factor_change
        )
    except NotControllerError as exc:
        response.error_code, response.error_message = exc.code, exc.message
        return response
    by_topic: dict[str, list[ReassignablePartitionResponse]] = {}
    for (topic, partition), error in outcomes.items():
        result = ReassignablePartitionResponse(partition_index=partition, error_message=None)
        if error is not None:
            result.error_code, result.error_message = error.code, error.message
        by_topic.setdefault(topic, []).append(result)
    response.responses = [
        ReassignableTopicResponse(name=topic, partitions=results)
        for topic, results in by_topic.items()
    ]
    return response


def refused_alter(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    """Kafka's ``getErrorResponse`` (which leaves allow_replication_factor_change true)."""
    message = ctx.cluster_denial_message(AclOperation.ALTER)
    return AlterPartitionReassignmentsResponse(
        error_code=REFUSED,
        error_message=message,
        responses=[
            ReassignableTopicResponse(
                name=topic.name,
                partitions=[
                    ReassignablePartitionResponse(
                        partition_index=p.partition_index, error_code=REFUSED, error_message=message
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


@api(list_partition_reassignments, 0, 0)
async def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return refused_list(ctx, request)
    topics = ctx.services.cluster.topics()
    if request.topics is None:
        wanted = {name: None for name in sorted(topics)}
    else:
        wanted = {t.name: set(t.partition_indexes) for t in request.topics}
    listed = []
    for name, partitions in wanted.items():
        meta = topics.get(name)
        if meta is None:
            continue
        ongoing = [
            OngoingPartitionReassignment(
                partition_index=pm.partition,
                replicas=list(pm.replicas),
                adding_replicas=list(pm.adding),
                removing_replicas=list(pm.removing),
            )
            for index, pm in sorted(meta.partitions.items())
            if pm.reassigning and (partitions is None or index in partitions)
        ]
        if ongoing:
            listed.append(OngoingTopicReassignment(name=name, partitions=ongoing))
    return ListPartitionReassignmentsResponse(error_message=None, topics=listed)


def refused_list(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    """Kafka's ``getErrorResponse``: the topics asked for, their partitions by index only."""
    return ListPartitionReassignmentsResponse(
        error_code=REFUSED,
        error_message=ctx.cluster_denial_message(AclOperation.DESCRIBE),
        topics=[
            OngoingTopicReassignment(
                name=t.name,
                partitions=[
                    OngoingPartitionReassignment(partition_index=p) for p in t.partition_indexes
                ],
            )
            for t in request.topics or ()
        ],
    )
