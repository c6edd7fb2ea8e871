"""ListOffsets (key 2): offsets by time, and the log's special positions.

Versions: 0 (old-style offset arrays) is gone in Kafka 4; 1 returns one
offset and its timestamp; 2 adds the isolation level; 4 leader epochs; 6 is
flexible; 7 adds the max-timestamp query (-3); 8 earliest-local (-4); 9
latest-tiered (-5); 10 a timeout.

A follower (``replica_id`` >= 0) asking for -1 gets the log end offset: it
asks when its fetch offset is out of range, to find the leader's log end.

Special timestamps: -1 latest (the high watermark, or the last stable offset
under read_committed), -2 earliest (the log start), -3 the record with the
largest timestamp, -4 the earliest local offset (the log start: all data is
local), -5 the latest tiered offset (-1: nothing is tiered). Any other value
finds the first record whose timestamp is at least that value, through the
time index.
"""

from __future__ import annotations

from kpybroker.apis.registry import RequestContext, api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import list_offsets
from kpybroker.protocol.messages.list_offsets import (
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
NEEDS_VERSION = {MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9}


def lookup(partition, timestamp: int, version: int, from_follower: bool) -> tuple[int, int]:
    """Return (timestamp, offset) for one query; (-1, -1) when nothing matches."""
    log = partition.log
    if timestamp in NEEDS_VERSION and version < NEEDS_VERSION[timestamp]:
        raise KafkaError(ErrorCode.UNSUPPORTED_VERSION)
    if timestamp == LATEST:
        return -1, log.log_end_offset if from_follower else partition.high_watermark
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found[1] >= partition.high_watermark:
        return -1, -1
    return found


@api(list_offsets, 1, 10)
async def handle_list_offsets(
    ctx: RequestContext, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    replicas = ctx.broker.replicas
    topics = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            resp = ListOffsetsPartitionResponse(partition_index=p.partition_index)
            try:
                partition = replicas.partition_for(
                    topic.name, p.partition_index, p.current_leader_epoch
                )
                resp.timestamp, resp.offset = lookup(
                    partition, p.timestamp, ctx.api_version, request.replica_id >= 0
                )
                resp.leader_epoch = partition.leader_epoch
            except KafkaError as exc:
                resp.error_code = exc.code
            parts.append(resp)
        topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=parts))
    return ListOffsetsResponse(topics=topics)
