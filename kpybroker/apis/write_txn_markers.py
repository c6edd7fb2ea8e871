"""WriteTxnMarkers (key 27): a transaction coordinator's end markers, for partitions led here.

Sent by the transaction coordinator (on another broker; this broker's own
coordinator writes its markers without the round trip) once a transaction
is prepared. Each marker is appended as a control batch with acks=all; one
written to ``__consumer_offsets`` also completes the transaction's offset
commits. A partition the cluster does not have is UNKNOWN_TOPIC_OR_PARTITION
without a write, as in Kafka's ``handleWriteTxnMarkersRequest``. Versions: 1
is the floor since Kafka 4.0 and flexible; 2 adds the transaction version of
the marker (KIP-1228), which markers of transaction version 1 leave at 0.

Authorization, as Kafka's handler: the sender needs ALTER on the cluster or,
as inter-broker requests have, CLUSTER_ACTION (a super user has both); else
every partition of every marker is CLUSTER_AUTHORIZATION_FAILED.
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
from kpybroker.security.acls.model import AclOperation


def partitions_of(marker: WritableTxnMarker) -> list[TopicPartition]:
    return [(t.name, p) for t in marker.topics for p in t.partition_indexes]


async def write_marker(ctx: RequestContext, marker: WritableTxnMarker) -> WritableTxnMarkerResult:
    topics = ctx.services.cluster.topics()
    wanted = partitions_of(marker)
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
    return marker_result(marker, errors)


def marker_result(
    marker: WritableTxnMarker, errors: dict[TopicPartition, ErrorCode]
) -> WritableTxnMarkerResult:
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


def may_write_markers(ctx: RequestContext) -> bool:
    """ALTER on the cluster (its refusal not logged) or else CLUSTER_ACTION, as Kafka asks."""
    if ctx.authorize_cluster(AclOperation.ALTER, log_if_denied=False):
        return True
    return ctx.authorize_cluster(AclOperation.CLUSTER_ACTION)


@api(write_txn_markers, 1, 2)
async def handle_write_txn_markers(
    ctx: RequestContext, request: WriteTxnMarkersRequest
) -> WriteTxnMarkersResponse:
    if not may_write_markers(ctx):
        refused = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return WriteTxnMarkersResponse(
            markers=[
                marker_result(m, dict.fromkeys(partitions_of(m), refused)) for m in request.markers
            ]
        )
    results = await asyncio.gather(*(write_marker(ctx, m) for m in request.markers))
    return WriteTxnMarkersResponse(markers=list(results))
