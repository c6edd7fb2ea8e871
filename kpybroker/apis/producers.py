"""DescribeProducers (key 61): the active idempotent producers of partitions.

Version 0 is flexible. For each partition this broker leads, every producer id
the partition's producer state remembers: its epoch, last sequence and last
timestamp. kpybroker has no transactions, so the coordinator epoch is -1 and no
transaction is open (current_txn_start_offset -1). A partition this broker does
not have is UNKNOWN_TOPIC_OR_PARTITION, one it follows NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from kpybroker.apis.registry import RequestContext, api
from kpybroker.protocol.errors import KafkaError
from kpybroker.protocol.messages import describe_producers
from kpybroker.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    PartitionResponse,
    ProducerState,
    TopicResponse,
)


def partition_producers(ctx: RequestContext, topic: str, index: int) -> PartitionResponse:
    response = PartitionResponse(partition_index=index)
    try:
        partition = ctx.broker.replicas.leader_partition(topic, index)
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


@api(describe_producers, 0, 0)
async def handle_describe_producers(
    ctx: RequestContext, request: DescribeProducersRequest
) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        topics=[
            TopicResponse(
                name=t.name,
                partitions=[partition_producers(ctx, t.name, p) for p in t.partition_indexes],
            )
            for t in request.topics
        ]
    )
