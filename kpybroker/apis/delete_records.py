"""DeleteRecords (key 21): move partitions' log start offsets forward.

Versions: 0 is the first; 1 is the same wire (the broker may throttle after
responding, KIP-219); 2 is flexible.

Each partition's offset becomes its new log start offset (-1: the high
watermark), as Kafka's ``Partition.deleteRecordsOnLeader`` does: records below
it can no longer be fetched (OFFSET_OUT_OF_RANGE) and ListOffsets -2 answers
it; the segments wholly below it are deleted at the next retention check. The
answer's low watermark is the new log start offset; with a single replica
there is nothing to wait for, so ``timeout_ms`` is not needed.

Errors, in Kafka's order: TOPIC_AUTHORIZATION_FAILED without DELETE on the
topic (whether or not it exists); UNKNOWN_TOPIC_OR_PARTITION for a partition the
cluster does not have; INVALID_TOPIC_EXCEPTION for an internal topic;
NOT_LEADER_OR_FOLLOWER on a broker that does not lead it (also one that holds
no replica of it: ``ReplicaManager.partition_for``); POLICY_VIOLATION unless
cleanup.policy contains delete; OFFSET_OUT_OF_RANGE for an offset below -1 or
past the high watermark; KAFKA_STORAGE_ERROR. Failed partitions report a low
watermark of -1.

Kafka writes the log start offset checkpoint only every
``log.flush.start.offset.checkpoint.interval.ms``, so a crash soon after could
bring deleted records back; here it is written before answering (by the checkpoint
thread: a directory where that fails goes offline).
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.metadata.topic_names import INTERNAL_TOPICS
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import delete_records
from kpybroker.protocol.messages.delete_records import (
    DeleteRecordsPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteRecordsTopicResult,
)
from kpybroker.security.acls.model import AclOperation, ResourceType


def delete_partition_records(ctx: RequestContext, topic: str, index: int, offset: int) -> int:
    """Advance one partition's log start offset; returns its new low watermark."""
    replicas = ctx.services.replicas
    replicas.check_known(topic, index)
    if topic in INTERNAL_TOPICS:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {topic}"
        )
    partition = replicas.leader_partition(topic, index)
    try:
        return partition.log.delete_records(offset)
    except OSError as exc:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, str(exc)) from exc


@api(delete_records, 0, 2)
async def handle_delete_records(
    ctx: RequestContext, request: DeleteRecordsRequest
) -> DeleteRecordsResponse:
    # Kafka keys the request by partition: one named twice is deleted to its last offset.
    wanted = {
        (topic.name, p.partition_index): p.offset
        for topic in request.topics
        for p in topic.partitions
    }
    deletable = ctx.authorized_names(
        AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    by_topic: dict[str, DeleteRecordsTopicResult] = {}
    for (name, index), offset in wanted.items():
        result = DeleteRecordsPartitionResult(partition_index=index)
        try:
            if name not in deletable:
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            result.low_watermark = delete_partition_records(ctx, name, index, offset)
        except KafkaError as exc:
            result.low_watermark = -1
            result.error_code = exc.code
        by_topic.setdefault(name, DeleteRecordsTopicResult(name=name)).partitions.append(result)
    topics = list(by_topic.values())
    await ctx.services.logs.save_log_start_offsets()
    return DeleteRecordsResponse(topics=topics)
