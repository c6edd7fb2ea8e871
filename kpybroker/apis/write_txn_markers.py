"""WriteTxnMarkers (key 27): a transaction coordinator's end markers, for partitions led here.

Sent by the transaction coordinator (on another broker; this broker's own
coordinator writes its markers without the round trip) once a transaction
is prepared. Each marker is appended as a control batch with acks=all; one
written to ``__consumer_offsets`` also completes the transaction's offset
commits. A partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION
without a write, as in Kafka's ``handleWriteTxnMarkersRequest``. Versions: 1
is the floor since Kafka 4.0 and flexible; 2 adds the transaction version of
the marker (KIP-1228), which markers of transaction version 1 leave at 0.
"""

from __future__ import annotations

import asyncio

from kpybroker.apis.support.context import RequestContext, TopicPartition
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode
from kpybroker.protocol.messages import write_txn_markers
from kpybroker.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)


async def write_marker(ctx: RequestContext, marker: WritableTxnMarker) -> WritableTxnMarkerResult:
    topics = ctx.services.cluster.topics()
    wanted = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
    known = [tp for tp in wanted if tp[0] in topics and tp[1] in topics[tp[0]].partitions]
    errors: dict[TopicPartition, ErrorCode] = dict.fromkeys(
        wanted, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    errors.update(
        await ctx.services.txn_markers.write(
            marker.producer_id,
            marker.producer_epoch,
            marker.transaction_result,
            marker.coordinator_epoch,
            known,
        )
    )
    by_topic: dict[str, list[WritableTxnMarkerPartitionResult]] = {}
    for (name, index), error in errors.items():
        by_topic.setdefault(name, []).append(
            WritableTxnMarkerPartitionResult(partition_index=index, error_code=error)
        )
    return WritableTxnMarkerResult(
        producer_id=marker.producer_id,
        topics=[
            WritableTxnMarkerTopicResult(name=name, partitions=partitions)
            for name, partitions in by_topic.items()
        ],
    )


@api(write_txn_markers, 1, 2)
async def handle_write_txn_markers(
    ctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    results = await asyncio.gather(*(write_marker(ctx, m) for m in request.markers))
    return WriteTxnMarkersResponse(markers=list(results))
