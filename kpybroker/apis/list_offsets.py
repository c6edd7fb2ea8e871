"""ListOffsets (key 2): offsets by time, and the log's special positions.

Versions: 0 (old-style offset arrays) is gone in Kafka 4; 1 returns one
offset and its timestamp; 2 adds the isolation level; 4 leader epochs; 6 is
flexible; 7 adds the max-timestamp query (-3); 8 earliest-local (-4); 9
latest-tiered (-5); 10 a timeout; 11 earliest-pending-upload (-6, KIP-1023).

Only a consumer (``replica_id`` -1) is bounded by the high watermark: a
follower, or a debugging tool (-2), asking for -1 gets the log end offset (a
follower asks when its fetch offset is out of range, to find the leader's
log end).

A read_committed consumer (isolation level 1, v2+) is bounded by the last
stable offset instead, as Kafka's ``fetchOffsetForTimestamp`` does: its -1 is
the last stable offset, and a record found by time at or past it is not answered.

Special timestamps: -1 latest (the high watermark, or the last stable offset
under read_committed), -2 earliest (the log start), -3 the record with the
largest timestamp, -4 the earliest local offset (the log start: all data is
local), -5 the latest tiered offset and -6 the earliest offset not yet uploaded to
tiered storage (both -1, as Kafka answers for a topic without remote storage:
nothing is tiered here). Any other value
finds the first record whose timestamp is at least that value, through the
time index. Another negative value, or a special one older than the
request's version, is UNSUPPORTED_VERSION; a partition named twice in one
request is answered once, INVALID_REQUEST. Nothing found is offset and
timestamp -1 with no leader epoch, as Kafka answers.

Each topic needs DESCRIBE (consumers and followers alike); the partitions of a
topic that may not be described are answered TOPIC_AUTHORIZATION_FAILED after
all the others, as Kafka appends them.
"""

from __future__ import annotations

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.registry import api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import list_offsets
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kpybroker.security.acls.model import AclOperation, ResourceType

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6
#: The first version that knows each special timestamp.
NEEDS_VERSION = {
    LATEST: 0,
    EARLIEST: 0,
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL: 8,
    LATEST_TIERED: 9,
    EARLIEST_PENDING_UPLOAD: 11,
}
CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1
NOT_FOUND = (-1, -1)


def supported(timestamp: int, version: int) -> bool:
    return timestamp >= 0 or version >= NEEDS_VERSION.get(timestamp, version + 1)


def last_fetchable_offset(partition, consumer: bool, committed: bool) -> int:
    """Where the asker may read up to: the log end for replicas and tools, else the last
    stable offset (read_committed) or the high watermark."""
    if not consumer:
        return partition.log.log_end_offset
    return partition.last_stable_offset if committed else partition.high_watermark


def lookup(partition, timestamp: int, consumer: bool, committed: bool = False) -> tuple[int, int]:
    """Return (timestamp, offset) for one query; (-1, -1) when nothing matches."""
    log = partition.log
    last_fetchable = last_fetchable_offset(partition, consumer, committed)
    if timestamp == LATEST:
        return -1, last_fetchable
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return NOT_FOUND
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found[1] >= last_fetchable:
        return NOT_FOUND
    return found


@api(list_offsets, 1, 11)
async def handle_list_offsets(
    ctx: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    replicas = ctx.services.replicas
    consumer = request.replica_id == CONSUMER_REPLICA_ID
    committed = request.isolation_level == READ_COMMITTED
    answers: dict[tuple[str, int], ListOffsetsPartitionResponse] = {}
    described = ctx.authorized_names(
        AclOperation.DESCRIBE, ResourceType.TOPIC, (topic.name for topic in request.topics)
    )
    denied = []
    for topic in request.topics:
        if topic.name not in described:
            denied.append(topic)
            continue
        for p in topic.partitions:
            key = (topic.name, p.partition_index)
            if key in answers:
                answers[key] = refused(p.partition_index, ErrorCode.INVALID_REQUEST)
                continue
            if not supported(p.timestamp, ctx.api_version):
                answers[key] = refused(p.partition_index, ErrorCode.UNSUPPORTED_VERSION)
                continue
            try:
                partition = replicas.partition_for(
                    topic.name, p.partition_index, p.current_leader_epoch
                )
                found = lookup(partition, p.timestamp, consumer, committed)
            except KafkaError as exc:
                answers[key] = refused(p.partition_index, exc.code)
                continue
            answer = ListOffsetsPartitionResponse(partition_index=p.partition_index)
            answer.timestamp, answer.offset = found
            if found != NOT_FOUND:
                answer.leader_epoch = partition.leader_epoch
            answers[key] = answer
    by_topic: dict[str, ListOffsetsTopicResponse] = {}
    for (name, _), answer in answers.items():
        by_topic.setdefault(name, ListOffsetsTopicResponse(name=name)).partitions.append(answer)
    unauthorized = [
        ListOffsetsTopicResponse(
            name=topic.name,
            partitions=[
                refused(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in topic.partitions
            ],
        )
        for topic in denied
    ]
    return ListOffsetsResponse(topics=[*by_topic.values(), *unauthorized])


def refused(index: int, code: ErrorCode) -> ListOffsetsPartitionResponse:
    """Kafka's ``buildErrorResponse``: offset and timestamp unknown."""
    return ListOffsetsPartitionResponse(
        partition_index=index, error_code=code, timestamp=-1, offset=-1
    )
