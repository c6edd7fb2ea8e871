"""Fetch (key 1): serve record batches as byte ranges of segment files.

Versions: 4 adds isolation level and aborted transactions (Kafka 4's floor);
5 the log start offset; 7 fetch sessions (KIP-227); 9 the current leader
epoch check; 11 rack-aware preferred replica; 12 is flexible with diverging
epochs; 13 names topics by ID; 15 moves replica_id into replica_state; 16
adds node endpoints; 17 a replica directory ID; 18 lets a follower tell the
high watermark it knows (KIP-1166), and its fetch then returns as soon as the
leader's is higher, so that followers learn a new high watermark at once.

This broker never opens fetch sessions: it answers every fetch in full with
session ID 0, which every client accepts (KIP-227 lets a broker refuse). A
fetch naming a session ID therefore refers to a session that does not exist.

Records are never decoded: the log returns file ranges of whole batches,
which the connection sends with sendfile. When there is less than
``min_bytes`` to send, the request waits up to ``max_wait_ms`` on the
partitions' signals (not a polling loop): a consumer's fetch for the high
watermark to move, a follower's for an append.

Only the leader serves fetches. Followers fetch too, with their broker id as
``replica_id``: they read up to the log end, and their fetch offsets are how
the leader tracks them (``kpybroker.cluster``). A fetch sent to a broker that
does not lead gets NOT_LEADER_OR_FOLLOWER with the current leader (v12+) and
its endpoint (v16+).
"""

from __future__ import annotations

import asyncio

from kpybroker.apis.leadership import HINTED_ERRORS, leader_endpoints
from kpybroker.apis.registry import RequestContext, api
from kpybroker.cluster.partition import Partition
from kpybroker.log.config import LONG_MAX
from kpybroker.protocol.errors import ErrorCode, KafkaError
from kpybroker.protocol.messages import fetch
from kpybroker.protocol.messages.fetch import (
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)

TOPIC_IDS_FROM = 13
CURRENT_LEADER_FROM = 12
REPLICA_STATE_FROM = 15
NODE_ENDPOINTS_FROM = 16
READ_COMMITTED = 1
#: A v18 fetch's high watermark when the follower does not report one (KIP-1166).
UNKNOWN_HIGH_WATERMARK = LONG_MAX


def session_error(request: FetchRequest) -> ErrorCode:
    if request.session_id != 0:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if request.session_epoch not in (-1, 0):
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    return ErrorCode.NONE


def replica_id_of(request: FetchRequest, api_version: int) -> int:
    """The fetching follower's broker id; negative for a consumer."""
    if api_version >= REPLICA_STATE_FROM:
        return request.replica_state.replica_id
    return request.replica_id


class FetchPlan:
    """One pass over the requested partitions; rerun after each wake-up.

    A follower's fetch (``replica_id`` >= 0) reads up to the log end rather
    than the high watermark, and its fetch offset, which is its own log end,
    is reported to the partition once, on the first pass: that is how the
    leader learns the follower's progress.
    """

    def __init__(self, ctx: RequestContext, request: FetchRequest) -> None:
        self.ctx = ctx
        self.request = request
        self.by_id = ctx.api_version >= TOPIC_IDS_FROM
        self.replica_id = replica_id_of(request, ctx.api_version)
        self.partitions: list[Partition] = []  # resolved partitions, for waiting on appends
        self.hinted_leaders: set[int] = set()
        self.bytes = 0
        self.errors = False
        self.passes = 0
        # A follower that told the high watermark it knows (v18) also waits for it to move.
        self.reports_hwm = self.from_follower and any(
            fp.high_watermark != UNKNOWN_HIGH_WATERMARK
            for topic in request.topics
            for fp in topic.partitions
        )
        self.hwm_news = False  # a reporting follower is behind on some high watermark

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0

    def run(self) -> list[FetchableTopicResponse]:
        replicas = self.ctx.broker.replicas
        remaining = self.request.max_bytes
        min_one = True
        self.bytes = 0
        self.errors = False
        self.hwm_news = False
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
                    partition = replicas.partition_for(name, fp.partition, fp.current_leader_epoch)
                    self.partitions.append(partition)
                    limit = min(fp.partition_max_bytes, remaining)
                    records = self.read(partition, fp, limit, min_one)
                except KafkaError as exc:
                    self.fail(pd, name, exc)
                    continue
                pd.high_watermark = partition.high_watermark
                if self.reports_hwm and fp.high_watermark < partition.high_watermark:
                    self.hwm_news = True
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
        self.passes += 1
        return responses

    def read(self, partition: Partition, fp: FetchPartition, limit: int, min_one: bool):
        follower = self.from_follower
        records = partition.read_records(fp.fetch_offset, limit, min_one, for_follower=follower)
        if follower and not self.passes:
            partition.update_follower(self.replica_id, fp.fetch_offset)
        return records

    def fail(self, pd: PartitionData, name: str | None, exc: KafkaError) -> None:
        # Kafka reports -1 for every offset of a partition it could not read.
        pd.error_code = exc.code
        pd.last_stable_offset = pd.log_start_offset = -1
        self.errors = True
        if exc.code in HINTED_ERRORS and self.ctx.api_version >= CURRENT_LEADER_FROM:
            hint = self.ctx.broker.replicas.leader_hint(name, pd.partition_index)
            pd.current_leader = LeaderIdAndEpoch(hint.leader_id, hint.leader_epoch)
            self.hinted_leaders.add(hint.leader_id)


@api(fetch, 4, 18)
async def handle_fetch(ctx: RequestContext, request: FetchRequest) -> FetchResponse:
    error = session_error(request)
    if error:
        return FetchResponse(error_code=error, session_id=0)
    plan = FetchPlan(ctx, request)
    responses = plan.run()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, request.max_wait_ms) / 1000
    while plan.bytes < request.min_bytes and not (plan.errors or plan.hwm_news):
        timeout = deadline - loop.time()
        if timeout <= 0 or not plan.partitions:
            break
        woken = await ctx.broker.replicas.wait_for_append(
            plan.partitions,
            timeout,
            for_follower=plan.from_follower,
            and_high_watermark=plan.reports_hwm,
        )
        if not woken:
            break
        responses = plan.run()
    response = FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=responses)
    if plan.hinted_leaders and ctx.api_version >= NODE_ENDPOINTS_FROM:
        response.node_endpoints = [
            NodeEndpoint(a.broker_id, a.host, a.port, a.rack)
            for a in leader_endpoints(ctx, plan.hinted_leaders)
        ]
    return response
