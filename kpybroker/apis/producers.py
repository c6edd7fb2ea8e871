"""DescribeProducers (key 61): the active idempotent producers of partitions.

Version 0 is flexible. For each partition this broker holds a replica of,
leader or follower (Kafka's ``Partition.activeProducerState`` reads any local
log: the admin client may ask a chosen broker), every producer id the
partition's producer state remembers: its epoch, last sequence, last
timestamp, the coordinator epoch of its last transaction marker (-1 before
any) and the first offset of its open transaction (current_txn_start_offset,
-1 when none is open).

Errors as Kafka's ``handleDescribeProducersRequest``: first per topic, with a
message, INVALID_TOPIC_EXCEPTION for an illegal name, TOPIC_AUTHORIZATION_FAILED
without READ on the topic (whether or not it exists), and
UNKNOWN_TOPIC_OR_PARTITION for a topic the cluster does not have; then per
partition, without one, ``ReplicaManager.partition_for``'s
UNKNOWN_TOPIC_OR_PARTITION or, on a broker holding no replica,
NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.metadata.topic_names import topic_name_error
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import describe_producers
from kpybroker.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicRequest,
    TopicResponse,
)
from kpybroker.security.acls.model import AclOperation, ResourceType


def topic_error(ctx: RequestContext, name: str) -> KafkaError | None:
    """The error of every partition of the topic, or None when it exists."""
    message = topic_name_error(name)
    if message is not None:
        return KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, message)
    if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
        return KafkaError.with_default_message(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if ctx.services.topics.get(name) is None:
        return KafkaError.with_default_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return None


def partition_producers(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    response = PartitionResponse(partition_index=index)
    try:
        partition = ctx.services.replicas.partition_for(topic, index, require_leader=False)
    except KafkaError as exc:
        response.error_code, response.error_message = exc.code, exc.message
        return response
    producers = partition.log.producer_state.producers
    response.active_producers = [
        ProducerState(
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            last_sequence=entry.last_seq,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=entry.current_txn_first_offset,
        )
        for _, entry in sorted(producers.items())
    ]
    return response


def topic_producers(ctx: RequestContext, request: TopicRequest) -> TopicResponse:
    error = topic_error(ctx, request.name)
    if error is None:
        partitions = [partition_producers(ctx, request.name, p) for p in request.partition_indexes]
    else:
        partitions = [
            PartitionResponse(partition_index=p, error_code=error.code, error_message=error.message)
            for p in request.partition_indexes
        ]
    return TopicResponse(name=request.name, partitions=partitions)


@api(describe_producers, 0, 0)
async def handle_describe_producers(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    return DescribeProducersResponse(topics=[topic_producers(ctx, t) for t in request.topics])
