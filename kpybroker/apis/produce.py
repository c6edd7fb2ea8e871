"""Produce (key 0): append record batches to partition logs.

Versions: Kafka 4 advertises 0 but rejects 0-2 (magic v0/v1 message sets);
3 added the transactional id and requires exactly one v2 batch per
partition; 5 returns the log start offset; 7 allows zstd; 8 adds per-batch
record errors and an error message; 9 is flexible; 10 adds the current-leader
hint for NOT_LEADER_OR_FOLLOWER; 11 and 12 are the same wire as 10 (12 lets
a transaction add partitions implicitly, KIP-890: without transactions it is
11); 13 names topics by ID, and an unknown ID is UNKNOWN_TOPIC_ID.

This handler keeps the request's own concerns: acks, topic ids, internal
topics, a batch Kafka's iterator cannot walk (which fails the whole request),
and transactional batches, which need the request's transactional id and
WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request
otherwise, as Kafka's ``hasTransactionalRecords`` check; like Kafka it looks
at each partition's first batch). Each topic needs WRITE, asked before the
partition is looked up (TOPIC_AUTHORIZATION_FAILED per partition); idempotent
producers are checked at InitProducerId, not here, as in Kafka. The request's
size counts against the producer's byte-rate quota (``producer_byte_rate``):
over it, the answer carries the throttle time and the connection is muted.
A producer's first transactional write to a partition is first verified with,
or from v12 added by, the transaction's coordinator (KIP-890,
``apis.support.txn_verification``); the partition's producer state then
checks the transaction itself. Every check
of a partition's batch is ``kpybroker.log.produce_validator``'s, whose docstring
gives their order: count, size, CRC, magic and zstd, then the records of a
compressed batch and recompression into the topic's compression.type, both
called here before the append, then the rest inside the log's append. The
records of a compressed batch are checked on the event loop when they
decompress to at most ``ON_LOOP_DECOMPRESSED_BYTES``, in a worker thread
otherwise (Kafka validates on its request threads, never on its network ones).

Each partition is counted in Kafka's BrokerTopicMetrics (``metrics.topic_stats``): its
batch's records and bytes as they arrived, or its failure.

With acks=all the answer waits, up to the request's ``timeout_ms``, for the
high watermark to pass the batch, that is for every in-sync replica to hold
it (REQUEST_TIMED_OUT otherwise). Only the leader appends; another broker,
also one holding no replica of the partition, answers NOT_LEADER_OR_FOLLOWER
with the current leader and its endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import NamedTuple

from kpybroker.apis.support.context import RequestContext
from kpybroker.apis.support.leadership import HINTED_ERRORS, leader_endpoints
from kpybroker.apis.support.registry import CloseConnection, api
from kpybroker.apis.support.txn_verification import (
    Verified,
    verification_applies,
    verify_first_writes,
)
from kpybroker.cluster.partition import Partition
from kpybroker.log.log_config import LogConfig
from kpybroker.log.produce_validator import (
    CheckedBatch,
    RecordValidationError,
    validate_produced,
    validate_records,
)
from kpybroker.metadata.topic_names import INTERNAL_TOPICS
from kpybroker.protocol import compression, records
from kpybroker.protocol.compression import DecompressedTooLarge
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import produce
from kpybroker.protocol.messages.produce import (
    BatchIndexAndErrorMessage,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
)
from kpybroker.security.acls.model import AclOperation, ResourceType

log = logging.getLogger(__name__)

VALID_ACKS = (-1, 0, 1)
NODE_ENDPOINTS_FROM = 10
TOPIC_IDS_FROM = 13


# Errors Kafka answers with an unknown log start offset (ReplicaManager.appendToLocalLog).
NO_LOG_START_ERRORS = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.INVALID_RECORD,
        ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
    }
)


#: Append errors Kafka's ReplicaManager does not count as failed produce requests (the
#: partition is elsewhere or internal, the batch is too large or corrupt, the disk failed).
NOT_COUNTED_AS_FAILED = frozenset(
    {
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


#: Compressed records that decompress to at most this are checked on the event loop (a few
#: milliseconds for 1 MiB of small records); larger ones, and bombs, are checked in a worker
#: thread with the full bound, so that other clients are served meanwhile.
ON_LOOP_DECOMPRESSED_BYTES = 1024 * 1024
#: A batch larger than this is sent to the worker thread at once: it would most likely
#: decompress past ``ON_LOOP_DECOMPRESSED_BYTES``, and trying first would be wasted work.
ON_LOOP_COMPRESSED_BYTES = ON_LOOP_DECOMPRESSED_BYTES // 4


class Appended(NamedTuple):
    """A batch in the log, whose acks=all answer waits for the high watermark to pass it."""

    response: PartitionProduceResponse
    partition: Partition
    end_offset: int


def validated_on_loop(batch: CheckedBatch, config: LogConfig) -> CheckedBatch | None:
    """``validate_records`` on the event loop; ``None`` for compressed records that
    decompress to more than ``ON_LOOP_DECOMPRESSED_BYTES`` (or likely would), which the
    caller checks in a worker thread so that other clients are served meanwhile."""
    header = batch.header
    if header.compression == compression.NONE or header.size <= ON_LOOP_COMPRESSED_BYTES:
        try:
            return validate_records(batch, config, ON_LOOP_DECOMPRESSED_BYTES)
        except DecompressedTooLarge:
            pass
    return None


async def produce_partition(
    ctx: RequestContext,
    topic: str,
    index: int,
    data: memoryview | None,
    acks: int,
    verified: Verified | None = None,
) -> tuple[PartitionProduceResponse, Appended | None]:
    """Append one partition's batch; the answer, and what was appended. ``verified`` is
    a transactional first write's guard, or the error its verification failed with."""
    services = ctx.services
    response = PartitionProduceResponse(index=index)
    partition = None
    try:
        services.replicas.check_known(topic, index)  # first, as Kafka's handleProduceRequest
        if topic in INTERNAL_TOPICS:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}"
            )
        if type(verified) is ErrorCode:
            # As Kafka: a failed verification reports no log start offset.
            raise KafkaError(verified)
        partition = services.replicas.leader_partition(topic, index)
        config = partition.log.config
        batch = validate_produced(data, config, ctx.api_version)
        checked = validated_on_loop(batch, config)
        if checked is None:
            checked = await asyncio.to_thread(validate_records, batch, config)
            # Leadership may have moved while the worker thread checked the records.
            partition = services.replicas.leader_partition(topic, index)
        result = partition.append_as_leader(checked, acks, verified)
    except KafkaError as exc:
        services.topic_stats.produce_errored(topic, failed=exc.code not in NOT_COUNTED_AS_FAILED)
        response.error_code = exc.code
        response.base_offset = -1
        if partition is not None and exc.code not in NO_LOG_START_ERRORS:
            # As Kafka's ReplicaManager: failures other than these report the log start.
            response.log_start_offset = partition.log.log_start_offset
        if exc.code in HINTED_ERRORS:
            hint = services.replicas.leader_hint(topic, index)
            response.current_leader = LeaderIdAndEpoch(hint.leader_id, hint.leader_epoch)
        if isinstance(exc, RecordValidationError):  # e.g. keyless records, compacted topic
            # The only produce errors whose message Kafka sends (``hasCustomErrorMessage``).
            response.error_message = exc.message
            response.record_errors = [BatchIndexAndErrorMessage(i, m) for i, m in exc.record_errors]
            response.log_start_offset = exc.log_start_offset
        return response, None
    services.topic_stats.produced(topic, batch.header.record_count, batch.header.size)
    response.base_offset = result.base_offset
    response.log_append_time_ms = result.log_append_time
    response.log_start_offset = result.log_start_offset
    return response, Appended(response, partition, result.last_offset + 1)


async def wait_for_replication(appended: list[Appended], timeout_ms: int) -> None:
    """acks=all: wait until every appended batch is below its partition's high watermark.

    What is not replicated within the request's timeout is REQUEST_TIMED_OUT
    (the records stay in the log and may still be committed; the producer
    retries, and idempotence makes the retry a duplicate). The other errors
    come from ``Partition.wait_for_high_watermark``.
    """
    waits = {}
    for response, partition, end in appended:
        outcome = partition.acks_outcome(end)  # known at once without followers: no task
        if outcome is None:
            waits[asyncio.ensure_future(partition.wait_for_high_watermark(end))] = response
        else:
            set_acks_error(response, outcome)
    if not waits:
        return
    done, pending = await asyncio.wait(waits, timeout=max(timeout_ms, 0) / 1000)
    for task in pending:
        task.cancel()
    for task, response in waits.items():
        set_acks_error(response, task.result() if task in done else ErrorCode.REQUEST_TIMED_OUT)


def set_acks_error(response: PartitionProduceResponse, error: ErrorCode) -> None:
    if error:
        response.error_code = error
        response.base_offset = -1


def first_batch_transactional(data: memoryview | bytes | None) -> bool:
    """Whether a partition's first batch is transactional (Kafka's ``RequestUtils.flag``)."""
    if data is None or len(data) <= records.ATTRIBUTES_OFFSET + 1:
        return False
    return bool(data[records.ATTRIBUTES_OFFSET + 1] & records.TRANSACTIONAL_MASK)


def topic_names(ctx: RequestContext, request: ProduceRequest) -> list[str | None]:
    """Each topic's name; from v13 looked up by id (None when unknown)."""
    if ctx.api_version < TOPIC_IDS_FROM:
        return [topic.name for topic in request.topic_data]
    found = (ctx.services.topics.by_id(topic.topic_id) for topic in request.topic_data)
    return [None if topic is None else topic.name for topic in found]


def record_produced(ctx: RequestContext) -> int:
    """Count the request against the producer's byte rate; the throttle time (ms) it earns
    (Kafka records the whole request's size, whatever became of it)."""
    quota = ctx.services.quotas.produce
    if not quota.quotas_enabled:
        return 0
    now_ms = time.monotonic_ns() // 1_000_000
    return quota.record(ctx.principal.name, ctx.client_id or "", ctx.request_size, now_ms)


def refuse_all(request: ProduceRequest, code: ErrorCode, message: str | None) -> ProduceResponse:
    """Every partition answered with one error, as Kafka's ``getErrorResponse`` when the
    request itself fails."""
    return ProduceResponse(
        responses=[
            TopicProduceResponse(
                name=topic.name,
                topic_id=topic.topic_id,
                partition_responses=[
                    PartitionProduceResponse(
                        index=pd.index,
                        error_code=code,
                        base_offset=-1,
                        log_start_offset=-1,
                        error_message=message,
                    )
                    for pd in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ]
    )


@api(produce, 3, 13, advertised_min=0)
async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
    acks = request.acks
    unreadable = next(
        (
            error
            for topic in request.topic_data
            for pd in topic.partition_data
            if (error := records.batch_iteration_error(pd.records))
        ),
        None,
    )
    if unreadable:
        if acks == 0:
            raise CloseConnection(f"an acks=0 produce request failed: {unreadable}")
        return refuse_all(request, ErrorCode.CORRUPT_MESSAGE, unreadable)
    if any(
        first_batch_transactional(pd.records)
        for topic in request.topic_data
        for pd in topic.partition_data
    ) and (
        request.transactional_id is None
        or not ctx.authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        )
    ):
        if acks == 0:
            raise CloseConnection("transactional records, not allowed for this transactional id")
        # Kafka's error response carries no message here (its exception's text is the
        # error's default, which ApiError leaves out).
        return refuse_all(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
    names = topic_names(ctx, request)
    writable = ctx.authorized_names(
        AclOperation.WRITE, ResourceType.TOPIC, (name for name in names if name is not None)
    )
    verified: dict[tuple[str, int], Verified] = {}
    if request.transactional_id is not None and verification_applies(ctx):
        first_writes = {
            (name, pd.index): pd.records
            for name, topic_data in zip(names, request.topic_data, strict=True)
            if name in writable
            for pd in topic_data.partition_data
            if first_batch_transactional(pd.records)
        }
        if first_writes:
            verified = await verify_first_writes(ctx, request.transactional_id, first_writes)
    responses = []
    appended = []
    for name, topic_data in zip(names, request.topic_data, strict=True):
        parts = []
        for pd in topic_data.partition_data:
            if acks not in VALID_ACKS:
                error = ErrorCode.INVALID_REQUIRED_ACKS
            elif name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
            elif name not in writable:
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                part, batch = await produce_partition(
                    ctx, name, pd.index, pd.records, acks, verified.get((name, pd.index))
                )
                if batch is not None and acks == -1:
                    appended.append(batch)
                parts.append(part)
                continue
            parts.append(PartitionProduceResponse(index=pd.index, base_offset=-1, error_code=error))
        responses.append(
            TopicProduceResponse(
                name=topic_data.name, topic_id=topic_data.topic_id, partition_responses=parts
            )
        )
    if appended:
        await wait_for_replication(appended, request.timeout_ms)
    throttle_ms = record_produced(ctx)
    if acks == 0:
        if any(p.error_code for t in responses for p in t.partition_responses):
            # The client expects no answer; Kafka closes the connection so that it notices.
            raise CloseConnection("an acks=0 produce request failed")
        return None
    response = ProduceResponse(responses=responses, throttle_time_ms=throttle_ms)
    hinted = {
        p.current_leader.leader_id
        for t in responses
        for p in t.partition_responses
        if p.error_code in HINTED_ERRORS
    }
    if hinted and ctx.api_version >= NODE_ENDPOINTS_FROM:
        response.node_endpoints = [
            NodeEndpoint(a.broker_id, a.host, a.port, a.rack) for a in leader_endpoints(ctx, hinted)
        ]
    return response
