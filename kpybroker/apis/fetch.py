"""Fetch (key 1): serve record batches as byte ranges of segment files.

Versions: 4 adds isolation level and aborted transactions (Kafka 4's floor);
5 the log start offset; 7 fetch sessions (KIP-227); 9 the current leader
epoch check; 11 rack-aware preferred replica; 12 is flexible with diverging
epochs; 13 names topics by ID; 15 moves replica_id into replica_state; 16
adds node endpoints; 17 a replica directory ID.

This broker never opens fetch sessions: it answers every fetch in full with
session ID 0, which every client accepts (KIP-227 lets a broker refuse). A
fetch naming a session ID therefore refers to a session that does not exist.

Records are never decoded: the log returns file ranges of whole batches,
which the connection sends with sendfile. When there is less than
``min_bytes`` to send, the request waits up to ``max_wait_ms`` on the
partitions' append signals (not a polling loop).
"""

from __future__ import annotations

import asyncio

from kpybroker.apis.registry import RequestContext, api
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import fetch
from kpybroker.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
)

TOPIC_IDS_FROM = 13
READ_COMMITTED = 1


def session_error(request: FetchRequest) -> ErrorCode:
    if request.session_id != 0:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if request.session_epoch not in (-1, 0):
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    return ErrorCode.NONE


class FetchPlan:
    """One pass over the requested partitions; rerun after each wake-up."""

    def __init__(self, ctx: RequestContext, request: FetchRequest) -> None:
        self.ctx = ctx
        self.request = request
        self.by_id = ctx.api_version >= TOPIC_IDS_FROM
        self.partitions = []  # resolved Partition objects, for waiting on appends
        self.bytes = 0
        self.errors = False

    def run(self) -> list[FetchableTopicResponse]:
        replicas = self.ctx.broker.replicas
        remaining = self.request.max_bytes
        min_one = True
        self.bytes = 0
        self.errors = False
        self.partitions = []
        responses = []
        for topic in self.request.topics:
            name = replicas.topic_name(topic.topic_id) if self.by_id else topic.topic
            result = FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id)
            for fp in topic.partitions:
                pd = PartitionData(partition_index=fp.partition, high_watermark=-1)
                result.partitions.append(pd)
                try:
                    if name is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID)
                    partition = replicas.leader_partition(name, fp.partition)
                    partition.check_leader_epoch(fp.current_leader_epoch)
                    self.partitions.append(partition)
                    limit = min(fp.partition_max_bytes, remaining)
                    records = partition.read_records(fp.fetch_offset, limit, min_one)
                except KafkaError as exc:
                    # Kafka reports -1 for every offset of a partition it could not read.
                    pd.error_code = exc.code
                    pd.last_stable_offset = pd.log_start_offset = -1
                    self.errors = True
                    continue
                pd.high_watermark = partition.high_watermark
                pd.last_stable_offset = partition.high_watermark
                pd.log_start_offset = partition.log.log_start_offset
                if self.request.isolation_level == READ_COMMITTED:
                    pd.aborted_transactions = []
                else:
                    pd.aborted_transactions = None
                if records is not None and len(records):
                    pd.records = records
                    self.bytes += len(records)
                    remaining = max(0, remaining - len(records))
                    min_one = False
                else:
                    pd.records = b""
            responses.append(result)
        return responses


@api(fetch, 4, 17)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    error = session_error(request)
    if error:
        return FetchResponse(error_code=error, session_id=0)
    plan = FetchPlan(ctx, request)
    responses = plan.run()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    while plan.bytes < request.min_bytes and not plan.errors and plan.partitions:
        timeout = deadline - loop.time()
        if timeout <= 0:
            break
        woken = await ctx.broker.replicas.wait_for_append(plan.partitions, timeout)
        if not woken:
            break
        responses = plan.run()
    return FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=responses)
