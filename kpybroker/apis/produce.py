"""Produce (key 0): append record batches to partition logs.

Versions: Kafka 4 advertises 0 but rejects 0-2 (magic v0/v1 message sets);
3 added the transactional id and requires exactly one v2 batch per
partition; 5 returns the log start offset; 7 allows zstd; 8 adds per-batch
record errors and an error message; 9 is flexible; 10 adds the current-leader
hint for NOT_LEADER_OR_FOLLOWER; 11 is the same wire as 10.

Nothing here decodes a record: the batch header and its CRC are checked,
then the log stamps the offsets into the header and appends the bytes.
"""

from __future__ import annotations

import logging

from kpybroker.apis.produce_validation import in_topic_codec
from kpybroker.apis.registry import CloseConnection, RequestContext, api
from kpybroker.log.record_validation import RecordValidationError
from kpybroker.protocol import compression, records
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import produce
from kpybroker.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
ZSTD_MIN_PRODUCE_VERSION = 7


ONE_BATCH = "Produce requests with version 3 or later must contain exactly one record batch"


def validate_records(
    data: memoryview | None, api_version: int, max_message_bytes: int
) -> memoryview:
    """Check a partition's records as Kafka does before appending; return the single batch.

    A truncated batch counts as no batch, as in Kafka, whose batch iterator
    stops at an incomplete one. Only the header and the CRC are checked.
    """
    size = -1 if data is None else records.batch_size(data)
    if size < records.BATCH_HEADER_SIZE or size != len(data):
        raise KafkaError(ErrorCode.INVALID_RECORD, ONE_BATCH)
    if size > max_message_bytes:
        raise KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"The record batch is {size} bytes, larger than the maximum allowed "
            f"size of {max_message_bytes}",
        )
    header = records.validate_batch(data)
    if header.compression == compression.ZSTD and api_version < ZSTD_MIN_PRODUCE_VERSION:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, "Produce requests with zstd need version 7+"
        )
    if header.is_transactional:
        raise KafkaError(ErrorCode.INVALID_TXN_STATE, "transactions are not supported")
    return data


def produce_partition(
    ctx: RequestContext, topic: str, index: int, data: memoryview | None, acks: int
) -> PartitionProduceResponse:
    broker = ctx.broker
    response = PartitionProduceResponse(index=index)
    try:
        partition = broker.replicas.leader_partition(topic, index)
        batch = validate_records(data, ctx.api_version, partition.log.config.max_message_bytes)
        batch = in_topic_codec(batch, partition.log.config)
        result = partition.append_as_leader(batch, required_acks=acks)
    except KafkaError as exc:
        response.error_code = exc.code
        response.error_message = exc.message
        response.base_offset = -1
        if exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
            leader_id, leader_epoch = broker.replicas.leader_hint(topic, index)
            response.current_leader = LeaderIdAndEpoch(leader_id, leader_epoch)
        if isinstance(exc, RecordValidationError):  # e.g. keyless records, compacted topic
            response.record_errors = [BatchIndexAndErrorMessage(i, m) for i, m in exc.record_errors]
            response.log_start_offset = exc.log_start_offset
        return response
    response.base_offset = result.base_offset
    response.log_append_time_ms = result.log_append_time
    response.log_start_offset = result.log_start_offset
    return response


@api(produce, 3, 11, advertised_min=0)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    acks = request.acks
    responses = []
    failed = False
    for topic_data in request.topic_data:
        parts = []
        for pd in topic_data.partition_data:
            if acks not in VALID_ACKS:
                part = PartitionProduceResponse(
                    index=pd.index, base_offset=-1, error_code=ErrorCode.INVALID_REQUIRED_ACKS
                )
            else:
                part = produce_partition(ctx, topic_data.name, pd.index, pd.records, acks)
            failed = failed or part.error_code != ErrorCode.NONE
            parts.append(part)
        responses.append(TopicProduceResponse(name=topic_data.name, partition_responses=parts))
    if acks == 0:
        if failed:
            # The client expects no answer; Kafka closes the connection so that it notices.
            raise CloseConnection("an acks=0 produce request failed")
        return None
    return ProduceResponse(responses=responses)
