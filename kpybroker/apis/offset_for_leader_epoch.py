"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in this log.

Versions: 0-1 are gone in Kafka 4; 2 adds the current leader epoch check
(librdkafka sends exactly v2); 3 adds replica_id (-1 for consumers; Java
clients validate positions only when v3+ is offered); 4 is flexible.

For the current epoch the answer is the log end offset; for an older one,
the start offset of the next epoch in the leader-epoch cache. A consumer
uses it to detect a truncated log after a leader change (KIP-320), and a
returning follower to find where its log diverged.

CLUSTER_ACTION on the cluster (brokers) allows every topic; otherwise each
topic needs DESCRIBE, and the partitions of the others are answered
TOPIC_AUTHORIZATION_FAILED after the rest, as Kafka appends them.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import offset_for_leader_epoch
from kpybroker.protocol.messages.offset_for_leader_epoch import (
    EpochEndOffset,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kpybroker.security.acls.model import AclOperation, ResourceType


@api(offset_for_leader_epoch, 2, 4)
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    replicas = ctx.services.replicas
    topics = []
    denied = []
    everything = ctx.authorize_cluster(AclOperation.CLUSTER_ACTION, log_if_denied=False)
    described = (
        None
        if everything
        else ctx.authorized_names(
            AclOperation.DESCRIBE, ResourceType.TOPIC, (topic.topic for topic in request.topics)
        )
    )
    for topic in request.topics:
        if described is not None and topic.topic not in described:
            denied.append(
                OffsetForLeaderTopicResult(
                    topic=topic.topic,
                    partitions=[
                        EpochEndOffset(
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            partition=p.partition,
                            leader_epoch=-1,
                            end_offset=-1,
                        )
                        for p in topic.partitions
                    ],
                )
            )
            continue
        results = []
        for p in topic.partitions:
            result = EpochEndOffset(partition=p.partition)
            try:
                partition = replicas.partition_for(topic.topic, p.partition, p.current_leader_epoch)
                result.leader_epoch, result.end_offset = partition.end_offset_for_epoch(
                    p.leader_epoch
                )
            except KafkaError as exc:
                result.error_code = exc.code
            results.append(result)
        topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=results))
    return OffsetForLeaderEpochResponse(topics=[*topics, *denied])
