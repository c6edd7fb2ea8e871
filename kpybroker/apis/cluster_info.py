"""DescribeCluster (key 60) and DescribeTopicPartitions (key 75): the Admin client's
newer ways of asking what Metadata answers.

DescribeCluster versions: 0 is flexible and gives the cluster id, the controller and
the brokers on the listener the request came in on; 1 adds the endpoint type (a
broker answers for brokers only, as in Kafka: controllers have their own endpoint);
2 (KIP-1073) lets the client ask for fenced brokers too, and marks each broker
fenced or not. Kafka's fenced brokers are registered brokers the controller does not
let lead (they stopped heartbeating, or are starting); kpybroker's registrations are
ephemeral, so a broker that is not live is not registered at all: every broker
listed is unfenced, and asking for fenced brokers adds none.

DescribeTopicPartitions version 0 is flexible. Topics come in name order, and one
answer holds at most ``response_partition_limit`` partitions (capped by
``max.request.partition.size.limit``); ``next_cursor`` says where the next page starts.
An empty topic list means every topic; topics that do not exist are then left out
rather than reported.

Authorization as Kafka 4's: DescribeCluster checks nothing but, when asked for the
cluster's authorized operations, reports them only to a principal allowed DESCRIBE on
the cluster (0 otherwise). DescribeTopicPartitions needs DESCRIBE on each topic (every
one from the cursor on is checked): refused topics are left out of an all-topics
answer, or come after the others with TOPIC_AUTHORIZATION_FAILED, and every topic
described carries the principal's authorized operations on it.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.metadata_answers import NO_OPERATIONS, topic_metadata
from kpybroker.apis.support.registry import api
from kpybroker.metadata.topic_names import INTERNAL_TOPICS, topic_name_error
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import describe_cluster, describe_topic_partitions
from kpybroker.protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kpybroker.protocol.messages.describe_topic_partitions import (
    Cursor,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTopicPartitionsResponsePartition,
    DescribeTopicPartitionsResponseTopic,
)
from kpybroker.security.acls.model import CLUSTER_NAME, AclOperation, ResourceType
from kpybroker.topic_admin import Topic

BROKER_ENDPOINT = 1


@api(describe_cluster, 0, 2)
async def handle_describe_cluster(
    ctx: RequestContext, request: DescribeClusterRequest
) -> DescribeClusterResponse:
    services = ctx.services
    response = DescribeClusterResponse(
        error_message=None, endpoint_type=BROKER_ENDPOINT, cluster_id=services.cluster.cluster_id
    )
    if request.endpoint_type != BROKER_ENDPOINT:
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = (
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
            "of type CONTROLLER"
        )
        return response
    response.controller_id = services.cluster.controller_id()
    response.brokers = [
        DescribeClusterBroker(
            broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack, is_fenced=False
        )
        for b in services.cluster.live_brokers(ctx.listener)
    ]
    if request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = (
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
            if ctx.authorize_cluster(AclOperation.DESCRIBE)
            else 0
        )
    return response


def partition_page(
    ctx: RequestContext, topic: Topic, start: int, limit: int
) -> list[DescribeTopicPartitionsResponsePartition]:
    """Partitions ``start`` .. ``start + limit - 1`` of ``topic``, as Metadata describes them."""
    live = ctx.services.cluster.live_broker_ids()
    offline = ctx.services.replicas.offline_here(topic.name)
    described = topic_metadata(topic, NO_OPERATIONS, live, offline).partitions[
        start : start + limit
    ]
    return [
        DescribeTopicPartitionsResponsePartition(
            partition_index=p.partition_index,
            leader_id=p.leader_id,
            leader_epoch=p.leader_epoch,
            replica_nodes=p.replica_nodes,
            isr_nodes=p.isr_nodes,
            offline_replicas=p.offline_replicas,
            eligible_leader_replicas=[],  # Kafka's Java Admin requires lists here
            last_known_elr=[],
        )
        for p in described
    ]


def missing_topic(ctx: RequestContext, name: str) -> DescribeTopicPartitionsResponseTopic:
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if topic_name_error(name) is not None:
        code = ErrorCode.INVALID_TOPIC_EXCEPTION
    # Kafka reports the authorized operations of an unknown topic too.
    return DescribeTopicPartitionsResponseTopic(
        error_code=code,
        name=name,
        topic_id=bytes(16),
        is_internal=name in INTERNAL_TOPICS,
        topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name),
    )


def refused_topic(name: str) -> DescribeTopicPartitionsResponseTopic:
    """A named topic the principal may not describe (existing or not): no operations."""
    return DescribeTopicPartitionsResponseTopic(
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        name=name,
        topic_id=bytes(16),
        is_internal=False,
        partitions=[],
    )


def invalid_request(request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    """A cursor that does not fit the request: every requested topic gets INVALID_REQUEST,
    as Kafka's ``DescribeTopicPartitionsRequest.getErrorResponse`` answers."""
    return DescribeTopicPartitionsResponse(
        topics=[
            DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.INVALID_REQUEST, name=t.name, topic_id=bytes(16)
            )
            for t in request.topics
        ]
    )


@api(describe_topic_partitions, 0, 0)
async def handle_describe_topic_partitions(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    manager = ctx.services.topics
    everything = not request.topics
    cursor = request.cursor
    first = cursor.topic_name if cursor is not None else ""
    if everything:
        names = sorted(t.name for t in manager.all() if t.name >= first)
    else:
        names = sorted({t.name for t in request.topics if t.name >= first})
        if cursor is not None and cursor.topic_name not in names:
            return invalid_request(request)
    if cursor is not None and cursor.partition_index < 0:
        return invalid_request(request)
    limit = max(
        min(
            ctx.services.config().get_int("max.request.partition.size.limit"),
            request.response_partition_limit,
        ),
        1,
    )
    allowed: list[str] = []
    refused: list[str] = []
    for name in names:
        describable = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        (allowed if describable else refused).append(name)
    response = DescribeTopicPartitionsResponse(topics=[])
    for name in allowed:
        if limit == 0:
            response.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = manager.get(name)
        if topic is None:
            if not everything:
                response.topics.append(missing_topic(ctx, name))
            continue
        start = cursor.partition_index if cursor is not None and name == first else 0
        partitions = partition_page(ctx, topic, start, limit)
        response.topics.append(
            DescribeTopicPartitionsResponseTopic(
                name=name,
                topic_id=topic.topic_id,
                is_internal=topic.is_internal,
                partitions=partitions,
                topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name),
            )
        )
        if start + len(partitions) < len(topic.partitions):
            response.next_cursor = Cursor(topic_name=name, partition_index=start + len(partitions))
            break
        limit -= len(partitions)
    if not everything:
        response.topics += [refused_topic(name) for name in refused]
    return response
